"""Differential parity of quantgate's ParseBench chart rule (``chart_data_point``) and chart page score with
upstream's (../shared/reference/parsebench, loaded on 3.11 by tests/support/parsebench_ref.py): hand-picked cases
for each way a point is found, then hypothesis-generated charts-as-tables (markdown and HTML, spans, header cells,
captions, titles before the table) and rules, same score (or both refuse the rule); whole pages against upstream's
evaluator (its ``rule_chart_data_point_pass_rate``). Upstream's own tests have no chart fixtures."""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from quantgate.scoring.parsebench import charts as C
from quantgate.scoring.parsebench.chart_tables import chart_tables
from tests.support import parsebench_ref as P

pytestmark = pytest.mark.skipif(bool(P.reference_missing_reason()), reason=P.reference_missing_reason() or "")

NUMBERS = ["39.2", "$39.2M", "39,200,000", "1,234", "1.234", "2,08", "45%", "~12", "6 888", "25", "13.0%", "0", "-3",
           "2021", "1.5k", "€ 7", "3 bn", "12.5", "12.6", "n/a", ""]
LABELS = ["Revenue", "Year", "2021", "Sales", "Q1", "North America", "Net income<br>(USD)", "Retail", "Share of total",
          "LDC/LLDCs", "Total", "revenue growth"]
CONTEXTS = ["", "## Sales by year", "**Revenue**", "Figure 3: Retail share", "# North America\n\nSome text.",
            "<h2>Total</h2>", "<b>Share of total</b> in 2021", "**Q1** results\n\n---"]


@st.composite
def table(draw) -> str:
    rows, cols = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    cell = st.sampled_from(NUMBERS + LABELS)
    grid = [[draw(cell) for _ in range(cols)] for _ in range(rows)]
    if draw(st.booleans()):  # markdown
        lines = ["| " + " | ".join(r) + " |" for r in grid]
        lines.insert(1, "|" + "---|" * cols)
        return "\n".join(lines if draw(st.booleans()) else [line.strip("|") for line in lines])
    html = []
    for i, r in enumerate(grid):
        tag = "th" if i == 0 and draw(st.booleans()) else "td"
        cells = []
        for j, text in enumerate(r):
            span = draw(st.sampled_from(["", "", "", ' rowspan="2"', ' colspan="2"']))
            first = "th" if j == 0 and draw(st.booleans()) else tag
            cells.append(f"<{first}{span}>{text}</{first}>")
        html.append("<tr>" + "".join(cells) + "</tr>")
    caption = draw(st.sampled_from(["", "", "<caption>Retail sales</caption>", "<caption>LDC/LLDCs</caption>"]))
    body = "".join(html)
    body = f"<thead>{html[0]}</thead>{''.join(html[1:])}" if len(html) > 1 and draw(st.booleans()) else body
    return f"<table>{caption}{body}</table>"


@st.composite
def output(draw) -> str:
    parts = []
    for _ in range(draw(st.integers(1, 3))):
        parts += [draw(st.sampled_from(CONTEXTS)), draw(table())]
    return "\n\n".join(parts)


@st.composite
def rule(draw, md: str = "") -> dict:
    """A rule; given the output, most often one about a cell of it, labelled by cells of its row or column or by
    the text before its table (so that rules pass about as often as they fail)."""
    tables = [t for t in chart_tables(md) if t.cells] if md else []
    value = draw(st.sampled_from([*NUMBERS, "25 (13.0%)", "1,234 / 45%", 39.2, 25, None, "Revenue"]))
    labels = draw(st.lists(st.sampled_from(LABELS), min_size=1, max_size=3) | st.just([]))
    if tables and draw(st.integers(0, 3)):
        t = draw(st.sampled_from(tables))
        r, c = draw(st.integers(0, len(t.cells) - 1)), draw(st.integers(0, t.width - 1))
        value = t.cells[r][c]
        near = [x for x in t.cells[r] + [row[c] for row in t.cells] if x and x != value]
        near += [t.context.strip().splitlines()[-1].strip("#* ")] if t.context.strip() else []
        labels = draw(st.lists(st.sampled_from(near or LABELS) | st.sampled_from(LABELS), min_size=1, max_size=3))
    data = {"type": "chart_data_point", "value": value, "labels": labels}
    if draw(st.booleans()):
        data |= {"max_diffs": draw(st.integers(0, 3)), "normalize_numbers": draw(st.booleans()),
                 "relative_tolerance": draw(st.sampled_from([0.01, 0.05, 0.2]))}
    return data


def _agree(data: dict, md: str) -> None:
    try:
        theirs: float | None = P.score(data, md)
    except ValueError:
        theirs = None
    r = C.ChartPoint.model_validate(data)
    ours = None if C.problem(r) else C.score(r, md)
    assert ours == pytest.approx(theirs, abs=1e-12) if theirs is not None else ours is None, (data, md, ours, theirs)


