"""Scoring throughput on this machine: `ned` over 10,000 synthetic page pairs of ~3,000
characters, and one 10,000-resample paired bootstrap over 10,000 pages.
Target: >= 1,000 pages/s for ned, bootstrap < 2 s. Prints a table, writes JSON.

    python benchmarks/scoring_throughput.py [--pages 10000] [--out benchmarks/results/scoring_throughput.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import time
from pathlib import Path

import numpy as np

from quantgate.judge.stats import percentile_ci
from quantgate.scoring.metrics import get_metric, score_one


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pages", type=int, default=10_000)
    ap.add_argument("--chars", type=int, default=3_000)
    ap.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "scoring_throughput.json")
    a = ap.parse_args()
    rng = random.Random(0)
    alphabet = "abcdefghijklmnopqrstuvwxyz      .,0123456789\n"
    truths = ["".join(rng.choice(alphabet) for _ in range(a.chars)) for _ in range(200)]
    pairs = []
    for i in range(a.pages):
        t = truths[i % len(truths)]
        p = list(t)
        for _ in range(rng.randint(0, 150)):  # up to ~5% character edits
            p[rng.randrange(len(p))] = rng.choice(alphabet)
        pairs.append(("".join(p), t))
    ned = get_metric("ned")
    t0 = time.perf_counter()
    vals = [score_one(ned, p, t, []) for p, t in pairs]
    t_ned = time.perf_counter() - t0
    d = np.asarray(vals) - np.random.default_rng(0).permutation(vals)
    t0 = time.perf_counter()
    percentile_ci(d, 0.90, 10_000, seed=0)
    t_boot = time.perf_counter() - t0
    res = {"machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "processor": platform.processor()},
           "pages": a.pages, "chars_per_page": a.chars,
           "ned_pages_per_s": a.pages / t_ned, "ned_target_pages_per_s": 1000,
           "bootstrap_pages": a.pages, "bootstrap_resamples": 10_000, "bootstrap_s": t_boot, "bootstrap_target_s": 2.0}
    print(f"{'measure':<38}{'value':>12}{'target':>10}")
    print(f"{'ned pages/s (~3,000 chars/page)':<38}{res['ned_pages_per_s']:>12,.0f}{'>= 1000':>10}")
    print(f"{'bootstrap 10k resamples x 10k pages, s':<38}{t_boot:>12.2f}{'< 2':>10}")
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(res, indent=2) + "\n")
    print(f"-> {a.out}")


if __name__ == "__main__":
    main()
