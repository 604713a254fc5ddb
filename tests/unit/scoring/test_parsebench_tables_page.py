"""A page's ParseBench table score (quantgate.scoring.parsebench.tables.page, ``parsebench_tables``) against
upstream's own evaluator (``ParseEvaluator.evaluate`` with the page's expected_markdown and table settings, run
from ../shared/reference/parsebench): its ``grits_con``, ``table_record_match`` and ``grits_trm_composite`` on
generated pages (truth tables against predictions that edit, drop, re-title, merge or garble them, under every
table setting) and on OmniDocBench's demo pages; equal within 1e-9 (the record match averages with numpy, which
may sum in another order). Then what holds without the oracle."""

from __future__ import annotations

import contextlib
import io
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from quantgate.scoring.parsebench.tables.page import TableTruth, page_score, page_tables
from tests.support import parsebench_ref as P
from tests.unit.scoring.test_parsebench_tables_parse import NEAR_TITLES, _demo_pages, html_table, page_md

ORACLE = P.reference_missing_reason()
needs_oracle = pytest.mark.skipif(bool(ORACLE), reason=ORACLE or "")
TOLERANCE = 1e-9
METAS = [{}, {"trm_unsupported": True}, {"allow_splitting_ambiguous_merged_tables": True},
         {"max_top_title_rows": 0}, {"max_top_title_rows": 2}]


def _truth(md: str, meta: dict) -> TableTruth:
    return TableTruth(type="expected_markdown", expected_markdown=md, **meta)


def _close(a: float | None, b: float | None) -> bool:
    return (a is None) == (b is None) and (a is None or abs(a - b) <= TOLERANCE)  # type: ignore[operator]


def same_as_upstream(truth_md: str, pred: str, meta: dict) -> bool:
    """Ours and upstream's evaluator agree on the page's three table numbers, within 1e-9 (the assertion message
    says how they differ); True when exactly equal. A page upstream's evaluator fails is not compared."""
    mine = page_tables(_truth(truth_md, meta), pred)
    try:
        with contextlib.redirect_stdout(io.StringIO()):  # upstream prints its progress
            theirs = P.page_metrics([], pred, expected_markdown=truth_md, **meta)
    except (ValueError, IndexError):  # a predicted span upstream cannot read fails its page; ours scores it
        assert mine is not None and 0.0 <= mine.composite <= 1.0
        return False
    t = (theirs.get("grits_trm_composite"), theirs.get("grits_con"), theirs.get("table_record_match"))
    m = (None, None, None) if mine is None else (mine.composite, mine.grits_con, mine.table_record_match)
    assert all(_close(a, b) for a, b in zip(m, t, strict=True)), (m, t, truth_md, pred, meta)
    return m == t


@st.composite
def edited(draw, truth: str) -> str:
    """A prediction made from the truth the way parsers go wrong: a cell's text changed, a row lost, the title
    row written as a heading above the table, tables merged side by side, <th> as <td>, the tables dropped."""
    pred = truth
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.integers(0, 6))
        if kind == 0:
            pred = re.sub(r"<td>([^<]*)</td>", lambda m: f"<td>{m.group(1)[::-1]}x</td>", pred, count=1)
        elif kind == 1:
            pred = re.sub(r"<tr>.*?</tr>", "", pred, count=1)
        elif kind == 2:
            pred = re.sub(r'<table><tr><t[hd] colspan="\d+">([^<]*)</t[hd]></tr>', r"## \1\n<table>", pred, count=1)
        elif kind == 3:
            pred = re.sub(r"</tr>(.*?)</table>\s*<table>(.*?)<tr>", r"</tr>\1", pred, count=1, flags=re.S)
        elif kind == 4:
            pred = pred.replace("<th", "<td").replace("</th>", "</td>")
        elif kind == 5:
            pred = re.sub(r"<table>.*?</table>", "Table omitted.", pred, count=1, flags=re.S)
        else:
            pred = draw(st.sampled_from(NEAR_TITLES)) + "\n" + pred
    return pred


@needs_oracle
@settings(max_examples=120, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(st.data())
def test_generated_pages_score_as_upstreams_evaluator(data):
    truth = data.draw(page_md())
    pred = data.draw(st.one_of(edited(truth), page_md(malformed=True), st.just(""), html_table()))
    same_as_upstream(truth, pred, data.draw(st.sampled_from(METAS)))


@needs_oracle
def test_omnidocbench_demo_pages_score_as_upstreams_evaluator():
    pages = _demo_pages()
    assert len(pages) >= 8
    cases = [(t, p, m) for t, p in pages for m in METAS]
    exact = sum(same_as_upstream(t, p, m) for t, p, m in cases)
    assert exact >= len(cases) - 5  # the rest within 1e-9 (numpy's mean in the record match)


GT = '<table><tr><th colspan="2">Sales</th></tr><tr><th>Item</th><th>Qty</th></tr><tr><td>Apple</td><td>3</td></tr>' \
     "<tr><td>Pear</td><td>5</td></tr></table>"


def test_a_perfect_prediction_scores_one_and_nothing_scores_zero():
    assert page_score([_truth(GT, {})], GT) == 1.0
    assert page_score([_truth(GT, {})], "") == 0.0
    assert page_score([_truth(GT, {})], "Sales: Apple 3, Pear 5") == 0.0
    assert page_score([_truth("no tables here", {})], GT) is None
    assert page_score([], GT) is None


def test_trm_unsupported_scores_grits_alone():
    pred = GT.replace("Pear", "Plum")
    both, alone = page_tables(_truth(GT, {}), pred), page_tables(_truth(GT, {"trm_unsupported": True}), pred)
    assert both is not None and alone is not None and both.table_record_match is not None
    assert alone.composite == alone.grits_con == both.grits_con
    assert both.composite == 0.5 * both.grits_con + 0.5 * both.table_record_match
    assert both.table_record_match < 1.0 and both.grits_con < 1.0


def test_a_title_written_above_the_table_costs_nothing():
    pred = "## Sales\n" + GT.replace('<tr><th colspan="2">Sales</th></tr>', "")
    assert page_score([_truth(GT, {})], pred) == 1.0