EXAMPLES = int(os.environ.get("QUANTGATE_PARSEBENCH_EXAMPLES", "50"))
SETTINGS = settings(max_examples=EXAMPLES * 3, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(md=output(), draw=st.data())
def test_chart_point_rule_agrees(md, draw):
    _agree(draw.draw(rule(md)), md)


EDGE = [
    # the value written with another scale, in a row labelled by its first cell, under its column header
    ({"value": "39.2M", "labels": ["Revenue", "2021"]}, "| Year | Revenue |\n|---|---|\n| 2021 | $39,200,000 |"),
    ({"value": "39.2", "labels": ["Revenue", "2021"]}, "| Year | Revenue |\n|---|---|\n| 2021 | $39.2M |"),  # 1e6 apart
    ({"value": "2,08", "labels": ["Q1"]}, "| Q1 | 2.08 |"),  # a decimal comma
    ({"value": "25 (13.0%)", "labels": ["Retail"]}, "| Retail | 25 | 13.0% |\n|---|---|---|"),  # split across cells
    ({"value": "7", "labels": ["Share of total"]}, "**Share of total**\n\n| a | b |\n|---|---|\n| x | 7 |"),  # title
    ({"value": "7", "labels": ["Retail sales"]},
     "<table><caption>Retail sales</caption><tr><th colspan=\"2\">Region</th></tr><tr><td>x</td><td>7</td></tr></table>"),
    ({"value": "7", "labels": ["Region"]},  # a spanning header over the value's column
     "<table><tr><th colspan=\"2\">Region</th></tr><tr><td>x</td><td>7</td></tr></table>"),
    ({"value": "7", "labels": ["Workforce"]},  # one word of a long bold title is not the chart's title
     "**Evolution of the workforce, revenue and productivity**\n\n| a | b |\n|---|---|\n| x | 7 |"),
    ({"value": "7", "labels": ["x"]}, "no table at all"),
    ({"value": "7", "labels": []}, "| x | 7 |"),  # no label: upstream refuses the rule
    ({"value": "", "labels": ["x"]}, "| x | 7 |"),  # no value: refused
    ({"value": " ", "labels": ["x"]}, "| x |   |"),  # a blank value is not refused: it is compared as " "
    ({"value": None, "labels": ["x"]}, "| x | None |"),  # nor is a missing one: upstream reads it as "none"
]


@pytest.mark.parametrize(("data", "md"), EDGE)
def test_edge_cases_agree(data, md):
    _agree({"type": "chart_data_point", **data}, md)


def test_tables_read_as_upstream_lays_them_out():
    md = "intro\n## Title\n| h1 | h2 |\n|---|---|\n| a | 1 |\nafter\n<table><caption>Cap</caption><tr><th " \
         "rowspan=\"2\">R</th><th>c<sup>1</sup></th></tr><tr><td>v<br>w</td></tr></table>"
    t1, t2 = chart_tables(md)
    assert t1.cells == [["h1", "h2"], ["a", "1"]] and t1.context == "intro\n## Title"
    assert t1.col_headers == {0: ["h1"], 1: ["h2"]} and t1.row_headers == {1: ["a"]}
    assert t2.cells == [["R", "c\u00b9"], ["R", "v w"]] and t2.col_headers == {0: ["R"], 1: ["c\u00b9"]}
    assert t2.row_headers == {0: ["R", "c\u00b9"], 1: ["R"]} and t2.context.startswith("<caption>Cap</caption>")


def _valid(data: dict) -> bool:
    return not C.problem(C.ChartPoint.model_validate(data))


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(md=output() | st.sampled_from(["", " "]), draw=st.data())
def test_page_score_equals_upstreams_chart_pass_rate(md, draw):
    rules = draw.draw(st.lists(rule(md).filter(_valid), min_size=1, max_size=5))
    theirs = P.page_metrics(rules, md).get("rule_chart_data_point_pass_rate")
    assert C.page_score([C.ChartPoint.model_validate(r) for r in rules], md) == pytest.approx(theirs, abs=1e-12)


def test_a_table_whose_spans_would_fill_the_machine_is_left_out_of_the_content_and_chart_readings(monkeypatch):
    """A model's output can ask for rowspan="100000" colspan="100000": laid out cell by cell, as upstream lays it
    out, that is 10^10 slots. Past text.MAX_GRID_CELLS the content and chart readers leave such a table out (the
    table dimension drops it as unparseable); the tables beside it are read as before."""
    from quantgate.scoring.parsebench import text
    from quantgate.scoring.parsebench.chart_tables import html_tables

    plain = "<table><tr><th>a</th><th>b</th></tr><tr><td>1</td><td>2</td></tr></table>"
    hostile = '<table><tr><td rowspan="100000" colspan="100000">x</td></tr></table>'
    # each span under the cap, the box they make far over it
    box = '<table><tr><td colspan="100000">x</td></tr><tr><td rowspan="100000">y</td></tr></table>'
    for bad in (hostile, box):
        assert text.html_grid_rows(bad + plain) == [["a", "b"], ["1", "2"]]
        assert [t.cells for t in html_tables(bad + plain)] == [[["a", "b"], ["1", "2"]]]
    # the cap is where it says: a 3 × 4 grid is laid out under a cap of 12 slots, one slot more is not
    monkeypatch.setattr(text, "MAX_GRID_CELLS", 12)
    at_cap = '<table><tr><td colspan="4" rowspan="3">z</td></tr></table>'
    assert text.html_grid_rows(at_cap) == [["z"] * 4] * 3
    assert text.html_grid_rows(at_cap.replace('colspan="4"', 'colspan="5"')) == []
    assert html_tables(at_cap.replace('rowspan="3"', 'rowspan="4"')) == []
