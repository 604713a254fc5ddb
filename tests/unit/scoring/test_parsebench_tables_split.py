"""Differential parity of ParseBench's merged-table splitter (quantgate.scoring.parsebench.tables.split) with
upstream's (../shared/reference/parsebench, ``table_splitting.split_ambiguous_merged_pred``): the same extracted
truth and predicted tables in, the same predicted tables out (grids, header records, HTML slices) or both leave
them whole. Cases: hypothesis-generated pages where a model merged side-by-side truth tables into one wide
table with a repeating header (headers varied in case and spelling, shorter tables padded, titles above), pages
of unrelated tables (the title test's generator), and hand-picked ones. Upstream's own tests have no splitter
fixtures."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from quantgate.scoring.parsebench.tables import parse, split
from tests.support import parsebench_ref as P
from tests.support import upstream_omnidoc as omni
from tests.support.parsebench_tables_ref import same_data, to_ours
from tests.unit.scoring.test_parsebench_tables_records import demo_pages
from tests.unit.scoring.test_parsebench_tables_titles import HEADERS, VALUES, render, spec, upstream

oracle = pytest.mark.skipif(bool(P.reference_missing_reason()), reason=P.reference_missing_reason() or "")


def assert_same_split(md_expected: str, md_actual: str) -> list:
    expected, actual, _ = upstream("table_extraction").extract_table_pairs(md_expected, md_actual)
    theirs, did = upstream("table_splitting").split_ambiguous_merged_pred(expected, actual)
    ours = split.split_ambiguous_merged_pred([to_ours(t) for t in expected], [to_ours(t) for t in actual])
    assert len(ours) == len(theirs), (md_expected, md_actual)
    assert did == (len(ours) != len(actual))
    for a, b in zip(ours, theirs, strict=True):
        assert a.raw_html == b.raw_html and a.header_hints is None and b.header_hints is None
        assert same_data(a.table_data, to_ours(b).table_data), (md_expected, md_actual)
    return ours


def _table(header: list[str], rows: list[list[str]], title: str = "") -> str:
    top = f'<tr><th colspan="{len(header)}">{title}</th></tr>' if title else ""
    return ("<table>" + top + "<tr>" + "".join(f"<th>{h}</th>" for h in header) + "</tr>"
            + "".join("<tr>" + "".join(f"<td>{v}</td>" for v in r) + "</tr>" for r in rows) + "</table>")


LEFT = _table(["Year", "Revenue"], [["2021", "1,234"], ["2022", "45 %"]])
RIGHT = _table(["Year", "Revenue"], [["2023", "12.5"]])
MERGED = _table(["Year", "Revenue", "year", "Revenue"], [["2021", "1,234", "2023", "12.5"], ["2022", "45 %", "", ""]])


def test_two_side_by_side_tables_merged_into_one_are_split_back():
    """Without the oracle, on quantgate's own parsing."""
    pairs = parse.extract_table_pairs(LEFT + "\n\n" + RIGHT, MERGED)
    out = split.split_ambiguous_merged_pred(pairs.expected, pairs.actual)
    assert len(out) == 2 and out[0].table_data.data.shape == (3, 2)
    assert out[1].table_data.data.shape == (2, 2)  # the padding row of the shorter table dropped
    assert out[0].raw_html == "" and str(out[1].table_data.data[1, 0]) == "2023"
    assert split.split_ambiguous_merged_pred(pairs.expected[:1], pairs.actual) is pairs.actual  # no more truth


@oracle
def test_two_side_by_side_tables_merged_into_one_are_split_back_as_upstream():
    assert len(assert_same_split(LEFT + "\n\n" + RIGHT, MERGED)) == 2


