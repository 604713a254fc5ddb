"""The prefill-aware cost model checked on recipes it was not built from (no GPU time: the 2026-12-03 H200 session's
committed profiles, waves and served speed-ups).

The decode table (``speed.costtable``) and the prefill term (``speed.served``: the waves' first-token phase) are
built from bf16, fp8-all and nvfp4-all; for mixed, fp8-dynamic and nvfp4 the predicted served speed-up at c=1 and
c=32 is compared with the measured one (the ratio of the waves' mean output tok/s to BF16's, with its 90 % interval,
from that study's summary.json). The decode-only prediction is kept beside it for comparison.

    python lab/2026-12-04-ten-minutes/cost_model_check.py -o lab/2026-12-04-ten-minutes/cost_model_check.json

It also writes the prefill table beside it (``prefill-table.json``), which ``quantgate sensitivity recommend
--speed-table COST_TABLE --prefill-table prefill-table.json`` and ``quantgate tune … --prefill-table`` take.
"""

from __future__ import annotations

import argparse
import gzip
import json
import statistics
import sys
import tarfile
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
from quantgate.schema.run import RequestRecord  # noqa: E402
from quantgate.schema.speed import load_step_profile  # noqa: E402
from quantgate.speed.costtable import build_cost_table  # noqa: E402
from quantgate.speed.predict import predict_plan  # noqa: E402
from quantgate.speed.served import build_prefill_table, predict_served, wave_phases  # noqa: E402

SESSION = REPO / "lab" / "2026-12-03-h200-seven-variant-study" / "study"
BUILT_FROM = ["bf16", "fp8-all", "nvfp4-all"]
HELD_OUT = ["mixed", "fp8-dynamic", "nvfp4"]
LEVELS = [1, 32]
MEDIAN_TARGET, MAX_TARGET = 0.10, 0.15


def records(path: Path) -> list[RequestRecord]:
    # the committed speed records keep each random-weight output's length, not its text: the text is not read here
    return [RequestRecord.model_validate({**json.loads(line), "output": ""})
            for line in gzip.decompress(path.read_bytes()).decode().splitlines()]


def check(session: Path) -> dict:
    tmp = Path(tempfile.mkdtemp(prefix="cost-model-check-"))
    with tarfile.open(session / "speed.tar.xz") as t:
        t.extractall(tmp, filter="data")  # refuses links and paths outside tmp
    summary = json.loads(gzip.decompress((session / "summary.json.gz").read_bytes()))
    profiles = [load_step_profile(p) for p in sorted((tmp / "speed").glob("*/c*.profile.json"))]
    table = build_cost_table([p for p in profiles if p.variant in BUILT_FROM])
    phases = {f.parent.name: {c: wave_phases(records(f), c) for c in LEVELS}
              for f in sorted(session.glob("runs/*/speed-timings.jsonl.gz"))}
    plans = {p.variant: p.plan for p in profiles}
    prefill = build_prefill_table({v: {c: ph for c, ph in by.items() if ph} for v, by in phases.items()}, plans,
                                  BUILT_FROM, source=f"{session.relative_to(REPO)}: the waves' first-token phase")
    measured = {(v["name"], int(c)): iv for v in summary["variants"]
                for c, iv in (v.get("speedup_interval") or {}).items() if iv.get("ratio") is not None}
    rows: dict[str, dict[str, dict]] = {}
    errors, decode_only = [], []
    for p in profiles:
        if p.variant not in HELD_OUT or p.concurrency not in LEVELS:
            continue
        step = predict_plan(table, p.plan, levels=[p.concurrency])[0]
        served = predict_served(prefill, step, p.plan)
        m = measured[(p.variant, p.concurrency)]
        err = served.speedup / m["ratio"] - 1
        errors.append(abs(err))
        decode_only.append(abs(step.speedup / m["ratio"] - 1))
        rows.setdefault(p.variant, {})[str(p.concurrency)] = {
            "predicted": round(served.speedup, 4), "measured": round(m["ratio"], 4),
            "measured_interval": [m.get("low"), m.get("high")], "measured_waves": m.get("n_variant"),
            "abs_error": round(abs(err), 4), "prefill_ratio": round(served.prefill_ratio, 4),
            "step_ratio": round(served.step_ratio, 4), "decode_only_predicted": round(step.speedup, 4)}
    med, mx = statistics.median(errors), max(errors)
    return {"schema_version": 1, "held_out": HELD_OUT, "built_from": BUILT_FROM, "levels": LEVELS,
            "recipes": rows, "median_abs_error": round(med, 4), "max_abs_error": round(mx, 4),
            "targets": {"median_abs_error": MEDIAN_TARGET, "max_abs_error": MAX_TARGET},
            "passes": med <= MEDIAN_TARGET and mx <= MAX_TARGET,
            "decode_only": {"median_abs_error": round(statistics.median(decode_only), 4),
                            "max_abs_error": round(max(decode_only), 4)},
            "prefill_table": json.loads(prefill.model_dump_json()), "session": str(session.relative_to(REPO)),
            "command": "python lab/2026-12-04-ten-minutes/cost_model_check.py -o "
                       "lab/2026-12-04-ten-minutes/cost_model_check.json"}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--session", type=Path, default=SESSION)
    ap.add_argument("-o", type=Path, required=True)
    a = ap.parse_args()
    r = check(a.session)
    a.o.write_text(json.dumps(r, indent=1) + "\n")
    (a.o.parent / "prefill-table.json").write_text(json.dumps(r["prefill_table"], indent=1) + "\n")
    for v, by in r["recipes"].items():
        for c, x in by.items():
            print(f"{v:12} c={c:>2}: predicted {x['predicted']:.3f}x (decode only {x['decode_only_predicted']:.3f}x), "
                  f"measured {x['measured']:.3f}x [{x['measured_interval'][0]:.3f}, {x['measured_interval'][1]:.3f}], "
                  f"|error| {100 * x['abs_error']:.1f} %")
    print(f"median |error| {100 * r['median_abs_error']:.1f} %, max {100 * r['max_abs_error']:.1f} % "
          f"(decode only: {100 * r['decode_only']['median_abs_error']:.1f} %, "
          f"{100 * r['decode_only']['max_abs_error']:.1f} %): {'passes' if r['passes'] else 'fails'}")


if __name__ == "__main__":
    main()
