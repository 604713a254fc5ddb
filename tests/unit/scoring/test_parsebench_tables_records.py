"""Differential parity of ParseBench's TableRecordMatch (quantgate.scoring.parsebench.tables.records) with
upstream's (../shared/reference/parsebench, ``TableRecordMatchMetric.compute_extracted``): the same title-stripped
tables and the same truth → prediction pairing (upstream's own GriTS-Con pairing, so this step is tested apart
from quantgate's GriTS, plus arbitrary pairings with unpaired and out-of-range entries), the same page value,
compared exactly: both sum the same floats in the same order. Cases: hypothesis-generated truth tables and
model-like renderings of them (the title test's generator), hand-picked ones for each repair TRM tries, and
OmniDocBench's demo truth tables against its demo predictions. Upstream's own tests have no TRM fixtures."""

from __future__ import annotations

import contextlib
import io

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from quantgate.scoring.parsebench.tables import parse, records, titles
from tests.support import parsebench_ref as P
from tests.support import upstream_omnidoc as omni
from tests.support.parsebench_tables_ref import to_ours
from tests.unit.scoring.test_parsebench_tables_titles import HEADERS, perturbed, render, spec, upstream

oracle = pytest.mark.skipif(bool(P.reference_missing_reason()), reason=P.reference_missing_reason() or "")


def page_tables(md_expected: str, md_actual: str, max_top: int = 1) -> tuple[list, list]:
    """Upstream's extraction and title stripping of a page pair: what its evaluator hands both metrics."""
    extraction, stripping = upstream("table_extraction"), upstream("table_title_stripping")
    expected, actual, _ = extraction.extract_table_pairs(md_expected, md_actual)
    return ([stripping.strip_title_rows(t, max_top_title_rows=max_top) for t in expected],
            [stripping.strip_title_rows(t, max_top_title_rows=max_top) for t in actual])


def grits_pairing(expected: list, actual: list) -> list[tuple[int, int | None]]:
    with contextlib.redirect_stdout(io.StringIO()):  # upstream prints its progress
        (value,) = upstream("grits_metric").GriTSMetric().compute(expected, actual)
    return list(value.metadata["pairing"])


def upstream_trm(expected: list, actual: list, pairing: list[tuple[int, int | None]]) -> float | None:
    values = upstream("table_record_match_metric").TableRecordMatchMetric().compute_extracted(
        expected, actual, pairing=pairing)
    found = [v.value for v in values if v.metric_name == "table_record_match"]
    return found[0] if found else None


def ours_trm(expected: list, actual: list, pairing: list[tuple[int, int | None]]) -> float | None:
    return records.table_record_match([to_ours(t) for t in expected], [to_ours(t) for t in actual], pairing)


def assert_same(md_expected: str, md_actual: str, max_top: int = 1, pairing=None) -> float | None:
    expected, actual = page_tables(md_expected, md_actual, max_top)
    if pairing is None:
        pairing = grits_pairing(expected, actual) if expected else []
    theirs = upstream_trm(expected, actual, pairing)
    ours = ours_trm(expected, actual, pairing)
    assert ours == theirs, (md_expected, md_actual, pairing)
    return ours


