"""quantgate's port of CDM's tokenizer (quantgate/scoring/omnidoc/cdm_tokenize.py) against upstream's own, run live
(``node preprocess_formula.js normalize`` from ../shared/reference): the same output line, failures included, on
hand-picked formulas covering each rule and on generated ones. Batched: one node process per 40 formulas."""

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from quantgate.scoring.omnidoc.cdm_tokenize import normalize_line
from tests.support import upstream_cdm as ref

pytestmark = pytest.mark.skipif(ref.tokenizer_missing() is not None, reason=ref.tokenizer_missing() or "")

HAND = ["x^2", "\\frac{a}{b}", "\\color{red}{x}", "a \\over b", "\\text{for all } x", "\\mathrm{d\\alpha}",
        "\\sin x + \\max_i y", "\\left( x \\right.", "\\begin{array}{c|l} a & b \\\\ c & \\end{array}",
        "\\pmatrix{a&b\\\\c&d}", "{\\rm abc} \\bf x", "x'' + y_1^2", "\\hspace{1cm} \\rule{1pt}{2.5pt}", "\\foo{x}",
        "\\sqrt[3]{x}", "\\big( x \\Bigr]", "\\begin{aligned} a &= b \\\\ &= c \\end{aligned}",
        "\\begin{cases} 1 & x \\\\ 0 \\end{cases}", "%abc", "a % b", "$x$", "\\label{eq} y", "a\\\\b",
        "\\operatorname{sin} x", "\\displaystyle \\sum_{i=1}^n", "\\KaTeX", "x^\\frac12", "\\text{\\alpha b}",
        "\\mathrm{\\alpha \\cdot}", "中文 x", "\\stackrel{a}{b}", "\\int\\limits_0^1", "x\\limits",
        "\\overline{ab} \\underline c", "\\vec x \\hat{y}", "a \\choose b \\over c", "\\left\\{ x \\right\\|",
        "\\begin{matrix} a \\end{matrix}", "\\begin{equation} x \\end{equation}", "x^{a}^{b}", "\\mathbf",
        "\\sqrt", "\\frac{1}", "\\rm{x} y", "\\> x \\~ y", "\\rule[-1pt]{2em}{.5ex}", "\\big\\{", "}", "\\\\",
        "\\begin{tabular}{|c|} a \\\\ \\hline b \\end{tabular}", "\\blue{x}", "\\textstyle a \\over b"]

PIECES = ["x", "y", "2", "+", "=", "(", ")", "[", "]", "|", "'", ",", ".", " ", "  ", "{", "}", "{", "}", "^", "_",
          "&", "\\\\", "\\frac", "\\dfrac", "\\binom", "\\sqrt", "\\sqrt[3]", "\\left(", "\\right)", "\\left.",
          "\\right|", "\\big(", "\\Bigl[", "\\text{a b}", "\\mathrm{d}", "\\mathrm", "\\mathbf{x}", "\\bf", "\\rm",
          "\\it", "{\\rm x}", "\\displaystyle", "\\alpha", "\\Gamma", "\\cdot", "\\infty", "\\foo", "\\sin", "\\lim",
          "\\sum", "\\int", "\\limits", "\\hat", "\\vec{v}", "\\overline", "\\over", "\\choose", "\\color{red}",
          "\\hspace{2pt}", "\\quad", "\\,", "\\;", "\\!", "~", "\\operatorname{max}", "\\operatorname*{lim}",
          "\\begin{array}{cc}", "\\end{array}", "\\begin{aligned}", "\\end{aligned}", "\\begin{cases}",
          "\\end{cases}", "\\pmatrix{", "\\label{x}", "%", "$", "\\phantom{x}", "\\llap{x}", "\\underline",
          "\\rule{1pt}{2pt}", "\\cr", "\\prime", "中", "é", "\\>", "\\~", "---", "\\ "]
formula = st.lists(st.sampled_from(PIECES), min_size=1, max_size=12).map("".join)


def _agree(lines: list[str]) -> None:
    theirs = ref.tokenizer(lines)
    ours = [normalize_line(x) or "" for x in lines]
    wrong = [(x, o, t) for x, o, t in zip(lines, ours, theirs, strict=True) if o != t]
    assert not wrong, wrong[:3]


def test_hand_picked_formulas_tokenize_as_upstream():
    _agree(HAND)
    # the set is not all failures: most parse, some fail as upstream fails
    ours = [normalize_line(x) for x in HAND]
    assert sum(o is None for o in ours) >= 8 and sum(o is not None for o in ours) >= 30


@settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(formula, min_size=40, max_size=40))
def test_generated_formulas_tokenize_as_upstream(lines):
    _agree(lines)
