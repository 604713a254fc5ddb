"""Differential parity of ParseBench's table reading (quantgate.scoring.parsebench.tables.parse) with upstream's
(../shared/reference/parsebench: ``table_parsing.parse_html_tables``, ``merge_preceding_titles_into_tables``,
``table_extraction.extract_html_tables`` / ``extract_table_pairs``): hand-picked cases, hypothesis-generated HTML
tables (spans, <th> rows, thead, empty cells, title rows, captions, nested tables, malformed markup), and the real
tables of OmniDocBench's demo truth and predictions; every grid, header record, context and slice equal. Then the
one deliberate divergence: a hostile span is dropped, not laid out."""

from __future__ import annotations

import ast
import resource
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from quantgate.errors import DataError
from quantgate.scoring.parsebench.tables import parse as ours
from tests.support import parsebench_ref as P
from tests.support import parsebench_tables_ref as R
from tests.support.paths import oracle_missing
from tests.support.upstream_omnidoc import DEMO_PREDICTIONS, DEMO_TRUTH_MD

CELLS = ["", "Revenue", "2021", "1,234.5", "—", "N/A", "Total<br>net", "H<sub>2</sub>O", "x<sup>2</sup>",
         "**bold**", "<b>Q1</b>", "  spaced  ", "12%", "Name¹", "a & b", "<i>it</i>", "–", "..."]
TITLES = ["Table 1: Sales by region", "Revenue", "Annual results 2021", "Notes"]
# text before a predicted table: titles as given, and near misses either side of the 0.8 similarity a merge needs
NEAR_TITLES = ["# Table 1: Sales by region", "<p>Revenue</p>", "<h2>Notes</h2>", "**Annual results 2021**",
               "Sales by region", "Table 1: Sales by regions", "Annual report 2021", "Revenues", "<p>Note</p>"]


@st.composite
def html_table(draw, *, malformed: bool = False) -> str:
    """One HTML table: a title row spanning every column (sometimes), a header row of <th> (sometimes in
    <thead>), body rows with random spans and empty cells; malformed ones lose closing tags or carry odd spans."""
    rows, cols = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    out = ["<table>"]
    if draw(st.booleans()):
        out.append(f"<caption>{draw(st.sampled_from(TITLES))}</caption>")
    if cols > 1 and draw(st.integers(0, 3)) == 0:
        tag = draw(st.sampled_from(["th", "td"]))
        out.append(f'<tr><{tag} colspan="{cols}">{draw(st.sampled_from(TITLES))}</{tag}></tr>')
    head = draw(st.booleans())
    if head:
        cells = "".join(f"<th>{draw(st.sampled_from(CELLS))}</th>" for _ in range(cols))
        out.append(f"<thead><tr>{cells}</tr></thead>" if draw(st.booleans()) else f"<tr>{cells}</tr>")
    for _ in range(rows):
        row = []
        for _ in range(draw(st.integers(max(1, cols - 1), cols + 1))):
            tag = "th" if draw(st.integers(0, 5)) == 0 else "td"
            spans = ""
            if draw(st.integers(0, 4)) == 0:
                spans += f' rowspan="{draw(st.integers(1, 3))}"'
            if draw(st.integers(0, 4)) == 0:
                spans += f' colspan="{draw(st.integers(1, 3))}"'
            if malformed and draw(st.integers(0, 6)) == 0:
                spans += f' colspan="{draw(st.sampled_from(["0", "-1", "x", " 2 ", "2.5", ""]))}"'
            text = draw(st.sampled_from(CELLS))
            if draw(st.integers(0, 12)) == 0:
                text = "<table><tr><td>in</td><td>ner</td></tr></table>"
            close = "" if malformed and draw(st.integers(0, 5)) == 0 else f"</{tag}>"
            row.append(f"<{tag}{spans}>{text}{close}")
        out.append("<tr>" + "".join(row) + ("" if malformed and draw(st.integers(0, 5)) == 0 else "</tr>"))
    if not (malformed and draw(st.integers(0, 5)) == 0):
        out.append("</table>")
    return "".join(out)


