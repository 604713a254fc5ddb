"""Differential parity of quantgate's ParseBench content-faithfulness rules with upstream's own rule classes
(../shared/reference/parsebench, loaded on 3.11 by tests/support/parsebench_ref.py): every rule type on
hand-picked edge cases and on hypothesis-generated outputs and bags, same score (or both refuse the rule).
Upstream's own test suite has no fixtures for these rule types (its tests cover tables, forms and formatting),
so the hand-picked cases here stand in for them."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from quantgate.scoring.parsebench import rules as R
from tests.support import parsebench_ref as P

pytestmark = pytest.mark.skipif(bool(P.reference_missing_reason()), reason=P.reference_missing_reason() or "")

WORDS = ["alpha", "Beta", "café", "naïve", "the", "other", "Q3", "2024", "x", "数据", "検査abc", "&amp;", "don't",
         "**bold**", "_it_", "<b>tag</b>", "$x^2$", "$15.00", "H₂O", "84.1¹", "<sup>2</sup>", "—", "…", "“q”"]
SEPARATORS = [" ", " ", " ", ". ", ".\n", "\n\n", "! ", ", ", "... ", "\n- ", "\n# ", " | "]
TABLE = "\n\n| alpha | Beta |\n|---|---|\n| 2024 | café |\n\n"
HTML_TABLE = "<table><tr><td colspan=\"2\">the other alpha</td></tr><tr><td>Q3</td><td>2024</td></tr></table>"
# markdown tables upstream and quantgate read with different parsers: no outer pipes, ragged rows, markup in
# cells, a one-column table inside prose, an escaped pipe
MD_TABLES = ["alpha | Beta\n--- | ---\n2024 | café\n", "| a1 | b2 | c3 |\n|:--|--:|:-:|\n| x | y |\n| p | q | r | s |\n",
             "| **Q3** | the other |\n|---|---|\n| 84.1<sup>2</sup> | $x^2$ |\n",
             "text before\n| alpha |\n|---|\n| beta |\ntext after", "| a | b |\n|---|---|\n| 1 \\| 2 | 3 |\n"]
# spans across rows, a footnote digit, a nested table, a line break in a cell
HTML_TABLE_2 = ("<table><thead><tr><th rowspan=\"2\">Beta 84.1<sup>2</sup></th><th>café<br>naïve</th></tr></thead>"
                "<tr><td><table><tr><td>数据</td></tr></table> x2</td></tr><tr><td>H<sub>2</sub>O</td></tr></table>")


@st.composite
def markdown(draw) -> str:
    parts = draw(st.lists(st.tuples(st.sampled_from(WORDS), st.sampled_from(SEPARATORS)), max_size=25))
    text = "".join(w + s for w, s in parts)
    if draw(st.booleans()):
        text += draw(st.sampled_from([TABLE, *MD_TABLES, HTML_TABLE, HTML_TABLE_2, "\n```mermaid\ngraph alpha\n```\n", "$$\\frac{a}{b}$$",
                                      "![alt Beta](img.png)", "<https://a.b/c>"]))
    return text


@st.composite
def sentence_bag(draw) -> dict[str, int]:
    keys = draw(st.lists(markdown(), min_size=1, max_size=5))
    return {k: draw(st.integers(0, 3)) for k in keys}


def _agree(data: dict, md: str) -> None:
    try:
        theirs: float | None = P.score(data, md)
    except ValueError:
        theirs = None
    rule = R.RULE.validate_python(data)
    ours = None if R.problem(rule) else R.score(rule, md)
    assert ours == pytest.approx(theirs, abs=1e-12) if theirs is not None else ours is None, (data, md, ours, theirs)


WORD_TYPES = ["missing_word_percent", "unexpected_word_percent", "too_many_word_occurence_percent"]
SENTENCE_TYPES = ["missing_sentence_percent", "unexpected_sentence_percent", "too_many_sentence_occurence_percent",
                  "extra_content"]
SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(kind=st.sampled_from(WORD_TYPES), md=markdown(),
       bag=st.dictionaries(st.sampled_from(WORDS), st.integers(0, 3), min_size=1, max_size=6))
def test_word_rules_agree(kind, md, bag):
    _agree({"type": kind, "bag_of_word": bag}, md)


@SETTINGS
@given(kind=st.sampled_from(SENTENCE_TYPES), md=markdown(), bag=sentence_bag(),
       original=st.none() | markdown())
def test_sentence_rules_agree(kind, md, bag, original):
    data = {"type": kind, "bag_of_sentence": bag}
    if kind == "unexpected_sentence_percent":
        data["original_md"] = original
    _agree(data, md)


@SETTINGS
@given(md=markdown(), bag=st.dictionaries(st.sampled_from("0123456789"), st.integers(0, 4), min_size=1))
def test_digit_rule_agrees(md, bag):
    _agree({"type": "bag_of_digit_percent", "bag_of_digit": bag}, md)


@SETTINGS
@given(md=markdown(), before=markdown(), after=markdown(), diffs=st.integers(0, 3))
def test_order_rule_agrees(md, before, after, diffs):
    _agree({"type": "order", "before": before, "after": after, "max_diffs": diffs}, md)


EDGE = [
    ({"type": "missing_word_percent", "bag_of_word": {"café": 2, "Beta": 1}}, "Cafe beta CAFÉ"),
    ({"type": "missing_word_percent", "bag_of_word": {"2024": 1, "café": 1}}, TABLE),  # found in table cells
    ({"type": "unexpected_word_percent", "bag_of_word": {"alpha": 1}}, "alpha " + HTML_TABLE),  # tables ignored
    ({"type": "unexpected_word_percent", "bag_of_word": {"alpha": 1}}, ""),  # nothing written: nothing extra
    ({"type": "too_many_word_occurence_percent", "bag_of_word": {"the": 1}}, "the the other the"),
    ({"type": "missing_word_percent", "bag_of_word": {"x": 1}}, "x"),  # too short: upstream refuses the rule
    ({"type": "missing_sentence_percent", "bag_of_sentence": {"The cat sat here.": 2}}, "The cat sat here."),
    ({"type": "missing_sentence_percent", "bag_of_sentence": {"Fig 1": 1}}, "fig 1"),  # under 7: dropped
    ({"type": "unexpected_sentence_percent", "bag_of_sentence": {"One line here.": 1},
      "original_md": "Another line here."}, "One line here. Another line here. Made up words."),
    ({"type": "too_many_sentence_occurence_percent", "bag_of_sentence": {"Repeat me now.": 1}},
     "Repeat me now. Repeat me now! Repeat me now?"),
    ({"type": "extra_content", "bag_of_sentence": {"Only this sentence.": 1}}, "Only this sentence.\n\nOnly this"),
    ({"type": "bag_of_digit_percent", "bag_of_digit": {"2": 2, "3": 1}}, '<td rowspan="3">2</td>'),
    ({"type": "missing_word_percent", "bag_of_word": {"alpha": 3, "q3": 1}}, HTML_TABLE),  # spans repeat text
    ({"type": "too_many_word_occurence_percent", "bag_of_word": {"beta": 1, "naive": 1}}, HTML_TABLE_2),
    ({"type": "bag_of_digit_percent", "bag_of_digit": {"2": 3, "8": 2}}, HTML_TABLE_2),
    ({"type": "order", "before": "Introduction", "after": "Conclusion"}, "Conclusion ... Introduction"),
    ({"type": "order", "before": "Introductoin", "after": "Conclusion", "max_diffs": 1},
     "Introduction then Conclusion"),
    ({"type": "order", "before": "$a^2$", "after": "end"}, "the $a^{2}$ then the end"),
]


@pytest.mark.parametrize(("data", "md"), EDGE)
def test_edge_cases_agree(data, md):
    _agree(data, md)


def test_the_hook_rewrites_only_alias_statements():
    src = "type Rule = (\n    A\n    | B\n)\nx = 'type T = 1'\n    type_ = 2\n"
    assert P.rewrite(src) == "Rule = (\n    A\n    | B\n)\nx = 'type T = 1'\n    type_ = 2\n"
