"""A real study with sequential verdicts against the same study fixed: the bundled reader served
by `transformers serve` on CPU, its synthetic reader pages, bf16 against fp8-dynamic, mixed and
harmful-int2. Runs `quantgate study` twice in fresh folders — fixed first, then with a `sequential:` block —
and writes the pages each variant's accuracy pass served, both designs' verdicts, where each sequential
pass stopped, the wall times and each run's time budget (overhead share) to
benchmarks/results/sequential_study.json (or --out).

    python benchmarks/sequential_study.py [--pages 250] [--variants bf16,fp8-dynamic,mixed,harmful-int2]

The study is the demo's (quantgate.study.demo.demo_study: one torch thread, 48 tokens, margins ned/cer 0.01,
bow_f1 0.02, 10,000 resamples, the baseline's noise run at concurrency 2) without lm-eval. Sequential:
O'Brien–Fleming spending, 4 equally spaced looks over every held-out page (the first at 60 pages at
least). The machine's load average is recorded: it is shared, so wall times depend on what else runs.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def study_body(pages: int, variants: list[str], sequential: dict | None) -> dict:
    from quantgate.study.demo import demo_study

    body = demo_study(pages, variants)
    body.pop("lm_eval")  # the accuracy passes and speed are under test here, not lm-eval
    if sequential is not None:
        body["sequential"] = sequential
    return body


def run(work: Path, name: str, body: dict) -> dict:
    path = work / f"{name}.yaml"
    path.write_text(yaml.safe_dump(body, sort_keys=False))
    out = work / name
    cmd = [sys.executable, "-m", "quantgate", "study", str(path), "-o", str(out)]
    load0 = os.getloadavg()[0]
    t0 = time.time()
    r = subprocess.run(cmd, env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True)
    wall = time.time() - t0
    if r.returncode != 0:
        sys.exit(f"{name}: quantgate study failed ({r.returncode}):\n{r.stderr[-3000:]}")
    s = json.loads((out / "summary.json").read_text())
    c0 = s["compare_level"]
    served = {v["name"]: next(lv["n_requests"] for lv in v["levels"] if lv["concurrency"] == c0) for v in s["variants"]}
    other = {v["name"]: sum(lv["n_requests"] for lv in v["levels"] if lv["concurrency"] != c0) for v in s["variants"]}
    tb = s["time_budget"]
    gate = subprocess.run([sys.executable, "-m", "quantgate", "gate", str(out)], env={**os.environ, "PYTHONPATH": str(ROOT)},
                          capture_output=True, text=True)
    return {
        "wall_s": round(wall, 1), "load_avg_1m_before": round(load0, 2), "load_avg_1m_after": round(os.getloadavg()[0], 2),
        "accuracy_pages_served": served, "other_level_pages_served": other,
        "verdicts": {f"{v['variant']} {v['metric']}": {"verdict": v["verdict"], "reason": v["reason"], "n": v["n"],
                                                      "delta": v["delta"], "ci": [v["ci_low"], v["ci_high"]]}
                     for v in s["verdicts"]},
        "stopping": {v["name"]: {"look": v["sequential"]["look"], "n_looks": len(v["sequential"]["looks"]),
                                 "looks": v["sequential"]["looks"], "pages_used": v["sequential"]["pages_used"],
                                 "n_max": v["sequential"]["n_max"], "stop_reason": v["sequential"]["stop_reason"],
                                 "decided_at_look": {m: x["decided_at_look"] for m, x in v["sequential"]["metrics"].items()}}
                     for v in s["variants"] if v.get("sequential")},
        "time_budget": {"wall_s": tb["wall_s"], "engine_start_s": tb["engine_start_s"], "generation_s": tb["generation_s"],
                        "overhead_s": tb["overhead_s"], "overhead_share": round(tb["overhead_share"], 4),
                        "parts": tb["rows"]},
        "gate_exit_code": gate.returncode,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pages", type=int, default=250, help="synthetic reader pages (about 80%% held out)")
    ap.add_argument("--variants", default="bf16,fp8-dynamic,mixed,harmful-int2")
    ap.add_argument("--looks", type=int, default=4)
    ap.add_argument("--work", type=Path, help="folder for the two studies (default: a temporary one)")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "sequential_study.json")
    a = ap.parse_args()
    variants = a.variants.split(",")
    work = a.work or Path(tempfile.mkdtemp(prefix="seqstudy-"))
    work.mkdir(parents=True, exist_ok=True)
    seq_block = {"looks": a.looks, "spending": "obrien_fleming"}
    fixed = run(work, "fixed", study_body(a.pages, variants, None))
    seq = run(work, "sequential", study_body(a.pages, variants, seq_block))
    cands = [v for v in variants[1:]]
    same = {k: fixed["verdicts"][k]["verdict"] == seq["verdicts"][k]["verdict"] for k in fixed["verdicts"]}
    total = {d: sum(r["accuracy_pages_served"][v] for v in cands) for d, r in (("fixed", fixed), ("sequential", seq))}
    res = {
        "command": f"python benchmarks/sequential_study.py --pages {a.pages} --variants {a.variants} --looks {a.looks}",
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "cpus": os.cpu_count(), "cpu": platform.machine(),
        "study": {"pages_synthesized": a.pages, "variants": variants, "backend": "transformers serve, CPU, 1 thread",
                  "sequential": seq_block},
        "candidate_accuracy_pages": total, "pages_saved_share": round(1 - total["sequential"] / total["fixed"], 4),
        "same_verdicts": all(same.values()), "verdict_agreement": same,
        "fixed_wall_s": fixed["wall_s"], "sequential_stopping_wall_s": seq["wall_s"],
        "fixed": fixed, "sequential": seq,
    }
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(res, indent=1) + "\n")
    print(f"{'variant':<14} {'fixed pages':>11} {'seq pages':>9}  stop")
    for v in variants:
        st = seq["stopping"].get(v)
        print(f"{v:<14} {fixed['accuracy_pages_served'][v]:>11} {seq['accuracy_pages_served'][v]:>9}  "
              + (f"look {st['look']} of {st['n_looks']} ({st['stop_reason']})" if st else "baseline: whole budget"))
    print(f"candidates' accuracy pages: fixed {total['fixed']}, sequential {total['sequential']} "
          f"({res['pages_saved_share']:.0%} saved); same verdicts: {res['same_verdicts']}")
    print(f"wall: fixed {fixed['wall_s']} s, sequential {seq['wall_s']} s; overhead share: fixed "
          f"{fixed['time_budget']['overhead_share']:.1%}, sequential {seq['time_budget']['overhead_share']:.1%}")
    for k, ok in same.items():
        if not ok:
            print(f"  differs: {k}: fixed {fixed['verdicts'][k]['verdict']}, sequential {seq['verdicts'][k]['verdict']}")
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