@st.composite
def page_md(draw, *, malformed: bool = False) -> str:
    """A page: text, headings and tables in any order."""
    parts = []
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.integers(0, 3))
        if kind == 0:
            parts.append(draw(st.sampled_from(NEAR_TITLES + ["Some text.", "<tabledata>x</tabledata>"])))
        else:
            parts.append(draw(html_table(malformed=malformed)))
    return draw(st.sampled_from(["\n\n", "\n", ""])).join(parts)


FIXTURES = P.REFERENCE / "tests" / "parse_bench" / "evaluation" / "metrics" / "parse" / "test_fast_table_parity.py"


def _crafted_pairs() -> list[tuple[str, str, str]]:
    """Upstream's CRAFTED_PAIRS, read from its test file's syntax tree (its module imports TEDS pieces this
    machine lacks): only string literals, ``_GT`` and ``_GT.replace(...)`` occur there."""
    tree = ast.parse(FIXTURES.read_text(encoding="utf-8"))
    values: dict[str, object] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name) \
                and node.targets[0].id in ("_GT", "CRAFTED_PAIRS"):
            values[node.targets[0].id] = eval(compile(ast.Expression(node.value), str(FIXTURES), "eval"),  # noqa: S307
                                              {"__builtins__": {}}, dict(values))
    return values["CRAFTED_PAIRS"]  # type: ignore[return-value]


def _upstream():
    pb = P.load()  # noqa: F841 (installs the import hook)
    import parse_bench.evaluation.metrics.parse.table_extraction as ext
    import parse_bench.evaluation.metrics.parse.table_parsing as par
    return par, ext


def _same_parse(html: str) -> None:
    par, _ = _upstream()
    try:
        theirs = par.parse_html_tables(html)
    except (ValueError, IndexError):
        with pytest.raises((ValueError, IndexError)):
            ours.parse_html_tables(html)
        return
    mine = ours.parse_html_tables(html)
    assert len(mine) == len(theirs)
    for a, b in zip(mine, theirs, strict=True):
        assert R.same_data(a, R.to_ours_data(b)), html


def _same_pairs(expected: str, actual: str) -> None:
    _, ext = _upstream()
    try:
        te, ta, tc = ext.extract_table_pairs(expected, actual)
    except (ValueError, IndexError):  # upstream fails the page on a predicted span it cannot read: ours drops it
        mine = ours.extract_table_pairs(expected, actual)
        assert mine.n_actual + mine.unparseable_pred == len(ours.extract_html_tables(actual))
        return
    mine = ours.extract_table_pairs(expected, actual)
    assert (mine.n_expected, mine.n_actual, mine.unparseable_pred) == (tc.expected, tc.actual, tc.unparseable_pred)
    for a, b in zip(mine.expected + mine.actual, te + ta, strict=True):
        assert a.raw_html == b.raw_html and R.same_data(a.table_data, R.to_ours_data(b.table_data))


def _same_merge(expected: str, actual: str) -> None:
    par, _ = _upstream()
    try:
        theirs = par.merge_preceding_titles_into_tables(expected, actual)
    except ValueError:
        return  # upstream fails the page (a span that is not an integer); ours leaves that table as it is
    assert ours.merge_preceding_titles_into_tables(expected, actual) == theirs


needs_oracle = pytest.mark.skipif(bool(P.reference_missing_reason()), reason=P.reference_missing_reason() or "")

HAND = [
    "<table><tr><th>A</th><th>B</th></tr><tr><td>1</td><td>2</td></tr></table>",
    '<table><thead><tr><th colspan="2">Title</th></tr></thead><tr><td rowspan="2">x</td><td>y</td></tr>'
    "<tr><td>z</td></tr></table>",
    "<p>before</p><table><caption>Cap</caption><tr><td>a<br>b</td><td>H<sub>2</sub>O</td></tr></table><p>after</p>",
    "<table><tr><td><table><tr><td>in</td></tr></table></td><td>out</td></tr></table>",
    "<table><tr><td>open", "<TABLE><TR><TD>upper</TD></TR></TABLE>", "<table></table>", "text only",
    '<table><tr><td colspan="-1">a</td><td>b</td><td>c</td></tr></table>',
    '<table><tr><td colspan="0">a</td><td>b</td></tr></table>',
    "<table><tr><th>A</th></tr><tr><th>A</th></tr></table>",  # thead-less twin rows: Tag equality
]


