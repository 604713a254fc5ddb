"""What it costs a study to verify its page set on every start: every page image and truth
of a synthetic page set hashed against pages.jsonl (``io.pageset.verify_page_files``), the files read cold
from the page cache's point of view as far as this machine allows (the set is written first, then read back
in full each repeat); and a study's copy of a page set that lies outside its folder (``study.pagecopy``): made
once, then reused on each start (the source and the copy both hashed). Prints and writes JSON.

    PYTHONPATH=. python benchmarks/resume_verify.py [--pages 1000] [--out benchmarks/results/resume_verify.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path

from quantgate.heldout.synth import synth_pages
from quantgate.io.pageset import load_pageset, verify_page_files
from quantgate.study.pagecopy import ensure_page_copy


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pages", type=int, default=1000)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "resume_verify.json")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "pages"
        t0 = time.perf_counter()
        synth_pages(root, a.pages, seed=0, profile="doc", calibration_fraction=0.0)
        synth_s = time.perf_counter() - t0
        size = sum(p.stat().st_size for p in root.rglob("*") if p.is_file())
        times = []
        for _ in range(a.repeats):
            t0 = time.perf_counter()
            verify_page_files(load_pageset(root))
            times.append(time.perf_counter() - t0)
        out = Path(tmp) / "study"
        out.mkdir()
        t0 = time.perf_counter()
        ensure_page_copy(root, out, log=lambda s: None)
        copy_s = time.perf_counter() - t0
        reused = []
        for _ in range(a.repeats):
            t0 = time.perf_counter()
            assert ensure_page_copy(root, out, log=lambda s: None)
            reused.append(time.perf_counter() - t0)
    result = {"pages": a.pages, "files": 2 * a.pages, "bytes": size, "repeats": a.repeats,
              "verify_s_median": round(statistics.median(times), 4), "verify_s_all": [round(t, 4) for t in times],
              "ms_per_page": round(1000 * statistics.median(times) / a.pages, 4), "synth_s": round(synth_s, 1),
              "copy_first_s": round(copy_s, 4), "copy_reused_s_median": round(statistics.median(reused), 4),
              "copy_reused_s_all": [round(t, 4) for t in reused],
              "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform()}}
    print(json.dumps(result, indent=2))
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
