"""Prints the olmOCR agreement table of docs/metrics.md ("olmOCR-bench checks"): passes per system, upstream vs quantgate, on the
bundled sample, and agreement check type by check type. Run from the repository root:

    PYTHONPATH=$PWD python -m tests.support.olmocr_agreement [--repeat 1] [--json FILE]

Math rows need Chromium (quantgate) and Playwright plus upstream's katex/render.py (upstream)."""

from __future__ import annotations

import argparse
import json
import tempfile
from collections import defaultdict
from pathlib import Path

from quantgate.scoring import olmocr_math
from quantgate.scoring.olmocr_checks import run_check

from . import upstream_olmocr
from .test_olmocr_checks import SYSTEMS, outputs, sample_checks


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=None, help="only this repeat (default: every repeat)")
    ap.add_argument("--json", type=Path, default=None, help="also write the numbers here")
    args = ap.parse_args()
    up = upstream_olmocr.load(Path(tempfile.mkdtemp(prefix="olmocr-agreement-")))
    math_ok = olmocr_math.skip_reason() is None and upstream_olmocr.upstream_math_reason() is None
    per_system: dict = defaultdict(lambda: defaultdict(lambda: [0, 0, 0]))  # [checks run, upstream, ours]
    per_check: dict = defaultdict(lambda: [0, 0])  # id -> [compared, agreed]
    kinds: dict = {}
    for c in sample_checks():
        if c["type"] == "math" and not math_ok:
            continue
        kinds[c["id"]] = c["type"]
        for system in SYSTEMS:
            for md in outputs(system, c):
                if args.repeat is not None and not md.stem.endswith(f"_repeat{args.repeat}"):
                    continue
                content = md.read_text("utf-8")
                theirs = bool(up.load_single_test(dict(c)).run(content)[0])
                ours = bool(run_check(c, content))
                group = "math" if c["type"] == "math" else "non-math"
                row = per_system[system][group]
                row[0], row[1], row[2] = row[0] + 1, row[1] + theirs, row[2] + ours
                per_check[c["id"]][0] += 1
                per_check[c["id"]][1] += theirs == ours
    print(f"repeat: {args.repeat or 'all'}; math: {'run' if math_ok else 'not run'}\n")
    print("| system | checks (non-math) | upstream passes | quantgate passes | checks (math) | upstream | quantgate |")
    print("|---|---|---|---|---|---|---|")
    for system in SYSTEMS:
        nm, m = per_system[system]["non-math"], per_system[system]["math"]
        print(f"| {system} | {nm[0]} | {nm[1]} | {nm[2]} | {m[0]} | {m[1]} | {m[2]} |")
    by_type: dict = defaultdict(lambda: [0, 0, 0])  # checks, comparisons, agreed
    for cid, (n, agreed) in per_check.items():
        t = by_type[kinds[cid]]
        t[0], t[1], t[2] = t[0] + 1, t[1] + n, t[2] + agreed
    print("\n| check type | checks | comparisons (check x output) | agreed | checks with 100% agreement |")
    print("|---|---|---|---|---|")
    for kind, (n, comp, agreed) in sorted(by_type.items()):
        full = sum(1 for cid, (c_n, c_a) in per_check.items() if kinds[cid] == kind and c_n == c_a)
        print(f"| {kind} | {n} | {comp} | {agreed} | {full} of {n} |")
    if args.json:
        args.json.write_text(json.dumps({"repeat": args.repeat, "math_run": math_ok, "per_system": per_system,
                                         "per_check": per_check}, indent=1))


if __name__ == "__main__":
    main()
