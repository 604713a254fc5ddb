"""Does an idle server beside the measured one move its speed? The same variants' waves measured with three idle
neighbours on the GPU (cold/ and warm/: servers: auto ran all four at once) and alone (alone/: servers:
one_at_a_time, bf16 and fp8-dynamic only), from the committed speed records and summaries.

    python lab/2026-12-04-ten-minutes/neighbours.py -o lab/2026-12-04-ten-minutes/neighbours.json
"""

from __future__ import annotations

import argparse
import gzip
import json
from pathlib import Path

HERE = Path(__file__).resolve().parent
RUNS = {"alone": "one_at_a_time: no other server on the GPU", "cold": "all at once: three idle neighbours (cold study)",
        "warm": "all at once: three idle neighbours (warm study)"}


def wave_tok_s(path: Path, c: int) -> list[float]:
    """Output tokens per second of each wave: its requests' completion tokens over the wave's span."""
    waves: dict[int, list[dict]] = {}
    for line in gzip.decompress(path.read_bytes()).decode().splitlines():
        r = json.loads(line)
        if r["concurrency"] == c and not r.get("error"):
            waves.setdefault(r["wave"], []).append(r)
    return [round(sum(r["completion_tokens"] for r in rs) / (max(r["end"] for r in rs) - min(r["start"] for r in rs)), 1)
            for _, rs in sorted(waves.items())]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-o", type=Path, required=True)
    a = ap.parse_args()
    out: dict = {"runs": RUNS, "variants": {}}
    for v in ("bf16", "fp8-dynamic"):
        for c in (1, 32):
            row = {}
            for run in RUNS:
                s = json.loads(gzip.decompress((HERE / run / "summary.json.gz").read_bytes()))
                iv = next(x for x in s["variants"] if x["name"] == v).get("speedup_interval", {}).get(str(c), {})
                row[run] = {"wave_tok_s": wave_tok_s(HERE / run / "runs" / v / "speed-timings.jsonl.gz", c),
                            "vs_bf16": [iv.get("ratio"), iv.get("low"), iv.get("high")] if v != "bf16" else None}
            out["variants"].setdefault(v, {})[str(c)] = row
            print(v, f"c={c}", {r: x["wave_tok_s"] for r, x in row.items()},
                  {r: x["vs_bf16"] and [round(y, 3) for y in x["vs_bf16"]] for r, x in row.items()})
    out["command"] = "python lab/2026-12-04-ten-minutes/neighbours.py -o lab/2026-12-04-ten-minutes/neighbours.json"
    a.o.write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