T = "<table>{}</table>"
HEAD = "<tr><th>Name</th><th>Revenue</th><th>Share (%)</th></tr>"
ROWS = "<tr><td>North</td><td>1,234</td><td>45 %</td></tr><tr><td>South</td><td>(1,000)</td><td>n/a</td></tr>"
SECTION = "<tr><th>A</th><th>B</th></tr><tr><th>Europe</th><td>Europe</td></tr><tr><td>1</td><td>2</td></tr>"
HAND = [
    (T.format(HEAD + ROWS), T.format(HEAD + ROWS), 1.0),  # identical
    # numbers re-formatted: thousands separators, spaces before %, empty sentinels
    (T.format(HEAD + ROWS), T.format(HEAD + "<tr><td>North</td><td>1234</td><td>45%</td></tr>"
                                     "<tr><td>South</td><td>(1000)</td><td>-</td></tr>"), 1.0),
    # columns and rows reordered
    (T.format(HEAD + ROWS), T.format("<tr><th>Share (%)</th><th>Name</th><th>Revenue</th></tr>"
                                     "<tr><td>n/a</td><td>South</td><td>(1,000)</td></tr>"
                                     "<tr><td>45 %</td><td>North</td><td>1,234</td></tr>"), 1.0),
    # the prediction's header written as <td>: recovered from its first row
    (T.format(HEAD + ROWS), T.format(HEAD.replace("th>", "td>") + ROWS), 1.0),
    # the truth has no header: the prediction's <th> row is read as a record
    (T.format(HEAD.replace("th>", "td>") + ROWS), T.format(HEAD + ROWS), 1.0),
    # a missing column and an extra one
    (T.format(HEAD + ROWS), T.format("<tr><th>Name</th><th>Revenue</th><th>Extra</th></tr>"
                                     "<tr><td>North</td><td>1,234</td><td>x</td></tr>"
                                     "<tr><td>South</td><td>(1,000)</td><td>y</td></tr>"), 0.5),
    # a section-header row under the header on the truth side only
    (T.format(HEAD + '<tr><td colspan="3">Europe</td></tr>' + ROWS), T.format(HEAD + ROWS), None),
    # duplicate column keys
    (T.format("<tr><th>Q</th><th>Q</th><th>Q</th></tr>" + ROWS), T.format("<tr><th>Q</th><th>Q</th><th>Q</th></tr>"
                                                                          + ROWS), 1.0),
    # a title the prediction kept as a header level and the truth stripped
    (T.format('<tr><th colspan="2">Months of Development</th></tr><tr><th>3</th><th>6</th></tr>'
              "<tr><td>1</td><td>2</td></tr>"),
     T.format('<tr><th>Months of Development 3</th><th>Months of Development 6</th></tr>'
              "<tr><td>1</td><td>2</td></tr>"), None),
    # the truth kept a second title as a header level (one title stripped at most), the prediction stripped it
    (T.format('<tr><th colspan="2">Survey</th></tr><tr><th colspan="2">Months of Development</th></tr>'
              "<tr><th>3</th><th>6</th></tr><tr><td>1</td><td>2</td></tr>"),
     T.format('<tr><th colspan="2">Months of Development</th></tr><tr><th>3</th><th>6</th></tr>'
              "<tr><td>1</td><td>2</td></tr>"), 1.0),
    # the same with a title over three of five columns: two columns align before the prefix is tried (under half)
    (T.format('<tr><th colspan="5">Survey</th></tr><tr><th>A</th><th>B</th><th colspan="3">Months</th></tr>'
              "<tr><th></th><th></th><th>3</th><th>6</th><th>9</th></tr><tr>" + "<td>1</td>" * 5 + "</tr>"),
     T.format('<tr><th colspan="5">Months</th></tr><tr><th>A</th><th>B</th><th>3</th><th>6</th><th>9</th></tr>'
              "<tr>" + "<td>1</td>" * 5 + "</tr>"), 1.0),
    # a hierarchical header the model joined with a spaced dash
    (T.format("<tr><th>Q1 EU</th><th>Total</th></tr><tr><td>1</td><td>2</td></tr>"),
     T.format("<tr><th>Q1 – EU</th><th>Total</th></tr><tr><td>1</td><td>2</td></tr>"), 1.0),
    # a section row whose promotion aligns as many columns, more closely: kept (and so no record)
    (T.format("<tr><th>abcdefghijklmnopqrst</th><th>B</th></tr><tr><th>x</th><td>x</td></tr>"
              "<tr><td>1</td><td>2</td></tr>"),
     T.format("<tr><th>abcdefghijklmnopqrst x</th><th>B</th></tr><tr><td>1</td><td>2</td></tr>"), 1.0),
    # a row under the header whose <th> and <td> say one thing: promoted to a header level on the truth side,
    # then on the prediction side
    (T.format(SECTION), T.format("<tr><th>A Europe</th><th>B</th></tr><tr><td>1</td><td>2</td></tr>"), 1.0),
    (T.format("<tr><th>A Europe</th><th>B</th></tr><tr><td>1</td><td>2</td></tr>"), T.format(SECTION), 1.0),
    # a prediction with a header and no records, and one whose only row is an empty header
    (T.format(HEAD + ROWS), T.format(HEAD), 0.0),
    (T.format(HEAD + ROWS), T.format("<tr><th></th><th></th></tr>"), 0.0),
    # a truth table with a header and no records
    (T.format(HEAD), T.format(HEAD + ROWS), 0.0),
    # empty tables on either side
    (T.format(HEAD + ROWS), T.format(""), 0.0),
    (T.format(""), T.format(HEAD + ROWS), 0.0),
    # no column matches at all
    (T.format(HEAD + ROWS), T.format("<tr><th>a</th><th>b</th></tr><tr><td>1</td><td>2</td></tr>"), 0.0),
    # no predicted table
    (T.format(HEAD + ROWS), "no table here", 0.0),
]


@oracle
@pytest.mark.parametrize(("expected", "actual", "value"), HAND)
def test_hand_picked_pairs_score_as_upstream(expected: str, actual: str, value: float | None):
    assert_same(expected, actual)


@pytest.mark.parametrize(("expected", "actual", "value"), [case for case in HAND if case[2] is not None])
def test_hand_picked_pairs_score_what_they_are_about(expected: str, actual: str, value: float):
    """Without the oracle: quantgate's own parsing and stripping, each page's one truth table paired with the
    prediction's first."""
    pairs = parse.extract_table_pairs(expected, actual)
    got = records.table_record_match([titles.strip_title_rows(t) for t in pairs.expected],
                                     [titles.strip_title_rows(t) for t in pairs.actual], [(0, 0)])
    assert got == pytest.approx(value)


