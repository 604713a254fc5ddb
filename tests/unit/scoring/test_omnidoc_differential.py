"""Differential property tests: quantgate's OmniDocBench pieces and upstream's code at 24e6428 (imported
from ../shared/reference/omnidocbench by tests/support/upstream_omnidoc.py) agree on generated input —
block splitting, the text / formula / table normalisations, quick_match's pairs and TEDS. The generators
stay inside what quantgate means to reproduce; the documented differences (docs/metrics.md: nested or
unclosed tables, LaTeX tables, pipes inside prose) are not generated."""

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from quantgate.scoring.omnidoc.extract import split_blocks
from quantgate.scoring.omnidoc.match import quick_match
from quantgate.scoring.omnidoc.normalize import formula_key, table_html, text_key
from quantgate.scoring.omnidoc.teds import teds
from tests.support import upstream_omnidoc as ref

pytestmark = pytest.mark.skipif(ref.code_missing_reason() is not None, reason=ref.code_missing_reason() or "")
SETTINGS = settings(max_examples=100, deadline=None, suppress_health_check=list(HealthCheck))

WORDS = ["alpha", "beta", "gamma", "delta", "季节", "天气", "x", "42", "3.5", "10:30", "---", "é", "a_b", "**bold**"]
MATH = ["x^2", "a_{i}", "\\frac{1}{2}", "\\alpha+\\beta", "\\mathbf{v}", "\\text{if } x", "1+1", "\\sum_{i} x_i",
        "\\tag{3}", "\\begin{aligned}a&=b\\end{aligned}", "\\quad y", "\\_", "\\\\"]
words = st.lists(st.sampled_from(WORDS), min_size=1, max_size=6).map(" ".join)
math = st.lists(st.sampled_from(MATH), min_size=1, max_size=3).map(" ".join)


@st.composite
def prose(draw):
    parts = draw(st.lists(st.one_of(words, math.map(lambda m: f"${m}$"), math.map(lambda m: f"\\({m}\\)")),
                          min_size=1, max_size=4))
    return " ".join(parts)


@st.composite
def html_table(draw):
    rows = draw(st.integers(1, 4))
    head = draw(st.booleans())
    out = ['<table style="x">' if draw(st.booleans()) else "<table>"]
    for r in range(rows):
        tag = "th" if head and r == 0 else "td"
        cells = []
        for _ in range(draw(st.integers(1, 3))):
            span = draw(st.sampled_from(["", "", ' colspan="2"', ' rowspan="2"']))
            text = draw(st.sampled_from(["a", "b c", "<b>x</b>", "&amp;", "<sup>1</sup>", "", "1:2", "天"]))
            cells.append(f"<{tag}{span}>{text}</{tag}>")
        out.append("<tr>" + "".join(cells) + "</tr>")
    out.append("</table>")
    return draw(st.sampled_from(["", "\n"])).join(out)


@st.composite
def pipe_table(draw):
    width = draw(st.integers(1, 4))
    cell = st.sampled_from(["a", "b c", "", "1:2", "---", "x", "天气"])
    rows = [[draw(cell) for _ in range(width)] for _ in range(draw(st.integers(1, 4)))]
    lines = ["| " + " | ".join(rows[0]) + " |"]
    if draw(st.booleans()):
        lines.append("|" + "|".join(draw(st.sampled_from(["---", ":-:", "--:"])) for _ in range(width)) + "|")
    lines += ["| " + " | ".join(r) + " |" for r in rows[1:]]
    return "\n".join(lines)


fragment = st.one_of(
    prose(), words.map(lambda w: "# " + w), math.map(lambda m: f"$$\n{m}\n$$"), math.map(lambda m: f"\\[ {m} \\]"),
    html_table(), pipe_table(), st.just("![figure](img.png)"), st.just("---"), st.just("........................"),
)


@st.composite
def page(draw):
    parts = draw(st.lists(fragment, min_size=1, max_size=7))
    seps = [draw(st.sampled_from(["\n\n", "\n\n", "\n"])) for _ in parts]
    text = "".join(p + s for p, s in zip(parts, seps, strict=True))
    return f"```markdown\n{text}```" if draw(st.booleans()) else text


def _upstream_blocks(md):
    u = ref.load()
    found = u.extract.md_tex_filter(md)
    norm = u.preprocess.normalized_html_table
    return {"text": [b["content"] for b in found.get("text_all", [])],
            "formula": [b["content"] for b in found.get("equation_isolated", [])],
            "html_table": [norm(b["content"]) for b in found.get("html_table", [])]}


