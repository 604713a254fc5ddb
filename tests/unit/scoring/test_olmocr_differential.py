"""Differential property test: quantgate's olmOCR checks and upstream's code (../shared/reference/
olmocr-bench) give the same verdict — pass, fail, or refusing the check — on generated pages: markdown
and HTML tables (header rows and columns, rowspan/colspan including invalid spans, empty cells, ragged
rows), text with emphasis markers, accented letters composed (NFC) and decomposed (NFD), ligatures,
footnote markers and headings, and checks whose max_diffs sit at the edges of their thresholds."""

import functools
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from quantgate.errors import InputError
from quantgate.scoring.olmocr_checks import normalize_text, run_check
from tests.support import upstream_olmocr

pytestmark = pytest.mark.skipif(upstream_olmocr.reference_missing_reason() is not None,
                                reason=upstream_olmocr.reference_missing_reason() or "")
SETTINGS = settings(max_examples=120, deadline=None, suppress_health_check=list(HealthCheck))


@functools.cache
def upstream():
    return upstream_olmocr.load(Path(tempfile.mkdtemp(prefix="olmocr-diff-")))


WORDS = ["alpha", "Beta", "gamma", "42", "3.5", "café", "cafe\u0301", "naïve", "nai\u0308ve", "Ångström",
         "A\u030angstro\u0308m", "µm", "μm", "x²", "–", "—", "’s", "“q”", "ﬁne", "fine", "Total", "Q1", ""]
MARKS = ["**", "*", "_", "__", "<b>", "</b>", "<i>", "</i>", "<br>", "<br/>", "\n", "\n\n", " ", "  ", "\t", "#",
         "## ", "<sup>1</sup>", "[^1]", "[^1]:", "¹", "<strong>", "</strong>", "<em>", "</em>", "<h2>", "</h2>", "|"]
text = st.lists(st.sampled_from(WORDS + MARKS), max_size=14).map("".join)
cell_text = st.lists(st.sampled_from(WORDS + ["**", "*", "_", "<br>", " "]), max_size=3).map(" ".join)
span = st.sampled_from([None, None, None, "1", "2", "3", "0", "x", "-1", ""])


@st.composite
def md_table(draw):
    width = draw(st.integers(1, 4))
    rows = [[draw(cell_text) for _ in range(draw(st.integers(max(1, width - 1), width + 1)))]
            for _ in range(draw(st.integers(1, 5)))]
    lead, trail = draw(st.booleans()), draw(st.booleans())

    def line(r):
        return ("| " if lead else "") + " | ".join(r) + (" |" if trail else "")

    lines = [line(rows[0])]
    if draw(st.booleans()):
        lines.append(line([draw(st.sampled_from(["---", ":--", ":-:", "--:"])) for _ in rows[0]]))
    lines += [line(r) for r in rows[1:]]
    return "\n".join(lines), [c for r in rows for c in r]


@st.composite
def html_table(draw):
    n_rows = draw(st.integers(1, 5))
    head = draw(st.integers(0, min(2, n_rows)))
    out, cells = ["<table>"], []
    for r in range(n_rows):
        if head and r == 0:
            out.append("<thead>")
        out.append("<tr>")
        for _ in range(draw(st.integers(0, 4))):
            tag = draw(st.sampled_from(["td", "td", "th"]))
            rs, cs = draw(span), draw(span)
            attrs = (f' rowspan="{rs}"' if rs is not None else "") + (f" colspan={cs}" if cs else "")
            t = draw(cell_text)
            cells.append(t)
            out.append(f"<{tag}{attrs}>{t}</{tag}>")
        out.append("</tr>")
        if head and r == head - 1:
            out.append("</thead>")
    out.append("</table>")
    return "".join(out), cells


