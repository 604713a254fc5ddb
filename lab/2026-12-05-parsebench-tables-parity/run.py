"""Agreement counts of quantgate's parsebench_tables with upstream ParseBench's evaluator, page by page, on more
cases than the unit tests run: N generated pages (tests/unit/scoring/test_parsebench_tables_page.py's
strategies: truth tables against edited, garbled, merged, re-titled or missing predictions, each under one of
upstream's table settings) and OmniDocBench's demo pages under every setting. Prints the counts and writes
results.json beside this file.

    .venv/bin/python lab/2026-12-05-parsebench-tables-parity/run.py [N]
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
import time
from collections import Counter
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from quantgate.scoring.parsebench.tables.page import page_tables  # noqa: E402
from tests.support import parsebench_ref as P  # noqa: E402
from tests.unit.scoring.test_parsebench_tables_page import METAS, _truth, edited  # noqa: E402
from tests.unit.scoring.test_parsebench_tables_parse import _demo_pages, html_table, page_md  # noqa: E402

TOLERANCE = 1e-9


def compare(truth: str, pred: str, meta: dict, counts: Counter, differing: list) -> None:
    with contextlib.redirect_stdout(io.StringIO()):
        try:
            theirs = P.page_metrics([], pred, expected_markdown=truth, **meta)
        except (ValueError, IndexError):
            counts["upstream fails the page (a predicted span it cannot read): ours drops the table"] += 1
            return
    mine = page_tables(_truth(truth, meta), pred)
    t = (theirs.get("grits_trm_composite"), theirs.get("grits_con"), theirs.get("table_record_match"))
    m = (None, None, None) if mine is None else (mine.composite, mine.grits_con, mine.table_record_match)
    counts["cases"] += 1
    if m == t:
        counts["equal"] += 1
    elif all((a is None) == (b is None) and (a is None or abs(a - b) <= TOLERANCE) for a, b in zip(m, t, strict=True)):
        counts["within 1e-9"] += 1
    else:
        counts["differing"] += 1
        differing.append({"truth": truth, "pred": pred, "meta": meta, "ours": m, "upstream": t})
    c = m[0]
    counts["composite None" if c is None else "composite 0" if c == 0 else "composite 1" if c == 1
           else "composite in (0, 1)"] += 1


def main(n: int) -> dict:
    generated: Counter = Counter()
    differing: list = []

    @settings(max_examples=n, database=None, derandomize=True, suppress_health_check=list(HealthCheck), deadline=None)
    @given(st.data())
    def run(data):
        truth = data.draw(page_md())
        pred = data.draw(st.one_of(edited(truth), page_md(malformed=True), st.just(""), html_table()))
        compare(truth, pred, data.draw(st.sampled_from(METAS)), generated, differing)

    start = time.time()
    run()
    demo: Counter = Counter()
    for truth, pred in _demo_pages():
        for meta in METAS:
            compare(truth, pred, meta, demo, differing)
    return {"generated": dict(generated), "omnidocbench_demo": dict(demo), "differing": differing,
            "seconds": round(time.time() - start, 1)}


if __name__ == "__main__":
    out = main(int(sys.argv[1]) if len(sys.argv) > 1 else 1000)
    print(json.dumps({k: v for k, v in out.items() if k != "differing"}, indent=1))
    print(f"differing: {len(out['differing'])}")
    (Path(__file__).parent / "results.json").write_text(json.dumps(out, indent=1) + "\n")
