"""Differential parity of ParseBench's title-row stripping (quantgate.scoring.parsebench.tables.titles) and the
record match's table normalization it runs on, with upstream's (../shared/reference/parsebench,
``table_title_stripping.strip_title_rows`` and ``table_record_match_metric.normalize_table``): hand-picked title
layouts, then hypothesis-generated HTML tables parsed by upstream's own parser and fed to both, compared exactly
(grid, header records, hints). Upstream's own tests have no title-stripping fixtures.

Also the HTML table generator the record-match and splitter parity tests share: a table spec (title rows,
header rows with colspans, section rows, row headers, numbers formatted in the ways TRM folds, empty sentinels)
rendered to HTML, and the perturbations a model makes of it (columns and rows reordered, dropped or added,
headers demoted to <td>, numbers re-formatted, cells changed, titles dropped, markup left unclosed)."""

from __future__ import annotations

import importlib
from dataclasses import dataclass, replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from quantgate.scoring.parsebench.tables import parse, records, titles
from tests.support import parsebench_ref as P

oracle = pytest.mark.skipif(bool(P.reference_missing_reason()), reason=P.reference_missing_reason() or "")

HEADERS = ["Year", "Revenue", "Net income", "Q1", "Q2", "Total", "Region", "Share (%)", "2021", "2022", "Units",
           "Revenue ($)", "Group A - B", "", "n/a", "Name"]
TITLES = ["Table 3: Results", "(in millions)", "Revenue", "SPINAL DISORDERS", "Consolidated statement"]
VALUES = ["1,234", "1234", "$ 5,061", "$5061", "45 %", "45%", "(1,000)", "(1000)", "-", "—", "n/a", "", "NaN",
          "None", "0.5", "12.5", "Smith, John", "North America", "x<sup>2</sup>", "H₂O", "Item ........ 5",
          "Item . . . . 5", "Apple ® Inc", "**bold**", "2021", "Revenue", "Total", "-3", "€ 7"]
DEMOTE = 1 << 0  # perturbation flags


@dataclass(frozen=True)
class Spec:
    """One table before rendering: header rows as (text, colspan) cells summing to the width."""
    titles: tuple[tuple[str, str], ...]  # (tag, text) rows spanning the width
    header: tuple[tuple[tuple[str, int], ...], ...]
    rows: tuple[tuple[str, ...], ...]
    sections: tuple[tuple[int, str], ...] = ()  # (before data row, text) spanning rows
    header_tag: str = "th"
    row_header: bool = False  # first data cell as <th>
    thead: bool = False
    empty_first: bool = False
    malformed: bool = False

    @property
    def width(self) -> int:
        return len(self.rows[0])


def _span(n: int) -> str:
    return f' colspan="{n}"' if n > 1 else ""


def render(s: Spec) -> str:
    w = s.width
    out = []
    if s.empty_first:
        out.append("<tr>" + "<td></td>" * w + "</tr>")
    out += [f'<tr><{tag} colspan="{w}">{text}</{tag}></tr>' for tag, text in s.titles]
    head = ["<tr>" + "".join(f"<{s.header_tag}{_span(span)}>{text}</{s.header_tag}>" for text, span in row) + "</tr>"
            for row in s.header]
    body = []
    sections = dict(s.sections)
    for i, row in enumerate(s.rows):
        if i in sections:
            body.append(f'<tr><td colspan="{w}">{sections[i]}</td></tr>')
        cells = [f"<th>{row[0]}</th>" if s.row_header else f"<td>{row[0]}</td>"] + [f"<td>{v}</td>" for v in row[1:]]
        if s.malformed and i == len(s.rows) - 1:
            body.append("<tr>" + "".join(c.replace("</td>", "") for c in cells))
        else:
            body.append("<tr>" + "".join(cells) + "</tr>")
    if s.thead and head:
        return "<table><thead>" + "".join(out + head) + "</thead><tbody>" + "".join(body) + "</tbody></table>"
    return "<table>" + "".join(out + head + body) + "</table>"


@st.composite
def header_row(draw, width: int) -> tuple[tuple[str, int], ...]:
    cells, left = [], width
    while left:
        span = draw(st.integers(1, left)) if draw(st.integers(0, 3)) == 0 else 1
        cells.append((draw(st.sampled_from(HEADERS)), span))
        left -= span
    return tuple(cells)


