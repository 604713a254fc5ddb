"""An empty output on olmOCR-bench's checks, as upstream judges it (../shared/reference/olmocr-bench): an
``absent`` check and a blank-page ``baseline`` check pass it, the others fail, and quantgate's ``checks`` score of
an empty text is upstream's pass rate on it, not the metric's worst value. Only a page with no output at all
(missing) takes the worst value. The empty-output score (what a reader of nothing gets) is what a baseline must
beat to read the pages."""

import json
from collections import Counter
from pathlib import Path

import pytest

from quantgate.scoring import olmocr_math
from quantgate.scoring.metrics import get_metric, score_one
from quantgate.scoring.olmocr_checks import run_check
from tests.support import upstream_olmocr
from tests.support.paths import OLMOCR_SAMPLE, oracle_missing

needs_reference = pytest.mark.skipif(
    (upstream_olmocr.reference_missing_reason() or oracle_missing(OLMOCR_SAMPLE)) is not None,
    reason=upstream_olmocr.reference_missing_reason() or oracle_missing(OLMOCR_SAMPLE) or "")
CHECKS = get_metric("checks")
EMPTIES = ("", " \n\t \n")  # nothing, and only whitespace


@pytest.fixture(scope="module")
def upstream(tmp_path_factory):
    return upstream_olmocr.load(tmp_path_factory.mktemp("upstream-cache"))


def sample_pages() -> dict[str, list[dict]]:
    """page (pdf stem, page) → its checks, from both of the sample's checks files (the blank page included)."""
    pages: dict[str, list[dict]] = {}
    for f in ("dataset.jsonl", "blanks.jsonl"):
        for line in (OLMOCR_SAMPLE / f).read_text().splitlines():
            if line.strip():
                c = json.loads(line)
                pages.setdefault(f"{Path(c['pdf']).stem}_pg{c['page']}", []).append(c)
    return pages


def upstream_rate(upstream, checks: list[dict], content: str, math_runs: bool) -> float | None:
    """Upstream's pass rate on the page. Upstream's math check finds no equation in an empty page and fails it
    (its stand-in renderer here cannot render the reference, which it does before looking)."""
    verdicts = [upstream.load_single_test(dict(c)).run(content)[0] for c in checks if c["type"] != "math"]
    verdicts += [False] * (math_runs * sum(c["type"] == "math" for c in checks))
    return sum(verdicts) / len(verdicts) if verdicts else None


@needs_reference
@pytest.mark.parametrize("content", EMPTIES)
def test_each_check_judges_an_empty_output_as_upstream(upstream, content):
    tally: Counter = Counter()
    for checks in sample_pages().values():
        for c in checks:
            if c["type"] == "math":
                continue
            theirs = upstream.load_single_test(dict(c)).run(content)[0]
            assert run_check(c, content) == theirs, (c["id"], content)
            tally[c["type"], theirs] += 1
    assert tally["baseline", True] == 1 and tally["order", True] == tally["table", True] == 0
    if content == "":  # every absent check passes, every present check fails
        assert tally["absent", True] == 24 and tally["absent", False] == 0 and tally["present", True] == 0
    else:
        # upstream's quirk, followed: normalised to one space, a whitespace-only output matches any text with a
        # space under rapidfuzz's partial_ratio, so most present checks pass it and most absent checks fail it
        assert tally["present", True] == 28 and tally["absent", False] == 18


@needs_reference
@pytest.mark.parametrize("math_runs", [True, False])
def test_page_score_of_an_empty_output_is_upstreams_pass_rate(upstream, monkeypatch, math_runs):
    monkeypatch.setattr(olmocr_math, "skip_reason", lambda: None if math_runs else "math: rendering turned off")
    # scoring an empty page renders nothing real here: the stand-in finds no render, math fails
    monkeypatch.setattr(olmocr_math, "render_many", lambda *a, **k: {})
    not_worst = 0
    for pid, checks in sample_pages().items():
        theirs = upstream_rate(upstream, checks, "", math_runs)
        assert score_one(CHECKS, "", None, checks) == pytest.approx(theirs), pid
        spaces = upstream_rate(upstream, checks, EMPTIES[1], math_runs)
        assert score_one(CHECKS, EMPTIES[1], None, checks) == pytest.approx(spaces), pid
        assert score_one(CHECKS, None, None, checks) == CHECKS.worst  # no output at all: missing, the worst value
        not_worst += theirs not in (None, CHECKS.worst)
    assert not_worst >= 5, "the sample has pages an empty output scores above the worst value on"


@needs_reference
def test_blank_page_empty_output_passes_as_upstream(upstream):
    checks = sample_pages()["blank_book_pg1_pg1"]
    blank = (OLMOCR_SAMPLE / "olmocr_pipeline" / "blank_book_pg1_pg1_repeat1.md").read_text("utf-8")
    assert blank == ""  # olmOCR's own pipeline reads nothing on the blank page, which is right
    assert upstream_rate(upstream, checks, blank, True) == 1.0
    assert score_one(CHECKS, blank, None, checks) == 1.0
    # a page of text on the blank page fails its max_length baseline check, as upstream's
    assert score_one(CHECKS, "A whole paragraph of hallucinated text.", None, checks) == 0.0
