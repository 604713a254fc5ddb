"""What omnidoc15_formula_cdm costs: each of the demo's 13 formula pairs rendered (truth and prediction) and matched
one at a time, then all on 2 threads, timed. Prints a table and writes per_formula_cost.json here.

Run from the repository root after `make setup-cdm`: ``.venv/bin/python lab/2026-12-05-cdm/per_formula_cost.py``."""

from __future__ import annotations

import json
import os
import statistics
import time
from pathlib import Path

from quantgate.scoring.omnidoc import cdm, load_truth, v15

HERE = Path(__file__).resolve().parent
DEMO = HERE.parents[2] / "shared" / "reference" / "omnidocbench" / "demo_data"


def main() -> None:
    truth_file = DEMO / "omnidocbench_demo" / "OmniDocBench_demo.json"
    truth = load_truth(truth_file)
    preds = {p.page_id: (DEMO / "end2end" / f"{p.page_id}.md").read_text(encoding="utf-8") for p in truth.values()}
    pairs = [pair for p in truth.values() for pair in v15.formula_pairs(preds[p.page_id], p)]
    each = []
    for gt, pred in pairs:
        start = time.perf_counter()
        cdm.formula_cdm(gt, pred)
        each.append(time.perf_counter() - start)
    start = time.perf_counter()
    cdm.set_cdm({"all": pairs}, workers=2)
    threaded = time.perf_counter() - start
    out = {"cpus": os.cpu_count(), "pairs": len(pairs), "seconds_per_pair": [round(s, 3) for s in each],
           "median_s_per_pair": round(statistics.median(each), 3), "serial_s": round(sum(each), 2),
           "two_threads_s": round(threaded, 2)}
    (HERE / "per_formula_cost.json").write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    print(f"{'what':<52}{'seconds':>10}")
    for label, value in (("median per formula pair (truth + prediction), serial", out["median_s_per_pair"]),
                         (f"all {len(pairs)} pairs, serial", out["serial_s"]),
                         (f"all {len(pairs)} pairs, 2 threads", out["two_threads_s"])):
        print(f"{label:<52}{value:>10}")
    print(f"on {out['cpus']} CPUs")


if __name__ == "__main__":
    main()
