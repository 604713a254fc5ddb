"""The OmniDocBench metric family piece by piece, on small hand-made inputs whose expected values are worked
out in the comments: block splitting, normalisation, quick_match's pairs (quirks included), TEDS with
row and column spans, page values and their None cases, set aggregation, and bad truth input."""

import json

import pytest

from quantgate.errors import InputError
from quantgate.scoring.omnidoc import PageScore, aggregate, load_truth, parse_truth, score_page, truth_from_markdown
from quantgate.scoring.omnidoc.adapter import metric_fn
from quantgate.scoring.omnidoc.extract import split_blocks
from quantgate.scoring.omnidoc.match import quick_match
from quantgate.scoring.omnidoc.normalize import formula_key, table_html, text_key
from quantgate.scoring.omnidoc.teds import teds

# --- block splitting ---------------------------------------------------------------------------------

PAGE = """```markdown
# Title

Some text with $x^2$ inline.

$$
a + b
$$

![figure](a.png)

| h1 | h2 |
|----|----|
| 1  | 2  |

<table><tr><td>c</td></tr></table>
```"""


def test_a_page_splits_into_text_formulas_and_tables_in_page_order():
    blocks = split_blocks(PAGE)
    assert [(b.kind, b.content, b.inline) for b in blocks if b.kind != "html_table"] == [
        ("text", "# Title", False),
        ("text", "Some text with $x^2$ inline.", False),
        ("formula", "\\[x^2\\]", True),  # inline math: a formula candidate, and still in its text
        ("formula", "\\[a+b\\]", False),  # display math loses its whitespace, written as \[…\]
    ]
    tables = [table_html(b.content) for b in blocks if b.kind == "html_table"]
    cell = '<td colspan="1" rowspan="1">'
    assert tables == [  # the pipe table (rule row dropped) comes first: it is higher on the page
        f'<html><body><table border="1" ><tr>{cell}h1</td>{cell}h2</td></tr><tr>{cell}1</td>{cell}2</td></tr>'
        "</table></body></html>",
        '<html><body><table border="1" ><tr><td>c</td></tr></table></body></html>',
    ]


def test_pipe_tables_lose_what_upstream_loses():
    # kept upstream behaviour (docs/metrics.md): the line right above a table goes, and so does any cell
    # holding ':' — and a page needs two pipe rows before anything is converted
    blocks = split_blocks("Intro line\nabove\n| a | 10:30 |\n| b | c |\n\nAfter.")
    assert [b.content for b in blocks if b.kind == "text"] == ["Intro line", "After."]
    cell = '<td colspan="1" rowspan="1">'
    assert [table_html(b.content) for b in blocks if b.kind == "html_table"] == [
        f'<html><body><table border="1" ><tr>{cell}a</td></tr><tr>{cell}b</td>{cell}c</td></tr></table></body></html>']
    assert [b.kind for b in split_blocks("| lone | row |")] == ["text"]


def test_nested_html_tables_are_one_block_and_an_unclosed_one_does_not_swallow_the_page():
    inner = "<table><tr><td>in</td></tr></table>"
    blocks = split_blocks(f"<table><tr><td>{inner}</td></tr></table>\n\n<table><tr><td>open\n\nafter")
    assert [(b.kind, b.content) for b in blocks] == [
        ("html_table", f"<table><tr><td>{inner}</td></tr></table>"),
        ("text", "<table><tr><td>open"), ("text", "after")]


# --- normalisation -------------------------------------------------------------------------------------

def test_text_is_compared_by_letters_digits_and_cjk_with_inline_math_read_as_unicode():
    assert text_key("Hello, World! $x^2$ and $\\alpha$ 天气。") == "HelloWorldx2andα天气"


def test_formulas_are_compared_without_font_commands_tags_and_spaces():
    assert formula_key("\\[ \\mathbf{x} = 1 \\tag{3} \\]") == "{x}=1"
    assert formula_key("\\begin{aligned} A &= B \\end{aligned}") == "a&=b"


def test_table_html_is_normalised_to_cells():
    raw = '<table style="w"><thead><tr><th>h</th></tr></thead><tbody><tr><td><span>a</span><sup>1</sup></td></tr></tbody></table>'
    assert table_html(raw) == '<html><body><table border="1" ><tr><td>h</td></tr><tr><td>a1</td></tr></table></body></html>'
    assert table_html("no table here") == ""


