"""The OmniDocBench v1.5 family's own behaviour, on pages written here: hybrid matching (a formula written as text is
matched, not missing), predicted tables no truth table took giving their cells to the text match, LaTeX tables,
the registry entries and their truth-free bound, and bad input (a truth record of another version, a formula the
LaTeX reader cannot read)."""

import json

import pytest

from quantgate.errors import InputError
from quantgate.schema.metrics import FAMILIES, METRICS
from quantgate.schema.omnidoc import TruthBlock, TruthPage
from quantgate.scoring import omnidoc as v10
from quantgate.scoring.bounds import truth_free_bound
from quantgate.scoring.metrics import get_metric, score_one
from quantgate.scoring.omnidoc import v15
from quantgate.scoring.omnidoc.truth import load_truth, parse_truth

TABLE = "<table><tr><td>Q1</td><td>Q2</td></tr><tr><td>10</td><td>12</td></tr></table>"


def _page(*blocks: TruthBlock) -> TruthPage:
    return TruthPage(image="p.jpg", source="test", blocks=list(blocks))


def test_a_formula_written_as_text_is_matched_by_v15_and_missing_for_v10():
    truth = _page(TruthBlock(category="text_block", order=1, text="The energy of a body at rest is"),
                  TruthBlock(category="equation_isolated", order=2, latex="E = m c^{2}"))
    pred = "The energy of a body at rest is\n\nE = mc2\n"
    old, new = v10.score_page(pred, truth), v15.score_page(pred, truth)
    assert old.values["omnidoc_formula_edit"] == 1.0  # v1.0: no formula predicted, the truth formula is missing
    # v1.5: the formula pairs with the text line and is scored as text (read as Unicode: "E = mc2")
    assert new.values[v15.FORMULA] is None
    assert new.values[v15.TEXT] == 0.0


def test_a_formula_matched_to_a_formula_stays_a_formula():
    truth = _page(TruthBlock(category="text_block", order=1, text="Some words here"),
                  TruthBlock(category="equation_isolated", order=2, latex="\\frac{a}{b}"))
    s = v15.score_page("Some words here\n\n$$\n\\frac{a}{c}\n$$\n", truth)
    assert s.values[v15.FORMULA] == pytest.approx(1 / len("\\frac{a}{b}"))
    assert s.values[v15.TEXT] == 0.0 and s.values[v15.READING] == 0.0


def test_a_single_column_array_is_one_formula_per_line():
    truth = _page(TruthBlock(category="equation_isolated", order=1, latex="\\begin{array}{l} x = 1 \\\\ y = 2 \\end{array}"),
                  TruthBlock(category="text_block", order=2, text="after"))
    s = v15.score_page("$$x = 1$$\n\n$$y = 2$$\n\nafter\n", truth)
    assert s.values[v15.FORMULA] == 0.0  # each line matched to its own predicted formula


def test_a_table_no_truth_table_took_gives_its_cells_to_the_text_match():
    truth = _page(TruthBlock(category="text_block", order=1, text="Revenue grew"),
                  TruthBlock(category="table", order=2, html=TABLE))
    pred = f"{TABLE}\n\n<table><tr><td>Revenue grew</td></tr></table>\n"
    s = v15.score_page(pred, truth)
    assert s.values[v15.TEXT] == 0.0 and s.values[v15.TEDS] == 1.0
    assert v10.score_page(pred, truth).values["omnidoc_text_edit"] == 1.0  # v1.0 never looks inside the table


def test_latex_tables_score_teds_0_and_edit_1_with_a_note():
    truth = _page(TruthBlock(category="table", order=1, html=TABLE))
    s = v15.score_page("\\begin{tabular}{cc} Q1 & Q2 \\\\ 10 & 12 \\end{tabular}\n", truth)
    assert s.tables[v15.TEDS] == [0.0] and s.values[v15.TABLE_EDIT] == 1.0
    assert any("LaTeX table" in n for n in s.notes)


def test_a_formula_the_latex_reader_cannot_read_is_left_out_with_a_note():
    # pylatexenc raises IndexError on a bare \verb; upstream's run stops there, quantgate leaves the pair out
    truth = _page(TruthBlock(category="equation_isolated", order=1, latex="\\verb"),
                  TruthBlock(category="text_block", order=2, text="Plain words"))
    s = v15.score_page("verb\n\nPlain words\n", truth)
    assert s.values[v15.FORMULA] is None and s.values[v15.TEXT] == 0.0
    assert len(s.notes) == 1 and "could not be read as text" in s.notes[0] and "IndexError" in s.notes[0]


