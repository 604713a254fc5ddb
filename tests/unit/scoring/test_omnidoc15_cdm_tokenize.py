"""quantgate's port of CDM's tokenizer (quantgate/scoring/omnidoc/cdm_tokenize.py) on the 26 demo formulas, truth and
prediction: with the steps around it (cdm_latex.before_tokenizer / after_tokenizer) it gives what upstream's
tokenize_latex returned for each (recorded by lab/2026-12-05-cdm). The live comparison with upstream's node script
on generated formulas is tests/integration/test_omnidoc15_cdm_tokenize.py."""

from quantgate.scoring.omnidoc import cdm_latex as cl
from quantgate.scoring.omnidoc import cdm_tokenize as ct
from tests.support import upstream_cdm as ref


def _ours(raw: str) -> str:
    return cl.after_tokenizer(ct.tokenize(cl.before_tokenizer(raw)), raw)


def test_the_demo_formulas_tokenize_as_upstreams():
    got = [(f["cdm_id"], side, _ours(f[side]) == f[f"{side}_tokenized"]) for f in ref.recorded()["formulas"]
           for side in ("gt", "pred")]
    assert len(got) == 26 and all(ok for *_, ok in got), [g for g in got if not g[2]]


def test_the_rules_that_shape_tokens():
    assert ct.normalize_line("x_i^2") == "x _  { i } ^  { 2 } "
    assert ct.normalize_line("a \\over b") == "\\frac { a } { b } "
    assert ct.normalize_line("\\sin x") == "\\operatorname { s i n } x "
    assert ct.normalize_line("\\mathrm{d\\alpha} \\mathrm{\\cdot}") == "\\mathrm { d \\ a l p h a } \\mathrm { \\cdot } "
    assert ct.normalize_line("\\foo{x}") == "\\foo { x } "  # an unknown command is a symbol
    # a function too weak to be an argument leaves the previous argument in its place
    assert ct.normalize_line("\\frac{a}\\frac") == "\\frac { a } { a } "
    # what fails upstream fails here: colour, an unknown environment, \left without \right
    assert ct.normalize_line("\\color{red}{x}") is None
    assert ct.normalize_line("\\begin{equation} x \\end{equation}") is None
    assert ct.normalize_line("\\left( x") is None
    # and then CDM renders the formula as written
    assert _ours("\\color{red}{x}") == "\\color{red}{x}"