# --- quick_match ----------------------------------------------------------------------------------------

def test_a_prediction_split_in_two_is_joined_to_match_its_truth_block():
    truth = [text_key("the quick brown fox jumps over the lazy dog")]
    pred = [text_key("the quick brown fox"), text_key("jumps over the lazy dog")]
    assert quick_match(truth, pred) == [((0,), (0, 1))]


def test_truth_blocks_found_inside_one_prediction_are_all_matched_to_it():
    truth = [text_key("alpha beta"), text_key("gamma delta epsilon")]
    assert quick_match(truth, [text_key("alpha beta gamma delta epsilon")]) == [((0, 1), (0,))]


def test_unmatched_truth_counts_twice_when_every_prediction_is_used():
    # upstream's quirk, kept (docs/metrics.md)
    assert quick_match(["aaaa", "bbbb", "cccc"], ["aaaa"]) == [((0,), (0,)), ((1,), ()), ((2,), ()), ((1,), ()), ((2,), ())]


def test_stray_predictions_are_one_unmatched_entry():
    assert quick_match(["alpha"], ["alpha", "zzzz", "yyyy"]) == [((0,), (0,)), ((), (1, 2))]


# --- TEDS -----------------------------------------------------------------------------------------------

def _t(rows: str) -> str:
    return table_html(f"<table>{rows}</table>")


def test_teds_of_a_table_with_itself_is_one():
    t = _t('<tr><td rowspan="2">a</td><td colspan="2">b</td></tr><tr><td>c</td><td>d</td></tr>')
    assert teds(t, t) == teds(t, t, structure_only=True) == 1.0


def test_teds_charges_a_lost_colspan_and_a_wrong_cell():
    truth = _t('<tr><td colspan="2">a</td></tr><tr><td>b</td><td>c</td></tr>')  # 5 elements under <table>
    pred = _t("<tr><td>a</td><td></td></tr><tr><td>b</td><td>x</td></tr>")  # 6
    # renaming the spanned cell costs 1, the extra cell 1, 'c'→'x' 1 (0 when only structure counts)
    assert teds(pred, truth) == pytest.approx(1 - 3 / 6)
    assert teds(pred, truth, structure_only=True) == pytest.approx(1 - 2 / 6)


def test_teds_charges_a_lost_rowspan():
    truth = _t('<tr><td rowspan="2">a</td><td>b</td></tr><tr><td>c</td></tr>')
    pred = _t("<tr><td>a</td><td>b</td></tr><tr><td></td><td>c</td></tr>")
    assert teds(pred, truth) == pytest.approx(1 - 2 / 6)


def test_teds_counts_tags_inside_cells_as_tokens():
    # <td><b>x</b></td>: tokens <b> x </b> (edit 2 of 3 against 'x'); 3 elements under the truth's <table>
    assert teds(_t("<tr><td>x</td></tr>"), _t("<tr><td><b>x</b></td></tr>")) == pytest.approx(1 - (2 / 3) / 3)


def test_teds_of_no_prediction_is_zero():
    assert teds("", _t("<tr><td>a</td></tr>")) == 0.0


# --- page values ----------------------------------------------------------------------------------------

def _truth_json(tmp_path, blocks, relations=(), name="p1.jpg"):
    page = {"layout_dets": blocks, "page_info": {"image_path": f"images/{name}", "page_attribute": {"language": "en"}},
            "extra": {"relation": list(relations)}}
    path = tmp_path / "OmniDocBench.json"
    path.write_text(json.dumps([page]), encoding="utf-8")
    return path


BLOCKS = [
    {"category_type": "header", "anno_id": 0, "order": None, "text": "Journal X", "ignore": False},
    {"category_type": "title", "anno_id": 1, "order": 1, "text": "Intro", "ignore": False},
    {"category_type": "text_block", "anno_id": 2, "order": 2, "text": "The cat sat on the mat.", "ignore": False},
    {"category_type": "text_block", "anno_id": 3, "order": 3, "text": "Dogs bark loudly at night.", "ignore": False},
    {"category_type": "figure", "anno_id": 4, "order": 4, "ignore": False},
]


