"""`quantgate init` + `study` + `gate` on olmOCR-bench's sample PDFs with both of its checks files
(dataset.jsonl and blanks.jsonl, `--checks` given twice), end to end. The bundled reader was trained on
synthetic pages and cannot read these: the blank page's check (output at most 10 characters) is the only one
it passes, so the baseline scores below its checks floor and the honest outcome is `baseline_unfit` —
inconclusive, gate exit 2 — not a pass."""

import json
import re
import shutil
import subprocess
import sys

import pytest

from quantgate.io.pageset import split_of
from quantgate.schema.metrics import METRICS
from quantgate.study.demo import READER
from tests.support.paths import OLMOCR_SAMPLE, oracle_missing

# the blank page and six pages whose checks need the text read (present/table/math/order): few pages, so fast
PDFS = ["blank_book_pg1", "discoverworld_crazy_table4", "olmo2-pg4", "mathfuncs", "lincoln_letter", "buildingnotes",
        "test-graphical-text"]
BLANK = "blank_book_pg1_pg1"  # the page id `pages import` gives page 1 of blank_book_pg1.pdf


def _qg(*args, **kw):
    return subprocess.run([sys.executable, "-m", "quantgate", *args], capture_output=True, text=True, **kw)


@pytest.mark.slow  # init, then a study of bf16 + fp8-dynamic on the CPU: about 4 minutes
@pytest.mark.skipif(oracle_missing(OLMOCR_SAMPLE) is not None, reason=oracle_missing(OLMOCR_SAMPLE) or "")
def test_init_study_gate_on_the_olmocr_sample_is_baseline_unfit(tmp_path):
    pdfs = tmp_path / "pdfs"
    pdfs.mkdir()
    for name in PDFS:
        shutil.copy(OLMOCR_SAMPLE / "pdfs" / f"{name}.pdf", pdfs)
    yml = tmp_path / "study.yaml"
    # split seed and calibration share chosen so the blank page's document is held out (asserted below) and one
    # document goes to calibration; the split is by a hash of (seed, document), and seed 3 would calibrate on it
    assert split_of("blank_book_pg1", 3, 0.2) == "calibration"
    r = _qg("init", "--model", str(READER), "--pages", str(pdfs), "--checks", str(OLMOCR_SAMPLE / "dataset.jsonl"),
            "--checks", str(OLMOCR_SAMPLE / "blanks.jsonl"), "--variants", "fp8-dynamic", "--calibration-fraction",
            "0.2", "--split-seed", "1", "-o", str(yml), timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "name pages that were not imported" in r.stdout  # the sample's other PDFs' checks, listed
    pages = {p["id"]: p for p in map(json.loads, (tmp_path / "pages" / "pages.jsonl").read_text().splitlines())}
    assert set(pages) == {f"{n}_pg1" for n in PDFS}
    blank = pages[BLANK]
    assert blank["split"] == "heldout"
    assert [c["id"] for c in blank["checks"]] == ["test1_blank"]  # from blanks.jsonl, the second --checks file
    heldout = [p for p in pages.values() if p["split"] == "heldout"]
    assert len(heldout) == 6 and all(p["checks"] for p in heldout)
    text = yml.read_text()
    assert re.search(r"^metrics: \[checks\]", text, re.M)  # checks only: no truth was given
    # a small budget: the reader's outputs here are garbage at any length, and the blank page's check reads
    # at most 10 characters
    yml.write_text(re.sub(r"^max_tokens: .*$", "max_tokens: 24", text, flags=re.M))

    r = _qg("study", str(yml), cwd=str(tmp_path), timeout=1500)
    assert r.returncode == 0, r.stderr[-3000:]
    out = tmp_path / "reader-out"
    summ = json.loads((out / "summary.json").read_text())
    assert summ["complete"]
    [v] = summ["verdicts"]
    floor = METRICS["checks"].baseline_floor
    assert (v["variant"], v["metric"]) == ("fp8-dynamic", "checks")
    assert (v["verdict"], v["reason"]) == ("inconclusive", "baseline_unfit")
    assert v["n"] == len(heldout) and v["baseline_score"] < floor == v["baseline_floor"]
    base = {json.loads(x)["page_id"]: json.loads(x) for x in (out / "scores" / "bf16-c1.jsonl").read_text().splitlines()}
    assert base[BLANK]["checks"] == 1.0  # the blank page scored with its check: the reader's one pass

    g = _qg("gate", str(out), "--study", str(yml), timeout=600)
    assert g.returncode == 2, g.stdout + g.stderr
    assert g.stdout.splitlines()[0].startswith("baseline unfit: bf16 scores")
