"""quantgate's table graph (quantgate/scoring/tablegraph.py) against upstream olmOCR-bench's table model
(../shared/reference/olmocr-bench/table_parsing.py, imported from there): the same cells, headings,
neighbours in four directions, heading walks and rectangularity on generated HTML tables (rowspan and
colspan, invalid and zero spans, spans cut short by a later colspan, <thead>, nested tables, empty
rows) and markdown tables (rules, outer pipes or none, ragged rows, blank and pipe-only lines), and on
every system output of the bundled olmOCR sample; plus the table checks' verdicts on that sample."""

import importlib.util
import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from quantgate.scoring.tablegraph import DIRECTIONS, html_tables, markdown_tables, read_tables
from tests.support.paths import OLMOCR_SAMPLE, oracle_missing
from tests.support.upstream_olmocr import REFERENCE

UPSTREAM_FILE = REFERENCE / "table_parsing.py"
pytestmark = pytest.mark.skipif(oracle_missing(UPSTREAM_FILE) is not None, reason=oracle_missing(UPSTREAM_FILE) or "")
needs_sample = pytest.mark.skipif(oracle_missing(OLMOCR_SAMPLE) is not None, reason=oracle_missing(OLMOCR_SAMPLE) or "")
SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))


def _upstream():
    spec = importlib.util.spec_from_file_location("upstream_table_parsing", UPSTREAM_FILE)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


UP = _upstream() if UPSTREAM_FILE.is_file() else None


def same_as_upstream(content: str) -> int:
    """Asserts both models read ``content`` alike; returns how many tables they found."""
    ours = markdown_tables(content)
    theirs = UP.parse_markdown_tables(content)
    try:
        theirs_html = UP.parse_html_tables(content)
    except IndexError:  # upstream's relation scan past the last row: we flag the table instead
        theirs_html = None
    ours_html = html_tables(content)
    if theirs_html is None:
        assert any(g.spans_past_end for g in ours_html), content
        pairs = list(zip(ours, theirs, strict=True))
    else:
        assert not any(g.spans_past_end for g in ours_html), content
        pairs = list(zip(ours + ours_html, theirs + theirs_html, strict=True))
    for g, t in pairs:
        assert g.text == t.cell_text
        assert g.headings == t.heading_cells
        assert g.rectangular == t.is_rectangular
        for d in DIRECTIONS:
            assert g.neighbours[d] == getattr(t, f"{d}_relations"), (d, content)
        for p in t.cell_text:
            assert g.related(p, "top_heading") == t.top_heading_relations(*p), (p, content)
            assert g.related(p, "left_heading") == t.left_heading_relations(*p), (p, content)
    return len(pairs)


TEXT = st.lists(st.sampled_from(["a", "Total", "42", "x y", "<br>", "<br/>", "<b>b</b>", " ", "|", "é", "\n"]),
                max_size=3).map("".join)
SPAN = st.one_of(st.none(), st.none(), st.sampled_from(["2", "3"]),
                 st.sampled_from(["1", "4", "0", " 0 ", "00", "x", "-1", "", " 2", "2.5"]))


@st.composite
def html_cell(draw, depth):
    tag = draw(st.sampled_from(["td", "td", "th"]))
    attrs = "".join(f' {k}="{v}"' for k, v in (("rowspan", draw(SPAN)), ("colspan", draw(SPAN))) if v is not None)
    inner = draw(html_table(depth + 1)) if depth < 1 and draw(st.integers(0, 9)) == 0 else draw(TEXT)
    return f"<{tag}{attrs}>{inner}</{tag}>"


@st.composite
def html_table(draw, depth=0):
    width = draw(st.integers(1, 4))  # rows of this many cells, or of any number (ragged)
    ragged = draw(st.booleans())
    rows = [("<tr>" + "".join(draw(st.lists(html_cell(depth), min_size=0 if ragged else width,
                                            max_size=4 if ragged else width))) + "</tr>")
            for _ in range(draw(st.integers(0, 6)))]
    head = draw(st.integers(0, len(rows)))
    sections = draw(st.sampled_from(["none", "thead", "thead+tbody", "tbody"]))
    if sections == "none":
        body = "".join(rows)
    elif sections == "tbody":
        body = "<tbody>" + "".join(rows) + "</tbody>"
    else:
        tail = "".join(rows[head:])
        body = "<thead>" + "".join(rows[:head]) + "</thead>" + (f"<tbody>{tail}</tbody>" if "tbody" in sections else tail)
    return f"<table>{body}</table>"


@st.composite
def crowded_table(draw):
    """Few rows, spans of 1-3 everywhere: spans overlap, and a colspan often cuts a rowspan short."""
    def cell():
        return st.tuples(st.sampled_from(["td", "th"]), st.integers(1, 3), st.integers(1, 3), TEXT).map(
            lambda c: f'<{c[0]} rowspan="{c[1]}" colspan="{c[2]}">{c[3]}</{c[0]}>')
    rows = draw(st.lists(st.lists(cell(), max_size=3).map("".join), min_size=1, max_size=3))
    return "<table>" + "".join(f"<tr>{r}</tr>" for r in rows) + "</table>"