@st.composite
def spec(draw) -> Spec:
    width, height = draw(st.integers(1, 5)), draw(st.integers(1, 4))
    n_header = draw(st.sampled_from([0, 1, 1, 1, 2]))
    header = [draw(header_row(width)) for _ in range(n_header)]
    if n_header and draw(st.integers(0, 4)) == 0:  # a repeated header: duplicate keys
        header[-1] = tuple((header[-1][0][0], 1) for _ in range(width))
    if header and draw(st.integers(0, 4)) == 0:  # a bottom title inside the header block
        header.append(((draw(st.sampled_from(TITLES)), width),))
    if header and draw(st.integers(0, 4)) == 0:  # a top <th> title spanning the block
        header.insert(0, ((draw(st.sampled_from(TITLES)), width),))
    rows = tuple(tuple(draw(st.sampled_from(VALUES)) for _ in range(width)) for _ in range(height))
    n_titles = draw(st.sampled_from([0, 0, 0, 1, 2]))
    return Spec(titles=tuple(("td", draw(st.sampled_from(TITLES))) for _ in range(n_titles)), header=tuple(header),
                rows=rows, sections=tuple((draw(st.integers(0, height - 1)), draw(st.sampled_from(TITLES)))
                                          for _ in range(draw(st.sampled_from([0, 0, 1])))),
                row_header=draw(st.booleans()) and draw(st.booleans()), thead=draw(st.booleans()),
                empty_first=draw(st.integers(0, 6)) == 0)


_REFORMAT = {"1,234": "1234", "1234": "1,234", "$ 5,061": "$5,061", "45 %": "45%", "45%": "45 %",
             "(1,000)": "(1000)", "-": "—", "": "n/a", "NaN": "", "Item ........ 5": "Item ... 5", "x<sup>2</sup>": "x²"}


def _take(row: tuple, order: list[int]) -> tuple:
    return tuple(row[c] for c in order)


@st.composite
def perturbed(draw, s: Spec) -> Spec:
    """A model's rendering of the same table: each change drawn independently."""
    width = s.width
    simple = all(span == 1 for row in s.header for _, span in row)  # columns can move without breaking spans
    if simple and width > 1 and draw(st.booleans()):
        order = draw(st.permutations(range(width)))
        s = replace(s, header=tuple(_take(r, order) for r in s.header), rows=tuple(_take(r, order) for r in s.rows))
    if simple and width > 1 and draw(st.integers(0, 3)) == 0:  # a column missing
        drop = draw(st.integers(0, width - 1))
        keep = [c for c in range(width) if c != drop]
        s = replace(s, header=tuple(_take(r, keep) for r in s.header), rows=tuple(_take(r, keep) for r in s.rows))
    if draw(st.integers(0, 3)) == 0:  # an extra column
        s = replace(s, header=tuple(r + (("Extra", 1),) for r in s.header),
                    rows=tuple(r + (draw(st.sampled_from(VALUES)),) for r in s.rows))
    if draw(st.booleans()):
        s = replace(s, rows=tuple(draw(st.permutations(s.rows))))
    if len(s.rows) > 1 and draw(st.integers(0, 3)) == 0:
        s = replace(s, rows=s.rows[:-1])
    if draw(st.booleans()):
        s = replace(s, rows=tuple(tuple(_REFORMAT.get(v, v) if draw(st.booleans()) else v for v in r) for r in s.rows))
    if draw(st.integers(0, 2)) == 0:
        r, c = draw(st.integers(0, len(s.rows) - 1)), draw(st.integers(0, s.width - 1))
        row = list(s.rows[r])
        row[c] = draw(st.sampled_from(VALUES))
        s = replace(s, rows=s.rows[:r] + (tuple(row),) + s.rows[r + 1:])
    if draw(st.integers(0, 3)) == 0:
        s = replace(s, header_tag="td")  # headers demoted into data
    if draw(st.integers(0, 3)) == 0:
        s = replace(s, titles=())
    if draw(st.integers(0, 3)) == 0:
        s = replace(s, sections=())
    return replace(s, thead=draw(st.booleans()), row_header=draw(st.booleans()) and s.row_header,
                   malformed=draw(st.integers(0, 5)) == 0)


def upstream(name: str):
    """One of upstream's ``evaluation.metrics.parse`` modules (the reference loaded first)."""
    P.load()
    return importlib.import_module(f"parse_bench.evaluation.metrics.parse.{name}")


def upstream_tables(html: str) -> list:
    """Upstream's parse of the HTML, each table wrapped as upstream's ExtractedTable."""
    return [upstream("table_extraction").ExtractedTable(raw_html=html, table_data=td)
            for td in upstream("table_parsing").parse_html_tables(html)]