@needs_oracle
@pytest.mark.parametrize("html", HAND)
def test_hand_picked_tables_parse_as_upstreams(html):
    _same_parse(html)
    _same_pairs("<table><tr><td>t</td></tr></table>", html)
    assert ours.extract_html_tables(html) == _upstream()[1].extract_html_tables(html)


@needs_oracle
def test_upstreams_crafted_table_pairs_read_as_upstreams():
    pairs = _crafted_pairs()
    assert len(pairs) >= 8
    for _, truth, pred in pairs:
        _same_parse(truth)
        _same_parse(pred)
        _same_pairs(truth, pred)
        _same_merge(truth, pred)


@needs_oracle
def test_merge_moves_a_preceding_title_into_the_table():
    truth = '<table><tr><th colspan="2">Sales by region</th></tr><tr><td>a</td><td>b</td></tr></table>'
    pred = "## Sales by region\n<table><tr><td>a</td><td>b</td></tr></table>"
    merged = ours.merge_preceding_titles_into_tables(truth, pred)
    assert merged == '<table><tr><th colspan="2">## Sales by region</th></tr><tr><td>a</td><td>b</td></tr></table>'
    assert merged == _upstream()[0].merge_preceding_titles_into_tables(truth, pred)
    for near in ("Sales by regions", "Sales by", "Sales-by-region", "SALES BY REGION"):  # around the 0.8 ratio
        _same_merge(truth, f"<p>{near}</p><table><tr><td>a</td><td>b</td></tr></table>")
    assert ours.merge_preceding_titles_into_tables(truth, "Other\n<table><tr><td>a</td></tr></table>") \
        == "Other\n<table><tr><td>a</td></tr></table>"  # nothing moved: the text comes back as given


@needs_oracle
@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(page_md(malformed=True))
def test_generated_pages_parse_and_slice_as_upstreams(md):
    _same_parse(md)
    assert ours.extract_html_tables(md) == _upstream()[1].extract_html_tables(md)


@needs_oracle
@settings(max_examples=120, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(page_md(), page_md(malformed=True))
def test_generated_pairs_and_title_merges_are_upstreams(expected, actual):
    _same_pairs(expected, actual)
    _same_merge(expected, actual)


def _demo_pages() -> list[tuple[str, str]]:
    out = []
    for truth in sorted(Path(DEMO_TRUTH_MD).glob("*.md")):
        pred = Path(DEMO_PREDICTIONS) / truth.name
        t = truth.read_text(encoding="utf-8")
        if "<table" in t and pred.exists():
            out.append((t, pred.read_text(encoding="utf-8")))
    return out


@needs_oracle
@pytest.mark.skipif(bool(oracle_missing(DEMO_TRUTH_MD, DEMO_PREDICTIONS)),
                    reason=oracle_missing(DEMO_TRUTH_MD, DEMO_PREDICTIONS) or "")
def test_omnidocbench_demo_tables_read_as_upstreams():
    pages = _demo_pages()
    assert len(pages) >= 8
    for truth, pred in pages:
        _same_parse(truth)
        _same_parse(pred)
        _same_pairs(truth, pred)
        _same_merge(truth, pred)


def test_a_hostile_span_is_dropped_not_laid_out():
    """rowspan × colspan of 10^10 would fill upstream's grid dictionary cell by cell: ours refuses it before
    allocating (and the whole call stays within a small memory budget), counting the table as unparseable; the
    same table as truth is a DataError naming the page and the table."""
    hostile = '<table><tr><td rowspan="100000" colspan="100000">x</td></tr></table>'
    wide = '<table><tr><td rowspan="600">a</td><td colspan="600">b</td></tr></table>'  # few cells, 600 × 601 grid
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    pairs = ours.extract_table_pairs("<table><tr><td>t</td></tr></table>", hostile + wide)
    assert (pairs.n_actual, pairs.unparseable_pred) == (0, 2)
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 200_000  # KiB
    with pytest.raises(DataError, match="p7: truth table 2"):
        ours.extract_table_pairs("<table><tr><td>t</td></tr></table>" + hostile, "", page="p7")
    under = '<table><tr><td rowspan="400" colspan="600">x</td></tr></table>'  # 240,000 cells: laid out
    assert ours.parse_html_tables(under)[0].data.shape == (400, 600)