@SETTINGS
@given(page())
def test_block_splitting_matches_upstream(md):
    ours = split_blocks(md)
    got = {"text": [b.content for b in ours if b.kind == "text"],
           "formula": [b.content for b in ours if b.kind == "formula"],
           "html_table": [table_html(b.content) for b in ours if b.kind == "html_table"]}
    expected = _upstream_blocks(md)
    if any(b.kind == "html_table" and "|" in md for b in ours):
        # After converting pipe tables upstream orders what it finds next by offsets in the converted text
        # (docs/metrics.md): formula and table candidates may come in another order; they are the same.
        for kind in ("formula", "html_table"):
            got[kind], expected[kind] = sorted(got[kind]), sorted(expected[kind])
    assert got == expected


@SETTINGS
@given(prose())
def test_text_key_matches_upstream(text):
    u = ref.load().preprocess
    assert text_key(text) == u.clean_string(u.textblock2unicode(text))


@SETTINGS
@given(math, st.sampled_from(["{}", "\\[{}\\]", "\\[ {} \\]. ", "{}."]))
def test_formula_key_matches_upstream(body, wrap):
    latex = wrap.format(body)
    assert formula_key(latex) == ref.load().preprocess.normalized_formula(latex)


@SETTINGS
@given(html_table(), st.sampled_from(["", "<p>caption</p>", '<math alttext="x^2">x</math>', "<span>s</span>"]))
def test_table_normalisation_matches_upstream(table, extra):
    html = table.replace("</table>", f"<tr><td>{extra}</td></tr></table>") if extra else table
    assert table_html(html) == ref.load().preprocess.normalized_html_table(html)


@SETTINGS
@given(html_table(), html_table(), st.booleans())
def test_teds_matches_upstream(a, b, structure_only):
    pa, pb = table_html(a), table_html(b)
    expected = ref.load().table_metric.TEDS(structure_only=structure_only).evaluate(pa, pb)
    assert teds(pa, pb, structure_only) == pytest.approx(expected, abs=1e-12)


TOKENS = ["alpha", "beta", "gamma", "delta", "eps", "zeta", "eta", "theta"]


@st.composite
def truth_and_prediction(draw):
    """Truth blocks, and a prediction made from them: blocks kept, split in two or three, mangled, merged
    with the next, dropped, or replaced, plus stray blocks, in a lightly shuffled order."""
    truth = [" ".join(draw(st.lists(st.sampled_from(TOKENS), min_size=1, max_size=8)))
             for _ in range(draw(st.integers(0, 6)))]
    pred: list[str] = []
    for t in truth:
        how = draw(st.sampled_from(["keep", "keep", "split", "mangle", "merge", "drop", "other"]))
        ws = t.split()
        if how == "keep":
            pred.append(t)
        elif how == "split" and len(ws) > 1:
            cut = sorted(draw(st.sets(st.integers(1, len(ws) - 1), min_size=1, max_size=2)))
            pred += [" ".join(ws[a:b]) for a, b in zip([0, *cut], [*cut, len(ws)], strict=True)]
        elif how == "mangle":
            pred.append(" ".join(draw(st.permutations(ws))[: max(1, len(ws) - 1)]))
        elif how == "merge" and pred:
            pred[-1] += " " + t
        elif how == "other":
            pred.append(" ".join(draw(st.lists(st.sampled_from(TOKENS), min_size=1, max_size=4))))
    pred += [draw(st.sampled_from(TOKENS)) for _ in range(draw(st.integers(0, 2)))]
    if len(pred) > 1 and draw(st.booleans()):
        i = draw(st.integers(0, len(pred) - 2))
        pred[i], pred[i + 1] = pred[i + 1], pred[i]
    return truth, pred


def _upstream_pairs(truth, pred):
    u = ref.load().match_quick
    gt_items = [{"category_type": "text_block", "text": t, "order": k + 1} for k, t in enumerate(truth)]
    pred_items = [{"category_type": "text_all", "content": p, "position": [k]} for k, p in enumerate(pred)]
    out = []
    for e in u.match_gt2pred_quick(gt_items, pred_items, "text", "page.jpg"):
        gi = () if e["gt_idx"] == [""] else tuple(e["gt_idx"])
        pj = () if e["pred_idx"] == [""] else tuple(int(j) for j in e["pred_idx"])
        # predictions left without truth come as one entry in set order; only their lengths count
        out.append((gi, tuple(sorted(pj)) if not gi else pj))
    return out


@settings(max_examples=250, deadline=None, suppress_health_check=list(HealthCheck))
@given(truth_and_prediction())
# found by this test (2026-12-02): four leftover predictions tie for one leftover truth block; upstream walks them
# as the set {4, 5, 7, 8}, which CPython iterates 8 first, and takes 8
@example((["alpha alpha", "alpha alpha alpha alpha", "alpha alpha", "alpha alpha", "alpha alpha"],
          ["alpha alpha", "alpha", "alpha", "alpha alpha", "alpha", "alpha", "alpha alpha", "alpha", "alpha"]))
def test_quick_match_pairs_match_upstream(case):
    truth, pred = case
    assert quick_match([text_key(t) for t in truth], [text_key(p) for p in pred]) == _upstream_pairs(truth, pred)
