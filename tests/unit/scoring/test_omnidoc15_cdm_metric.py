"""Formula CDM as a per-page metric (``omnidoc15_formula_cdm``), with a stand-in for the renderer
(tests/support/cdm_stand_in.py; the real rendering is tests/integration/test_omnidoc15_cdm_metric.py): the page's
value is the mean over the formulas v1.5's match scores as formulas, a page renders once for the metric and the
row's units, asking for it without the toolchain is one InputError, and the family's name does not expand to it."""

import shutil

import pytest

from quantgate.errors import InputError
from quantgate.schema.metrics import FAMILIES, METRICS
from quantgate.scoring.metrics import get_metric, parse_metric_list, score_one
from quantgate.scoring.omnidoc import v15
from quantgate.scoring.units import page_units
from tests.support import cdm_stand_in

TRUTH = "Some words.\n\n$$a+b=c$$\n\n$$x^2$$\n"


def test_the_spec_is_a_v15_metric_higher_is_better_with_worst_zero():
    spec, m = METRICS[v15.CDM], get_metric(v15.CDM)
    assert spec.family == "omnidoc15" and spec.higher_is_better and spec.range == (0.0, 1.0)
    assert m.worst == 0.0 and m.needs == "omnidoc" and spec.bound == "range_if_changed"
    # the margin, one token more or fewer in a formula of n tokens: F1 2n/(2n + 1) or 2(n - 1)/(2n - 1)
    n = 25
    assert 1 - 2 * n / (2 * n + 1) < spec.margin < 1 - 2 * (n - 1) / (2 * n - 1)
    assert "fallback, not CDM" in METRICS[v15.FORMULA].doc


def test_a_pages_value_is_the_mean_over_its_formula_pairs_and_none_without_one(monkeypatch):
    rendered = cdm_stand_in.install(monkeypatch)
    m = get_metric(v15.CDM)
    pred = "Some words.\n\n$$a+b=d$$\n\n$$x^2$$\n"
    got = score_one(m, pred, None, [], omnidoc_truth=TRUTH)
    # the pairs as the match writes them (display delimiters \[ \]), x^2 equal on both sides
    assert rendered == [(r"\[a+b=c\]", r"\[a+b=d\]"), (r"\[x^2\]", r"\[x^2\]")]
    assert got == pytest.approx((cdm_stand_in.char_f1(*rendered[0]) + 1.0) / 2) and got < 1.0
    assert score_one(m, "Only words.", None, [], omnidoc_truth="Only words.\n") is None
    # an empty output: every truth formula unmatched, each scored against nothing (the stand-in's 0), not skipped
    assert score_one(m, "", None, [], omnidoc_truth=TRUTH) == 0.0


def test_a_formula_matched_to_text_is_not_a_cdm_pair(monkeypatch):
    cdm_stand_in.install(monkeypatch)
    m = get_metric(v15.CDM)
    # the truth formula a+b=c pairs with the text line, not with $$q$$: only x^2 is a formula pair
    assert score_one(m, "Some words.\n\na+b=c\n\n$$q$$\n\n$$x^2$$\n", None, [], omnidoc_truth=TRUTH) == 1.0


def test_the_metric_and_the_rows_units_render_a_page_once(monkeypatch):
    rendered = cdm_stand_in.install(monkeypatch)
    metrics = parse_metric_list("omnidoc15,omnidoc15_formula_cdm")
    pred = "Some words.\n\n$$a+b=d$$\n\n$$x^2$$\n"
    value = score_one(get_metric(v15.CDM), pred, None, [], omnidoc_truth=TRUTH)
    units = page_units(metrics, pred, TRUTH, None)
    total, count = units["omnidoc15"][v15.CDM]
    assert count == 2 and total / count == value
    assert len(rendered) == 2  # units read the metric's cached page, no second rendering
    assert v15.CDM not in page_units(parse_metric_list("omnidoc15"), pred, TRUTH, None)["omnidoc15"]


def test_asking_for_it_without_the_toolchain_is_one_input_error(monkeypatch):
    monkeypatch.setattr(shutil, "which", lambda name: None)
    with pytest.raises(InputError) as e:
        parse_metric_list("omnidoc15,omnidoc15_formula_cdm")
    assert "make setup-cdm" in str(e.value) and "texlive-xetex" in str(e.value)
    # the family's name runs anywhere: it does not expand to CDM, and its edit distance stays labelled
    assert [m.name for m in parse_metric_list("omnidoc15")] == FAMILIES["omnidoc15"] == list(v15.METRICS)
    assert v15.CDM not in FAMILIES["omnidoc15"]