MD_LINE = st.one_of(
    st.lists(TEXT.map(lambda s: s.replace("\n", " ")), min_size=1, max_size=5).flatmap(
        lambda cells: st.tuples(st.booleans(), st.booleans()).map(
            lambda lt: ("| " if lt[0] else "") + " | ".join(cells) + (" |" if lt[1] else ""))),
    st.sampled_from(["|---|---|", "---|---", "| :-- | --: |", "|:-:|", "|\t---|", "||", "|", "| |", "- | -",
                     "", "prose without pipes", "a | b\r", "a |\rb |", "c |\u2028| d", "| --- | x |", "  |  "]))


@SETTINGS
@given(st.lists(st.one_of(html_table(), crowded_table(), st.lists(MD_LINE, min_size=1, max_size=7).map("\n".join)), min_size=1,
                max_size=3), st.sampled_from(["\n", "\n\n", " text ", ""]))
def test_generated_tables_read_as_upstream_reads_them(parts, sep):
    same_as_upstream(sep.join(parts))


def test_hand_made_tables():
    # a heading spanning two columns is "up" of both cells under it, and their top heading
    g = html_tables("<table><tr><th colspan=2>Q1</th></tr><tr><td>3</td><td>7</td></tr></table>")[0]
    assert g.text == {(0, 0): "Q1", (1, 0): "3", (1, 1): "7"}
    assert g.related((1, 1), "up") == g.related((1, 1), "top_heading") == {(0, 0)}
    assert g.related((0, 0), "down") == {(1, 0), (1, 1)} and g.rectangular
    # a rowspan: the cell right of it in row 1 has it as left neighbour; its left heading is the row's start
    g = html_tables("<table><tr><td rowspan=2>A</td><td>b</td></tr><tr><td>c</td></tr></table>")[0]
    assert g.text == {(0, 0): "A", (0, 1): "b", (1, 1): "c"}
    assert g.related((1, 1), "left") == {(0, 0)} and g.related((0, 0), "right") == {(0, 1), (1, 1)}
    # no heading cell on the way: the walk gives the cells where it stops
    assert g.related((1, 1), "top_heading") == {(0, 1)} and g.related((0, 1), "top_heading") == set()
    # a later colspan cuts A's rowspan short: A claims a row the table lacks (upstream raises here)
    g = html_tables("<table><tr><td>X</td><td rowspan=3>A</td></tr><tr><td colspan=2>B</td></tr></table>")[0]
    assert g.spans_past_end and g.text == {(0, 0): "X", (0, 1): "A", (1, 0): "B"}
    # markdown: first row and first column are headings; ragged rows leave the grid non-rectangular
    g = markdown_tables("| h1 | h2 |\n|---|---|\n| r | 1 |\n| s |")[0]
    assert g.headings == {(0, 0), (0, 1), (1, 0), (2, 0)} and not g.rectangular
    assert g.rows() == [["h1", "h2"], ["r", "1"], ["s"]]
    assert read_tables("| a |\n| b |\n<table><tr><td>z</td></tr></table>", markdown=False)[0].text == {(0, 0): "z"}
    assert markdown_tables("one | line only") == [] and html_tables("<table></table>") == []


def _sample_outputs() -> list[Path]:
    return sorted(p for p in OLMOCR_SAMPLE.rglob("*.md") if p.parent.name != "pdfs" and "repeat" in p.name)


@needs_sample
def test_every_sample_output_reads_as_upstream_reads_it():
    outputs = _sample_outputs()
    assert len(outputs) >= 80
    tables = sum(same_as_upstream(p.read_text("utf-8")) for p in outputs)
    assert tables >= 20  # the sample's outputs do hold tables (markdown ones)


@needs_sample
def test_every_sample_table_check_gives_upstreams_verdict():
    from quantgate.scoring.olmocr_checks import run_check
    from tests.support import upstream_olmocr

    up = upstream_olmocr.load()
    checks = [json.loads(line) for f in ("dataset.jsonl", "blanks.jsonl")
              for line in (OLMOCR_SAMPLE / f).read_text().splitlines() if line.strip()]
    compared = passed = 0
    for c in (c for c in checks if c["type"] == "table"):
        for md in sorted(OLMOCR_SAMPLE.rglob(f"{Path(c['pdf']).stem}_pg{c['page']}_repeat*.md")):
            content = md.read_text("utf-8")
            theirs = up.load_single_test(dict(c)).run(content)[0]
            assert run_check(c, content) == theirs, (c["id"], md)
            compared, passed = compared + 1, passed + theirs
    assert compared >= 80 and 0 < passed < compared  # both verdicts occur