def test_a_page_is_scored_on_what_its_truth_has(tmp_path):
    page = load_truth(_truth_json(tmp_path, BLOCKS))["p1.jpg"]
    assert page.page_id == "p1"
    s = score_page("Journal X\n\n# Intro\n\nDogs bark loudly at night.\n\nThe cat sat on the mat.", page)
    assert s.values["omnidoc_text_edit"] == 0.0  # the header is matched, then left out of the score
    # truth orders read in the prediction's order: 1 3 2 against 1 2 3 — two edits of three
    assert s.values["omnidoc_reading_order_edit"] == pytest.approx(2 / 3)
    for m in ("omnidoc_formula_edit", "omnidoc_table_teds", "omnidoc_table_teds_struct", "omnidoc_table_edit"):
        assert s.values[m] is None  # no formula or table in the truth: not scored


def test_an_empty_prediction_gets_the_worst_values_where_the_truth_has_something(tmp_path):
    blocks = BLOCKS + [{"category_type": "table", "anno_id": 9, "order": 5, "html": "<table><tr><td>a</td></tr></table>",
                        "ignore": False},
                       {"category_type": "equation_isolated", "anno_id": 8, "order": 6, "latex": "E=mc^2", "ignore": False}]
    s = score_page("", load_truth(_truth_json(tmp_path, blocks))["p1.jpg"])
    assert s.values == {"omnidoc_text_edit": 1.0, "omnidoc_formula_edit": 1.0, "omnidoc_table_teds": 0.0,
                        "omnidoc_table_teds_struct": 0.0, "omnidoc_table_edit": 1.0, "omnidoc_reading_order_edit": 1.0}


def test_latex_table_predictions_score_teds_zero_and_say_so(tmp_path):
    blocks = [{"category_type": "table", "anno_id": 1, "order": 1, "html": "<table><tr><td>a</td></tr></table>",
               "latex": "\\begin{tabular}{c} a \\end{tabular}", "ignore": False}]
    s = score_page("\\begin{tabular}{c} a \\end{tabular}", load_truth(_truth_json(tmp_path, blocks))["p1.jpg"])
    assert s.values["omnidoc_table_teds"] == 0.0 and s.tables["omnidoc_table_teds"] == [0.0]
    assert any("LaTeX table" in n for n in s.notes)


def test_truncated_blocks_are_merged_repeating_a_chains_middle_as_upstream(tmp_path):
    blocks = [{"category_type": "text_block", "anno_id": k, "order": k + 1, "text": t, "ignore": False}
              for k, t in enumerate(["one ", "two ", "three"])]
    rel = [{"source_anno_id": 0, "target_anno_id": 1, "relation_type": "truncated"},
           {"source_anno_id": 1, "target_anno_id": 2, "relation_type": "truncated"}]
    page = load_truth(_truth_json(tmp_path, blocks, rel))["p1.jpg"]
    assert [(b.text, b.order, b.anno_ids) for b in page.blocks] == [("one two two three", 1, [0, 1, 1, 2])]


def test_aggregate_averages_edit_distances_per_page_and_teds_per_table():
    def page(text, tables):
        values = dict.fromkeys(("omnidoc_text_edit", "omnidoc_formula_edit", "omnidoc_table_teds",
                                "omnidoc_table_teds_struct", "omnidoc_table_edit", "omnidoc_reading_order_edit"))
        values["omnidoc_text_edit"] = text
        if tables:
            values["omnidoc_table_teds"] = sum(tables) / len(tables)
        return PageScore(values=values, tables={"omnidoc_table_teds": tables} if tables else {})

    out = aggregate([page(0.2, [1.0, 0.0, 0.5]), page(0.4, [1.0]), page(None, [])])
    assert out["omnidoc_text_edit"] == pytest.approx(0.3)
    assert out["omnidoc_table_teds"] == pytest.approx(2.5 / 4)  # not the mean of page means (0.75)
    assert out["omnidoc_formula_edit"] is None


def test_truth_reaches_a_metric_as_a_record_or_as_markdown(tmp_path):
    page = load_truth(_truth_json(tmp_path, BLOCKS))["p1.jpg"]
    pred = "# Intro\n\nThe cat sat on the mat."
    assert parse_truth(page.model_dump_json(), image="p1.jpg", source="t") == page
    assert metric_fn("omnidoc_text_edit")(pred, page.model_dump_json()) == score_page(pred, page).values["omnidoc_text_edit"]
    md = "# Intro\n\nThe cat sat on the mat.\n\n$$\nE = mc^2\n$$\n"
    assert metric_fn("omnidoc_formula_edit")("$$E=mc^2$$", md) == 0.0
    assert truth_from_markdown(md, image="p.jpg").blocks[2].latex == "\\[E=mc^2\\]"
    with pytest.raises(KeyError, match="not an OmniDocBench metric"):
        metric_fn("omnidoc_nothing")


