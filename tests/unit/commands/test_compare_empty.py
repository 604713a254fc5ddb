"""``compare --pages`` judges the baseline's fitness against what an empty output scores on the judged pages, which it
scores itself from the page set — on ``checks`` (olmOCR-bench-like pages: mostly ``absent`` checks and a blank
page, where reading nothing passes 61% of the checks) and on a truth text (ned, where it scores the worst value).
A baseline exactly at the empty output's mean, or below it, is ``baseline_unfit`` though far above the fixed floor;
just above it is judged; both numbers are printed. ``score`` states the same empty-output mean (one function)."""

from __future__ import annotations

import json

import pytest

from tests.support.cli import run_cli
from tests.support.olmocr_like import PRESENT, checks_pageset, write_outputs

GARBAGE = "lorem ipsum dolor"  # passes every absent check, no present one


@pytest.fixture(scope="module")
def pages(tmp_path_factory):
    return checks_pageset(tmp_path_factory.mktemp("olmocr-like") / "set")


def _compare(pages, tmp_path, texts: dict[str, str], *flags):
    base = write_outputs(tmp_path / "base", texts)
    rc, out, err = run_cli("compare", "--pages", pages.root, base, base, "--metric", "checks", *flags)
    assert rc in (0, 1, 2), err
    return rc, out


def _garbage(pages, blank: str = "") -> dict[str, str]:
    return {i: blank if i == pages.blank else GARBAGE for i in pages.ids}


def test_a_baseline_at_the_empty_output_is_unfit(pages, tmp_path):
    """Garbage that leaves the blank page blank passes exactly what reading nothing passes, page for page."""
    rc, out = _compare(pages, tmp_path, _garbage(pages), "--json")
    v = json.loads(out)
    assert rc == 2 and (v["verdict"], v["reason"]) == ("inconclusive", "baseline_unfit")
    assert v["baseline_score"] == v["empty_output_mean"] == pytest.approx((39 * 0.6 + 1.0) / 40)
    assert v["baseline_score"] > v["baseline_floor"] == 0.2  # the floor alone would have judged it
    assert v["pages_needed"] is None  # no page count makes a baseline read


def test_just_below_and_just_above_the_empty_output(pages, tmp_path):
    """Below: the garbage also fills the blank page (fails its baseline check). Above: one page of garbage also
    carries one present sentence (one check more than reading nothing, on one page of 40)."""
    _, out = _compare(pages, tmp_path / "below", _garbage(pages, GARBAGE), "--json")
    below = json.loads(out)
    assert below["reason"] == "baseline_unfit" and below["baseline_score"] < below["empty_output_mean"]
    above_texts = _garbage(pages) | {pages.ids[0]: f"{GARBAGE}\n\n{PRESENT[0]}"}
    _, out = _compare(pages, tmp_path / "above", above_texts, "--json")
    above = json.loads(out)
    assert above["reason"] != "baseline_unfit"
    assert above["baseline_score"] == pytest.approx(above["empty_output_mean"] + 0.2 / 40)


def test_both_numbers_are_printed(pages, tmp_path):
    rc, out = _compare(pages, tmp_path, _garbage(pages, GARBAGE))
    assert rc == 2 and "INCONCLUSIVE (baseline_unfit)" in out
    assert "baseline score 0.5850 (floor 0.2, an empty output 0.6100 on the same pages)" in out
    assert "no better than an empty output's 0.6100 on the same pages" in out


def test_a_reader_is_judged_and_score_states_the_same_mark(pages, tmp_path):
    reader = write_outputs(tmp_path / "reader", pages.reader)
    rc, out, err = run_cli("compare", "--pages", pages.root, reader, reader, "--metric", "checks", "--json")
    v = json.loads(out)
    assert v["reason"] != "baseline_unfit" and v["baseline_score"] == 1.0, err
    rc, out, err = run_cli("score", "--pages", pages.root, "--predictions", reader, "-o", tmp_path / "s.jsonl",
                           "--metrics", "checks", "--json")
    assert rc == 0, err
    assert json.loads(out)["checks_empty_output"] == v["empty_output_mean"]


def test_a_truth_text_metric_prints_the_empty_outputs_worst_value(tmp_path):
    """ned through ``compare_outputs``: an empty output scores 1 on every page with truth, printed beside the
    baseline's score."""
    from quantgate.heldout.synth import synth_pages
    from quantgate.io.pageset import load_pageset

    synth_pages(tmp_path / "set", 12, seed=4, profile="simple", calibration_fraction=0.0)
    ps = load_pageset(tmp_path / "set")
    base = write_outputs(tmp_path / "base", {p.id: ps.truth_text(p) or "" for p in ps.pages})
    rc, out, err = run_cli("compare", "--pages", tmp_path / "set", base, base, "--metric", "ned")
    assert "baseline score 0.0000 (floor 0.5, an empty output 1.0000 on the same pages)" in out, out + err


def test_pages_without_what_the_metric_scores_are_refused(tmp_path):
    from quantgate.heldout.synth import synth_pages

    synth_pages(tmp_path / "set", 4, seed=4, profile="simple", calibration_fraction=0.0)
    from quantgate.io.pageset import load_pageset

    base = write_outputs(tmp_path / "base", {p.id: "text" for p in load_pageset(tmp_path / "set").pages})
    rc, out, err = run_cli("compare", "--pages", tmp_path / "set", base, base, "--metric", "checks")
    assert rc == 65 and "none of the 4 compared page(s) carries what checks scores against" in err