def test_a_page_without_truth_tables_has_no_value():
    assert records.table_record_match([], [], []) is None
    (table,) = parse.extract_table_pairs(T.format(HEAD + ROWS), "").expected
    assert records.table_record_match([], [table], []) is None
    assert records.table_record_match([table], [], [(0, None)]) == 0.0


@oracle
def test_a_page_without_truth_tables_has_no_value_upstream_either():
    assert assert_same("no table", T.format(HEAD + ROWS)) is None


@st.composite
def page(draw) -> tuple[str, str]:
    truth = [draw(spec()) for _ in range(draw(st.integers(1, 3)))]
    preds = [draw(perturbed(s)) if draw(st.integers(0, 4)) else draw(spec()) for s in truth]
    preds = list(draw(st.permutations(preds)))
    if len(preds) > 1 and draw(st.integers(0, 3)) == 0:
        preds.pop()
    if draw(st.integers(0, 4)) == 0:
        preds.append(draw(spec()))
    return ("\n\nSome text.\n\n".join(render(s) for s in truth), "\n\n".join(render(s) for s in preds))


@oracle
@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pair=page(), max_top=st.sampled_from([0, 1, 1, 2]))
def test_generated_pages_score_as_upstream_with_its_grits_pairing(pair: tuple[str, str], max_top: int):
    assert_same(*pair, max_top=max_top)


@oracle
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pair=page(), data=st.data())
def test_generated_pages_score_as_upstream_with_any_pairing(pair: tuple[str, str], data):
    """Any pairing (an unpaired truth table, an index past the last table): both read it the same."""
    expected, actual = page_tables(*pair)
    pairing = [(g, data.draw(st.one_of(st.none(), st.integers(0, len(actual) + 1)))) for g in range(len(expected))]
    assert ours_trm(expected, actual, pairing) == upstream_trm(expected, actual, pairing)


@oracle
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pair=page())
def test_unstripped_tables_are_stripped_first_as_upstream(pair: tuple[str, str]):
    expected, actual, _ = upstream("table_extraction").extract_table_pairs(*pair)
    pairing = [(g, g if g < len(actual) else None) for g in range(len(expected))]
    assert ours_trm(expected, actual, pairing) == upstream_trm(expected, actual, pairing)


def demo_pages() -> list[tuple[str, str]]:
    pages = []
    for truth in sorted(omni.DEMO_TRUTH_MD.glob("*.md")):
        prediction = omni.DEMO_PREDICTIONS / truth.name
        text = truth.read_text(encoding="utf-8")
        if "<table" in text and prediction.is_file():
            pages.append((text, prediction.read_text(encoding="utf-8")))
    return pages


@oracle
@pytest.mark.skipif(bool(omni.demo_missing_reason()), reason=omni.demo_missing_reason() or "")
def test_omnidocbench_demo_tables_score_as_upstream():
    """Each demo page's truth tables against its prediction (upstream's GriTS pairing), and every truth table
    against every predicted table of the demo set, one pair at a time."""
    pages = demo_pages()
    assert len(pages) >= 8
    values = [assert_same(truth, prediction) for truth, prediction in pages]
    assert any(v is not None and 0 < v < 1 for v in values)  # real disagreements, not only the easy ends
    truths = [t for truth, _ in pages for t in page_tables(truth, "")[0]]
    preds = [t for _, prediction in pages for t in page_tables("", prediction)[1]]
    assert len(truths) >= 9 and len(preds) >= 8
    for gt in truths:
        for pred in preds:
            assert ours_trm([gt], [pred], [(0, 0)]) == upstream_trm([gt], [pred], [(0, 0)])


@st.composite
def tall_pair(draw) -> tuple[str, str]:
    """Tall tables of few distinct values: many tied record similarities for the assignment to break alike."""
    width, height = draw(st.integers(2, 5)), draw(st.integers(15, 40))
    pool = st.sampled_from(["1", "2", "1,000", "", "-", "n/a", "x"])
    head = "<tr>" + "".join(f"<th>{h}</th>" for h in HEADERS[:width]) + "</tr>"

    def body(n: int) -> str:
        return "".join("<tr>" + "".join(f"<td>{draw(pool)}</td>" for _ in range(width)) + "</tr>" for _ in range(n))
    return T.format(head + body(height)), T.format(head + body(height + draw(st.integers(-5, 5))))


@oracle
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pair=tall_pair())
def test_tall_tables_with_tied_records_score_as_upstream(pair: tuple[str, str]):
    assert_same(*pair, pairing=[(0, 0)])