@pytest.mark.parametrize(("expected", "actual"), [
    # as many predicted tables as truth tables: nothing to split
    (_table(["A", "B"], [["1", "2"]]), _table(["A", "B", "A", "B"], [["1", "2", "3", "4"]])),
    # no repeating header
    (_table(["A"], [["1"]]) * 2, _table(["A", "B", "C", "D"], [["1", "2", "3", "4"]])),
    # a header that repeats with two periods: the one closest to the truth's table count wins
    (_table(["A"], [["1"]]) * 4, _table(["A", "A", "A", "A"], [["1", "2", "3", "4"]])),
    (_table(["A"], [["1"]]) * 2, _table(["A", "A", "A", "A"], [["1", "2", "3", "4"]])),
    # three of four headers repeat: under the 80 % a period needs
    (_table(["A"], [["1"]]) * 2, _table(["A", "B", "C", "D", "A", "B", "C", "X"], [[str(i) for i in range(8)]])),
    # two merged tables and one table to gain: the first combination of equal standing is kept
    (_table(["A"], [["1"]]) * 3, _table(["A", "A"], [["1", "2"]]) + _table(["A", "A"], [["3", "4"]])),
    # a title row above the repeating header
    (_table(["A", "B"], [["1", "2"]]) * 2, _table(["A", "B", "A", "B"], [["1", "2", "3", "4"]], title="Results")),
    # the only split overshoots the truth's table count more than no split misses it
    (_table(["A"], [["1"]]) * 2, _table(["A"] * 5, [["1", "2", "3", "4", "5"]])),
    # too many combinations of splittable tables to try: left whole
    (_table(["A"], [["1"]]) * 6, (_table(["A"] * 12, [[str(i) for i in range(12)]]) + "\n\n") * 4),
    # a segment with no text at all below the header
    (_table(["A"], [["1"]]) * 2, _table(["A", "A"], [["1", ""]])),
    (_table(["A"], [["1"]]) * 2, "<table><thead><tr><td></td><td></td></tr></thead><tr><td></td><td></td></tr></table>"),
    # empty predicted tables
    (_table(["A"], [["1"]]) * 3, "<table></table><table><tr></tr></table>"),
    # no predicted table
    (_table(["A"], [["1"]]), "nothing"),
])
@oracle
def test_hand_picked_pages_split_as_upstream(expected: str, actual: str):
    assert_same_split(expected, actual)


def _vary(text: str, how: int) -> str:
    return [text, text.lower(), text.upper(), text + "s", "Other"][how]


@st.composite
def merged_page(draw) -> tuple[str, str]:
    """k truth tables with one header, and a prediction that lays them side by side under a repeated header."""
    width, k = draw(st.integers(1, 3)), draw(st.integers(2, 4))
    header = [draw(st.sampled_from(HEADERS)) for _ in range(width)]
    bodies = [[[draw(st.sampled_from(VALUES)) for _ in range(width)] for _ in range(draw(st.integers(1, 3)))]
              for _ in range(k)]
    title = draw(st.sampled_from(["", "", "Results"]))
    truth = [_table(header, body) for body in bodies]
    kept = draw(st.integers(1, k))  # how many of them the model merged
    height = max(len(b) for b in bodies[:kept])
    wide_header = [_vary(h, draw(st.sampled_from([0, 0, 0, 1, 2, 3, 4]))) for _ in range(kept) for h in header]
    wide_rows = [[v for b in bodies[:kept] for v in (b[r] if r < len(b) else [""] * width)] for r in range(height)]
    preds = [_table(wide_header, wide_rows, title)] + [_table(header, b) for b in bodies[kept:]
                                                        if draw(st.booleans())]
    if draw(st.integers(0, 3)) == 0:
        preds.append(render(draw(spec())))
    return "\n\n".join(truth), "\n\n".join(draw(st.permutations(preds)))


@oracle
@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pair=merged_page())
def test_generated_merged_tables_split_as_upstream(pair: tuple[str, str]):
    assert_same_split(*pair)


@oracle
@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(truth=st.lists(spec(), min_size=1, max_size=4), preds=st.lists(spec(), min_size=0, max_size=2))
def test_generated_unrelated_tables_split_as_upstream(truth: list, preds: list):
    assert_same_split("\n\n".join(render(s) for s in truth), "\n\n".join(render(s) for s in preds))


@oracle
@pytest.mark.skipif(bool(omni.demo_missing_reason()), reason=omni.demo_missing_reason() or "")
def test_omnidocbench_demo_tables_split_as_upstream():
    """Each demo page's prediction against its truth, and against the whole demo set's truth tables (more truth
    tables than predicted ones, so every real predicted table is searched for a repeating header)."""
    pages = demo_pages()
    assert len(pages) >= 8
    every_truth = "\n\n".join(truth for truth, _ in pages)
    for truth, prediction in pages:
        assert_same_split(truth, prediction)
        assert_same_split(every_truth, prediction)
