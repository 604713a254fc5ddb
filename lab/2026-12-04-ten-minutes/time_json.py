"""time.json for one study folder, from the study's own records: summary.json's time budget (the wall time of
`quantgate study` from its start to the verdict and speed table, split by part), the variants, pages and levels it
judged, and the GPU it ran on; `command_wall_s` is the session's own clock around the command, for comparison.

    python lab/2026-12-04-ten-minutes/time_json.py STUDY_DIR --gpu-file gpu.txt --command-wall-s S -o time.json
"""

from __future__ import annotations

import argparse
import gzip
import json
from pathlib import Path


def load(p: Path) -> dict:
    if p.is_file():
        return json.loads(p.read_text())
    return json.loads(gzip.decompress(p.with_suffix(".json.gz").read_bytes()))


def time_json(study: Path, gpu: str, command_wall_s: float | None) -> dict:
    s, st = load(study / "summary.json"), load(study / "study.json")
    tb = s["time_budget"]
    parts: dict[str, float] = {}
    for r in tb["rows"]:
        parts[r["part"]] = round(parts.get(r["part"], 0.0) + r["wall_s"], 1)
    quantize = {r["variant"]: {"wall_s": r["wall_s"], "reused": r["reused"]} for r in tb["rows"]
                if r["part"] == "quantize"}
    speed = st.get("speed") or {}
    return {"wall_s": tb["wall_s"], "gpu": gpu, "variants": [v["name"] for v in st["variants"]],
            "pages": st.get("limit"), "levels": {"accuracy": st["concurrency"][:1],
                                                  "speed": speed.get("levels") or st["concurrency"],
                                                  "waves": speed.get("repeats")},
            "command_wall_s": command_wall_s, "parts_s": parts, "quantize": quantize,
            "engine_start_s": tb["engine_start_s"], "server_starts_beside_s": tb["background_s"],
            "generation_s": tb["generation_s"], "overhead_s": tb["overhead_s"]}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("study", type=Path)
    ap.add_argument("--gpu-file", type=Path)
    ap.add_argument("--command-wall-s", type=float)
    ap.add_argument("-o", type=Path, required=True)
    a = ap.parse_args()
    gpu = a.gpu_file.read_text().strip().split(",")[1].strip() if a.gpu_file and a.gpu_file.is_file() and \
        "," in a.gpu_file.read_text() else "none (CPU dry run)"
    out = time_json(a.study, gpu, a.command_wall_s)
    a.o.write_text(json.dumps(out, indent=1) + "\n")
    print(json.dumps(out))


if __name__ == "__main__":
    main()