def edges(s: str):
    n = len(normalize_text(s) or "")
    return st.sampled_from(sorted({0, 1, 2, max(0, n // 2), n // 2 + 1, n, n + 1}))


def agree(check: dict, content: str):
    check = {"pdf": "p.pdf", "page": 1, "id": "gen", **check}
    try:
        ours = run_check(check, content)
    except InputError:
        ours = "refused"
    ref = upstream()
    try:
        test = ref.load_single_test(dict(check))
    except (ref.ValidationError, TypeError):
        theirs = "refused"
    else:
        try:
            theirs = test.run(content)[0]
        except Exception:  # upstream's benchmark.py scores a check that raises as failed
            theirs = False
    assert ours == theirs, (check, content)


@SETTINGS
@given(st.lists(st.one_of(md_table(), html_table()), min_size=1, max_size=2), text, st.data())
def test_table_checks_agree(tables, prose, data):
    content = prose + "\n\n" + "\n\n".join(t for t, _ in tables) + "\n\n" + prose[: len(prose) // 2]
    cells = [c for _, cs in tables for c in cs] or [""]
    pick = st.one_of(st.sampled_from(cells), cell_text)
    cell = data.draw(pick)
    check = {"type": "table", "cell": cell, "max_diffs": data.draw(edges(cell)),
             "ignore_markdown_tables": data.draw(st.booleans())}
    for k in ("up", "down", "left", "right", "top_heading", "left_heading"):
        v = data.draw(st.one_of(st.just(""), st.just(""), pick))
        if v or data.draw(st.booleans()):
            check[k] = v
    agree(check, content)


@st.composite
def piece(draw, content: str, longest: int = 30):
    """A piece of the page (often with its accents recomposed or decomposed), or unrelated text."""
    if content and draw(st.integers(0, 3)):
        i = draw(st.integers(0, len(content) - 1))
        s = content[i:i + draw(st.integers(1, longest))]
        form = draw(st.sampled_from([None, "NFC", "NFD"]))
        if form:
            import unicodedata

            s = unicodedata.normalize(form, s)
        return s
    return draw(text.filter(bool))[:longest]


@SETTINGS
@given(text, st.data())
def test_presence_checks_agree(content, data):
    t = data.draw(piece(content))
    check = {"type": data.draw(st.sampled_from(["present", "absent"])), "text": t, "max_diffs": data.draw(edges(t)),
             "case_sensitive": data.draw(st.booleans())}
    for k in ("first_n", "last_n"):
        if data.draw(st.booleans()):
            check[k] = data.draw(st.integers(0, len(content) + 2))
    agree(check, content)


@SETTINGS
@given(text, st.data())
def test_order_checks_agree(content, data):
    # fuzzysearch's time grows fast with max_l_dist, and max_diffs may reach half the text: short texts
    before, after = data.draw(piece(content, 14)), data.draw(piece(content, 14))
    limit = min(len(normalize_text(before)), len(normalize_text(after))) // 2  # upstream refuses more than this
    agree({"type": "order", "before": before, "after": after,
           "max_diffs": data.draw(st.sampled_from([0, 0, 1, max(0, limit - 1), limit, limit, limit + 1]))}, content)


FORMS = {"heading": [("# ", "\n"), ("### ", ""), ("<h2>", "</h2>"), ("<H1 id=x>", "</H1>")],
         "bold": [("**", "**"), ("__", "__"), ("<b>", "</b>"), ("<strong>", "</strong>")],
         "italic": [("*", "*"), ("_", "_"), ("<i>", "</i>"), ("<em>", "</em>")]}


@SETTINGS
@given(text, text, st.data())
def test_format_checks_agree(before, after, data):
    fmt = data.draw(st.sampled_from(sorted(FORMS)))
    form = data.draw(st.sampled_from(sum(FORMS.values(), [])))  # often the wrong format, or half-open
    inner = data.draw(text)
    content = before + form[0] + inner + data.draw(st.sampled_from([form[1], ""])) + after
    t = data.draw(st.one_of(piece(inner), piece(content)))
    agree({"type": "format", "format": fmt, "text": t, "max_diffs": data.draw(edges(t)),
           "case_sensitive": data.draw(st.booleans())}, content)


@SETTINGS
@given(text, text, st.data())
def test_footnote_checks_agree(before, after, data):
    marker = data.draw(st.sampled_from(["1", "12", "a", "¹"]))
    ref = data.draw(st.sampled_from([f"[^{marker}]", f"[^{marker}]:", f"<sup>{marker}</sup>", "<SUP class=f>1</SUP>",
                                     "¹²", "¹", marker]))
    content = before + ref + after + data.draw(st.sampled_from(["", f"\n\n[^{marker}]: " + after]))
    check = {"type": "footnote", "marker": marker}
    for k, side in (("appears_before_marker", before), ("appears_after_marker", after)):
        if data.draw(st.booleans()):
            check[k] = data.draw(st.one_of(piece(side[-25:]) if k == "appears_before_marker" else piece(side[:25]),
                                           piece(content)))
    check["max_diffs"] = data.draw(edges(check.get("appears_before_marker") or check.get("appears_after_marker") or ""))
    agree(check, content)


@SETTINGS
@given(text, st.data())
def test_baseline_checks_agree(content, data):
    content += data.draw(st.sampled_from(["", "ab" * 4, "x" * 6, " la la la la", "日本", "😀", "![alt text](a.png)"]))
    n = sum(ch.isalnum() for ch in content)
    check = {"type": "baseline", "check_disallowed_characters": data.draw(st.booleans())}
    if data.draw(st.booleans()):
        check["max_length"] = data.draw(st.sampled_from([max(0, n - 8), max(0, n - 1), n, n + 1]))
        check["max_length_skips_image_alt_tags"] = data.draw(st.booleans())
    else:
        check["max_repeats"] = data.draw(st.integers(0, 6))
    agree(check, content)


@SETTINGS
@given(text)
def test_normalize_text_is_upstreams(s):
    assert normalize_text(s) == upstream().normalize_text(s)
