"""quantgate's CDM LaTeX side (quantgate/scoring/omnidoc/cdm_latex.py) against upstream's latex_processor, imported
live from ../shared/reference: on the 26 tokenized demo formulas (truth and prediction, recorded by
lab/2026-12-05-cdm) and on generated token sequences — the normalisation, the colouring, and failing where upstream
fails."""

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from quantgate.scoring.omnidoc import cdm_latex as cl
from tests.support import upstream_cdm as ref

pytestmark = pytest.mark.skipif(ref.missing_reason() is not None, reason=ref.missing_reason() or "")
SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))

# every class of command upstream treats apart, the brackets they take, and plain tokens
VOCAB = ["x", "y", "2", "=", "+", "{", "}", "{", "}", "[", "]", "^", "_", "(", ")", "&", "\\\\", "\\frac", "\\binom",
         "\\sqrt", "\\xrightarrow", "\\hat", "\\underbrace", "\\overline", "\\mathrm", "\\text", "\\mathbf",
         "\\operatorname", "*", "\\overset", "\\phantom", "\\left(", "\\right)", "\\left", "\\big", "\\Bigl", "\\|",
         "\\not", "<", "\\sin", "\\log", "\\dots", "\\cdots", "\\hspace", "1", "cm", "\\multicolumn", "\\hline",
         "\\color", "red", "\\quad", "\\,", "\\begin{array}", "\\end{array}", "l", "r", "c", "\\alpha", "\\'", "e",
         "\\footnote", "\\lefteqn", "\\pmatrix", "\\matrix", ""]
tokens = st.lists(st.sampled_from(VOCAB), min_size=1, max_size=14).map(" ".join)


def _theirs_colour(normalized: str):
    lp = ref.latex_processor()
    seq, idx, toks = normalized.strip().split(" "), 0, []
    while idx < len(seq):
        seq, idx, toks = lp.token_add_color_RGB(seq, idx, toks)
    return " ".join(seq), toks


def _outcome(fn, *args):
    try:
        return fn(*args)
    except (ValueError, IndexError, UnboundLocalError, RecursionError):  # upstream's kinds of failure, any of them
        return "fails"


def test_the_demo_formulas_normalise_and_colour_as_upstreams():
    lp = ref.latex_processor()
    formulas = ref.recorded()["formulas"]
    for f in formulas:
        for side in ("gt", "pred"):
            ready = cl.after_tokenizer(f[f"{side}_tokenized"], f[side])
            normalized = cl.normalize(ready)
            assert normalized == lp.normalize_latex(ready), (f["cdm_id"], side)
            assert cl.colour(normalized) == _theirs_colour(normalized), (f["cdm_id"], side)
    # the boxes upstream found are for coloured tokens: each side's box tokens are ours, in our order
    for f in formulas:
        _, ours = cl.colour(cl.normalize(cl.after_tokenizer(f["gt_tokenized"], f["gt"])))
        found = iter(ours)
        assert all(any(b["token"] == t for t in found) for b in f["gt_boxes"]), f["cdm_id"]


@SETTINGS
@given(tokens)
def test_normalisation_matches_upstream(text):
    assert _outcome(cl.normalize, text) == _outcome(ref.latex_processor().normalize_latex, text)


@SETTINGS
@given(tokens)
def test_colouring_matches_upstream_or_fails_where_it_fails(text):
    normalized = _outcome(ref.latex_processor().normalize_latex, text)
    if normalized == "fails":
        return
    try:
        cl.colour(normalized)
    except cl.NeverEnds:
        return  # upstream would never return: see test_a_walk_upstream_never_ends_fails_here
    except (ValueError, IndexError, RecursionError):
        pass
    assert _outcome(cl.colour, normalized) == _outcome(_theirs_colour, normalized)


def test_a_walk_upstream_never_ends_fails_here():
    # \multicolumn's three arguments are found by brace matching; with no '}' after it the walk goes back to 0
    with pytest.raises(cl.NeverEnds):
        cl.colour("x \\multicolumn y")


def test_the_colours_are_upstreams_grid_without_black():
    got = cl.colours()
    assert len(got) == 5800 and got[0] == (0, 0, 15) and got[17] == (0, 15, 0) and (0, 0, 0) not in got
    assert len(set(got)) == len(got)


def test_the_document_places_one_colour_per_token_and_sizes_the_paper():
    doc, toks = cl.document("\\frac { a } { b } + x _ { 2 }", "Noto Sans CJK SC")
    assert toks == ["\\frac", "a", "b", "+", "x", "2"]
    assert "\\mathcolor[RGB]{0,0,15}{\\frac" in doc and "{\\mathcolor[RGB]{0,1" not in doc
    assert "\\geometry{a5paper" in doc and "\\setCJKmainfont{Noto Sans CJK SC}" in doc and "<color_" not in doc
    long_doc, long_toks = cl.document(" ".join(["x"] * 700), "F")
    assert len(long_toks) == 700 and "\\geometry{a4paper" in long_doc


def test_before_and_after_the_tokenizer():
    assert cl.before_tokenizer("\\begin{align*}a&=1\\\\\nb\\end{align*} 5\\%") == \
        "\\begin{aligned}a&=1\\\\ b\\end{aligned} 5<PERCENTAGETOKEN>"
    assert cl.before_tokenizer("\\begin{smallmatrix}1\\end{smallmatrix}") == "\\begin{matrix}1\\end{matrix}"
    assert cl.after_tokenizer("\\operatorname { s i n } x  < P E R C E N T A G E T O K E N >", "") == "\\sin x \\%"
    assert cl.after_tokenizer("\\operatorname* { l i m } x", "") == "\\operatorname* { l i m } x"
    # the tokenizer gave nothing: the formula as it came, on one line
    assert cl.after_tokenizer("\n", "a\n+ 5\\%") == "a + 5<PERCENTAGETOKEN>"