# --- bad truth input ------------------------------------------------------------------------------------

def test_an_unknown_category_names_file_page_and_block(tmp_path):
    path = _truth_json(tmp_path, BLOCKS[:2] + [{"category_type": "sidebar", "anno_id": 7, "text": "x"}])
    with pytest.raises(InputError, match=r"OmniDocBench\.json: page 'p1\.jpg', block #2 \(anno_id 7\): unknown category 'sidebar'"):
        load_truth(path)


def test_a_text_block_without_text_names_the_block(tmp_path):
    path = _truth_json(tmp_path, [{"category_type": "text_block", "anno_id": 3, "order": 1}])
    with pytest.raises(InputError, match=r"page 'p1\.jpg', block #0 \(anno_id 3\): a text_block block needs its 'text'"):
        load_truth(path)


@pytest.mark.parametrize("html, why", [
    ("<p>no table at all</p>", "no <table>"),
    ('<table><tr><td colspan="two">a</td></tr></table>', "not a whole number"),
    ("<table></table>", "no rows or cells"),
])
def test_a_table_teds_cannot_read_is_a_listed_skip_and_the_rest_still_counts(tmp_path, html, why):
    blocks = BLOCKS + [{"category_type": "table", "anno_id": 9, "order": 5, "html": html, "ignore": False}]
    page = load_truth(_truth_json(tmp_path, blocks))["p1.jpg"]
    assert [(s.anno_id, s.category) for s in page.skipped] == [(9, "table")]
    assert why in page.skipped[0].reason
    s = score_page("# Intro\n\nThe cat sat on the mat.\n\nDogs bark loudly at night.", page)
    assert s.values["omnidoc_table_teds"] is None and s.values["omnidoc_text_edit"] == 0.0
    assert any("anno_id 9" in n for n in s.notes)


def test_a_truncation_relation_to_a_missing_block_is_an_error(tmp_path):
    rel = [{"source_anno_id": 2, "target_anno_id": 42, "relation_type": "truncated"}]
    with pytest.raises(InputError, match="names anno_id 42, which no block has"):
        load_truth(_truth_json(tmp_path, BLOCKS, rel))


def test_truth_that_is_not_omnidocbench_json_is_refused(tmp_path):
    (tmp_path / "a.json").write_text('{"pages": []}', encoding="utf-8")
    with pytest.raises(InputError, match="a JSON list of pages"):
        load_truth(tmp_path / "a.json")
    (tmp_path / "b.json").write_text(json.dumps([{"layout_dets": []}]), encoding="utf-8")
    with pytest.raises(InputError, match="page #0 has no 'page_info'"):
        load_truth(tmp_path / "b.json")
    page = {"layout_dets": [], "page_info": {"image_path": "x.jpg"}}
    (tmp_path / "c.json").write_text(json.dumps([page, page]), encoding="utf-8")
    with pytest.raises(InputError, match="'x.jpg' appears twice"):
        load_truth(tmp_path / "c.json")


def test_truth_rendered_as_markdown_scores_perfectly_against_its_record(tmp_path):
    from quantgate.scoring.omnidoc.truth import truth_markdown

    blocks = BLOCKS + [{"category_type": "equation_isolated", "anno_id": 8, "order": 5, "latex": "E = m c^2", "ignore": False},
                       {"category_type": "table", "anno_id": 9, "order": 6, "ignore": False,
                        "html": '<table><tr><td rowspan="2">a</td><td>b</td></tr><tr><td>c</td></tr></table>'}]
    page = load_truth(_truth_json(tmp_path, blocks))["p1.jpg"]
    md = truth_markdown(page)
    assert md.startswith("Journal X\n\nIntro\n\nThe cat sat on the mat.")  # no order (a header) sorts first
    assert score_page(md, page).values == {
        "omnidoc_text_edit": 0.0, "omnidoc_formula_edit": 0.0, "omnidoc_table_teds": 1.0,
        "omnidoc_table_teds_struct": 1.0, "omnidoc_table_edit": 0.0, "omnidoc_reading_order_edit": 0.0}