def test_the_family_is_registered_with_direction_margin_and_bound():
    assert FAMILIES["omnidoc15"] == list(v15.METRICS)
    for name in v15.METRICS:
        spec = METRICS[name]
        assert spec.bound == "range_if_changed" and 0 < spec.margin < 1 and spec.family == "omnidoc15"
        assert spec.higher_is_better == (name == v15.TEDS)
        assert get_metric(name).needs == "omnidoc"
    assert "not CDM" in METRICS[v15.FORMULA].doc  # the name's fallback is said where the metric is listed


@pytest.mark.parametrize("metric", list(v15.METRICS))
def test_the_truth_free_bound_is_the_range_if_changed(metric):
    b, c = f"# Title\n\nSome text here.\n\n$$x^2$$\n\n{TABLE}\n", "Some text there.\n\n$$x^3$$\n\n# Title\n"
    assert truth_free_bound(metric, b, b) == 0.0
    bound = truth_free_bound(metric, b, c)
    assert bound == 1.0  # the protocol reads the text as given: no folding assumed, the whole range
    truth = _page(TruthBlock(category="title", order=1, text="Title"),
                  TruthBlock(category="text_block", order=2, text="Some text here."),
                  TruthBlock(category="equation_isolated", order=3, latex="x^2"),
                  TruthBlock(category="table", order=4, html=TABLE)).model_dump_json()
    m = get_metric(metric)
    sb, sc = score_one(m, b, None, [], truth), score_one(m, c, None, [], truth)
    assert sb is not None and sc is not None and sb != sc and abs(sb - sc) <= bound


def test_score_one_reads_the_truth_record_and_scores_an_empty_output_by_the_protocol():
    truth = _page(TruthBlock(category="text_block", order=1, text="Hello world"),
                  TruthBlock(category="equation_isolated", order=2, latex="x^2")).model_dump_json()
    text, formula, teds = (get_metric(n) for n in (v15.TEXT, v15.FORMULA, v15.TEDS))
    assert score_one(text, "Hello world", None, [], truth) == 0.0
    assert score_one(text, "", None, [], truth) == 1.0 and score_one(formula, "", None, [], truth) == 1.0
    assert score_one(teds, "Hello world", None, [], truth) is None  # no table in the truth: not scored
    assert score_one(text, "Hello world", None, [], None) is None


def test_a_truth_record_of_another_version_is_one_error_naming_the_file():
    record = json.loads(_page(TruthBlock(category="text_block", order=1, text="a")).model_dump_json())
    record["schema_version"] = 2
    with pytest.raises(InputError) as e:
        parse_truth(json.dumps(record), image="p.jpg", source="truth/p.omnidoc.json")
    message = str(e.value)
    assert message.startswith("truth/p.omnidoc.json: not a valid OmniDocBench truth record: schema_version: ")
    assert "(got '2')" in message and "pages import --truth" in message and "\n" not in message


def test_json_that_is_not_omnidocbenchs_page_list_is_one_error_naming_the_file(tmp_path):
    other = tmp_path / "OmniDocBench_v2.json"
    other.write_text(json.dumps({"pages": [{"image": "a.jpg", "blocks": []}]}), encoding="utf-8")
    with pytest.raises(InputError, match="OmniDocBench_v2.json: OmniDocBench truth is a JSON list of pages"):
        load_truth(other)
    other.write_text(json.dumps([{"image": "a.jpg", "blocks": []}]), encoding="utf-8")
    with pytest.raises(InputError, match="OmniDocBench_v2.json: page #0 has no 'page_info' object"):
        load_truth(other)


def test_set_scores_say_overall_is_not_computed():
    truth = _page(TruthBlock(category="text_block", order=1, text="Hello world")).model_dump_json()
    s = v15.set_scores({"p": "Hello"}, {"p": truth, "q": None})
    assert s.pages_with_truth == 1 and s.set_values[v15.TEXT] == pytest.approx(5 / 10)
    assert s.pages_scored[v15.TEDS] == 0 and s.set_values[v15.TEDS] is None
    assert "CDM" in v15.OVERALL_WHY and "not computed" in v15.OVERALL_WHY
