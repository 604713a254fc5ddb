"""``quantgate compare --pages SET BASELINE CANDIDATE --metric checks`` as a user runs it (its own process, its exit
code) on olmOCR-bench-like pages: the baseline is judged against what an empty output scores on the judged pages,
which the command scores itself — a baseline that reads nothing, or garbage that passes only what reading nothing
passes, is ``baseline_unfit`` (exit 2) with both numbers printed, though far above the fixed floor. On the stand-in
(``tests.support.olmocr_like``) always; on olmOCR-bench's own sample (``../shared``) with upstream's checks as the
oracle for what an empty output passes, and olmOCR's pipeline's outputs (its blank page's empty file included)
judged fit against it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from tests.support import upstream_olmocr
from tests.support.olmocr_like import checks_pageset, write_outputs
from tests.support.paths import OLMOCR_SAMPLE, REPO, oracle_missing

MISSING = oracle_missing(OLMOCR_SAMPLE / "pdfs") or upstream_olmocr.reference_missing_reason()


def quantgate(*args) -> subprocess.CompletedProcess:
    # math checks skipped and counted (no Chromium): the empty output's mark is over the checks that run
    env = os.environ | {"PYTHONPATH": str(REPO), "QUANTGATE_CHROMIUM": "none"}
    return subprocess.run([sys.executable, "-m", "quantgate", *map(str, args)], capture_output=True, text=True,
                          env=env, cwd=REPO, timeout=300)


def test_the_command_refuses_a_baseline_that_reads_nothing_on_the_stand_in(tmp_path):
    s = checks_pageset(tmp_path / "set")
    nothing = write_outputs(tmp_path / "nothing", dict.fromkeys(s.ids, ""))
    reader = write_outputs(tmp_path / "reader", s.reader)
    r = quantgate("compare", "--pages", s.root, nothing, reader, "--metric", "checks")
    assert r.returncode == 2, r.stderr
    assert "INCONCLUSIVE (baseline_unfit)" in r.stdout
    assert "baseline score 0.6100 (floor 0.2, an empty output 0.6100 on the same pages)" in r.stdout
    r = quantgate("compare", "--pages", s.root, reader, nothing, "--metric", "checks", "--json")
    v = json.loads(r.stdout)
    # the reader as the baseline is fit; the candidate that reads nothing is judged against it, not passed
    assert (v["baseline_score"], v["empty_output_mean"]) == (1.0, pytest.approx(0.61))
    assert v["reason"] != "baseline_unfit" and v["verdict"] != "within_noise" and v["delta"] == pytest.approx(-0.39)
    assert r.returncode == 2


@pytest.mark.skipif(MISSING is not None, reason=MISSING or "")
def test_olmocr_bench_sample_with_upstream_as_the_oracle(tmp_path):
    r = quantgate("pages", "import", OLMOCR_SAMPLE / "pdfs", "-o", tmp_path / "pages", "--checks",
                  OLMOCR_SAMPLE / "dataset.jsonl", "--checks", OLMOCR_SAMPLE / "blanks.jsonl",
                  "--calibration-fraction", "0", "--megapixels", "0.3")
    assert r.returncode == 0, r.stderr
    pages = [json.loads(x) for x in (tmp_path / "pages" / "pages.jsonl").read_text().splitlines()]
    # olmOCR's pipeline's first repeat of each page, named by page id (<pdf stem>_pg<N>_repeat1.md upstream)
    pipeline = tmp_path / "pipeline"
    pipeline.mkdir()
    for f in (OLMOCR_SAMPLE / "olmocr_pipeline").rglob("*_repeat1.md"):
        shutil.copy(f, pipeline / f"{f.name.removesuffix('_repeat1.md')}.md")
    ids = {f.stem for f in pipeline.iterdir()}
    assert ids == {p["id"] for p in pages}  # the pipeline wrote every page (an empty file for the blank one)
    nothing = write_outputs(tmp_path / "nothing", dict.fromkeys(sorted(ids), ""))

    r = quantgate("compare", "--pages", tmp_path / "pages", nothing, pipeline, "--metric", "checks", "--json")
    unfit = json.loads(r.stdout)
    assert r.returncode == 2 and unfit["reason"] == "baseline_unfit", r.stderr
    # the oracle: upstream's checks run on an empty text, each page's pass rate over the checks that ran, averaged
    (tmp_path / "upstream-cache").mkdir()
    upstream = upstream_olmocr.load(tmp_path / "upstream-cache")
    rates = []
    for p in pages:
        ran = [c for c in p["checks"] if c["type"] != "math"]
        if ran:
            rates.append(sum(upstream.load_single_test(dict(c)).run("")[0] for c in ran) / len(ran))
    assert unfit["empty_output_mean"] == pytest.approx(sum(rates) / len(rates))
    assert unfit["baseline_score"] == unfit["empty_output_mean"] > unfit["baseline_floor"]

    r = quantgate("compare", "--pages", tmp_path / "pages", pipeline, nothing, "--metric", "checks")
    assert "an empty output" in r.stdout and "baseline_unfit" not in r.stdout, r.stdout + r.stderr
    fit = quantgate("compare", "--pages", tmp_path / "pages", pipeline, pipeline, "--metric", "checks", "--json")
    v = json.loads(fit.stdout)
    assert v["reason"] == "too_few_pages" and v["baseline_score"] > v["empty_output_mean"]  # 23 pages, fit
