"""`quantgate score --metrics checks` on olmOCR-bench's sample: olmOCR's pipeline's empty output for the blank page
scores 1.0, as upstream scores it, and the command states what an output that reads nothing scores on the pages it
scored (upstream's pass rate on an empty text, the bar a baseline must clear). Integration tier: PDFs imported."""

from __future__ import annotations

import json
import shutil

import pytest

from quantgate.io.scores import read_scores
from tests.support import upstream_olmocr
from tests.support.cli import run_cli as _qg
from tests.support.paths import OLMOCR_SAMPLE, oracle_missing

MISSING = oracle_missing(OLMOCR_SAMPLE / "pdfs") or upstream_olmocr.reference_missing_reason()
pytestmark = pytest.mark.skipif(MISSING is not None, reason=MISSING or "")
PDFS = ["blank_book_pg1", "lincoln_letter", "buildingnotes", "discoverworld_crazy_table4"]


def test_score_states_what_reading_nothing_scores(tmp_path, monkeypatch):
    monkeypatch.setenv("QUANTGATE_CHROMIUM", "none")  # math skipped and counted: the bar is over the checks run
    (tmp_path / "pdfs").mkdir()
    for name in PDFS:
        shutil.copy(OLMOCR_SAMPLE / "pdfs" / f"{name}.pdf", tmp_path / "pdfs")
    rc, _, err = _qg("pages", "import", tmp_path / "pdfs", "-o", tmp_path / "pages", "--checks",
                     OLMOCR_SAMPLE / "dataset.jsonl", "--checks", OLMOCR_SAMPLE / "blanks.jsonl",
                     "--calibration-fraction", "0", "--megapixels", "0.3")
    assert rc == 0, err
    (tmp_path / "outputs").mkdir()
    for name in PDFS:  # olmOCR's pipeline's outputs for these pages (the blank page's file is empty)
        shutil.copy(OLMOCR_SAMPLE / "olmocr_pipeline" / f"{name}_pg1_repeat1.md", tmp_path / "outputs")
    args = ("score", "--pages", tmp_path / "pages", "--predictions", tmp_path / "outputs", "-o",
            tmp_path / "s.jsonl", "--metrics", "checks")
    rc, out, err = _qg(*args, "--json")
    assert rc == 0, err
    rows = read_scores(tmp_path / "s.jsonl")
    blank = rows["blank_book_pg1_pg1"]
    assert blank.empty and blank.error is None and blank.value("checks") == 1.0  # upstream passes it

    (tmp_path / "upstream-cache").mkdir()
    upstream = upstream_olmocr.load(tmp_path / "upstream-cache")
    pages = [json.loads(x) for x in (tmp_path / "pages" / "pages.jsonl").read_text().splitlines()]
    rates = []
    for p in pages:
        ran = [c for c in p["checks"] if c["type"] != "math"]
        rates.append(sum(upstream.load_single_test(dict(c)).run("")[0] for c in ran) / len(ran))
    bar = json.loads(out)["checks_empty_output"]
    assert bar == pytest.approx(sum(rates) / len(rates)) and 0 < bar < 1

    rc, out, _ = _qg(*args)
    assert rc == 0 and f"checks: an output that reads nothing scores {bar:.4f} on these pages" in out