def assert_same_stripping(html: str, max_top: int) -> None:
    up_titles = upstream("table_title_stripping")
    from tests.support.parsebench_tables_ref import same_data, to_ours, to_ours_hints
    for up in upstream_tables(html):
        theirs = up_titles.strip_title_rows(up, max_top_title_rows=max_top)
        ours = titles.strip_title_rows(to_ours(up), max_top_title_rows=max_top)
        assert same_data(ours.table_data, to_ours(theirs).table_data), html
        assert ours.header_hints == to_ours_hints(theirs.header_hints), html


HAND = [
    # a <td> colspan title, then a <th> header
    '<table><tr><td colspan="3">Table 3: Results</td></tr><tr><th>Year</th><th>Q1</th><th>Q2</th></tr>'
    "<tr><td>2021</td><td>1,234</td><td>45 %</td></tr></table>",
    # a <th> title spanning the header block over two header rows, and a bottom "(in millions)" title
    '<table><tr><th colspan="3">Consolidated statement</th></tr><tr><th></th><th>2021</th><th>2022</th></tr>'
    '<tr><th colspan="3">(in millions)</th></tr><tr><td>Revenue</td><td>$ 5,061</td><td>(1,000)</td></tr></table>',
    # a rowspanning title: one slot of the cap
    '<table><tr><th colspan="2" rowspan="2">Title</th></tr><tr></tr><tr><th>A</th><th>B</th></tr>'
    "<tr><td>1</td><td>2</td></tr></table>",
    # a title over all header columns but an empty edge one (the row-header column)
    '<table><tr><th></th><th colspan="2">Consolidated</th></tr><tr><th>Item</th><th>2021</th><th>2022</th></tr>'
    "<tr><td>Revenue</td><td>1</td><td>2</td></tr></table>",
    # a rowspanning title inside <thead>: the row its span fills is stripped with it
    '<table><thead><tr><th colspan="2" rowspan="2">Title</th></tr><tr></tr><tr><th>A</th><th>B</th></tr></thead>'
    "<tr><td>1</td><td>2</td></tr></table>",
    # a <thead> row of <td> cells
    "<table><thead><tr><td>A</td><td>B</td></tr></thead><tr><td>1</td><td>2</td></tr></table>",
    # leading empty rows before the header
    "<table><tr><td></td><td></td></tr><tr><th>A</th><th>B</th></tr><tr><td>1</td><td>2</td></tr></table>",
    # a one-column table: no <td> title
    "<table><tr><td>Title</td></tr><tr><td>1</td></tr></table>",
    # every row uniform: no title
    '<table><tr><td colspan="2">x</td></tr><tr><td colspan="2">y</td></tr></table>',
    # a dual-axis header row (<th> row header, <td> values)
    "<table><tr><th>Region</th><th>2021</th></tr><tr><th>North</th><td>5</td></tr></table>",
    # an empty table
    "<table></table>",
]


@oracle
@pytest.mark.parametrize("max_top", [0, 1, 2])
@pytest.mark.parametrize("html", HAND)
def test_hand_picked_layouts_strip_as_upstream(html: str, max_top: int):
    assert_same_stripping(html, max_top)


def test_titles_are_removed_and_recorded():
    """What the step is for, without the oracle: the <td> title leaves the grid and is named in the hints (unless
    no top title may go); the bottom (in millions) title stays in the grid but is marked a title row."""
    (table,) = parse.extract_table_pairs(HAND[0], "").expected
    out = titles.strip_title_rows(table)
    assert out.table_data.data.shape == (2, 3) and str(out.table_data.data[0, 0]) == "Year"
    assert out.header_hints is not None and out.header_hints.stripped_titles == {"table 3: results"}
    assert titles.strip_title_rows(table, max_top_title_rows=0).table_data.data.shape == (3, 3)
    (table,) = parse.extract_table_pairs(HAND[1], "").expected
    out = titles.strip_title_rows(table)
    assert out.table_data.data.shape == (3, 3) and out.header_hints is not None
    assert out.header_hints.th_title_rows == {1} and out.header_hints.col_header_rows == {0, 1}


@oracle
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(s=spec(), max_top=st.sampled_from([0, 1, 1, 2]), malformed=st.booleans())
def test_generated_tables_strip_as_upstream(s: Spec, max_top: int, malformed: bool):
    assert_same_stripping(render(replace(s, malformed=malformed)), max_top)


@oracle
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(s=spec())
def test_generated_tables_normalize_as_upstream(s: Spec):
    up_trm = upstream("table_record_match_metric")
    from tests.support.parsebench_tables_ref import same_data, to_ours_data
    for up in upstream_tables(render(s)):
        assert same_data(records.normalize_table(to_ours_data(up.table_data)),
                         to_ours_data(up_trm.normalize_table(up.table_data)))
