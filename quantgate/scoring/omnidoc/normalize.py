"""The normalisations OmniDocBench's end-to-end protocol applies before comparing (behaviour of upstream's
utils/data_preprocess.py at 24e6428, re-implemented): of a whole predicted page, of a text block, of a
formula, and of a table's HTML."""

from __future__ import annotations

import html as html_entities
import re
import unicodedata
from functools import lru_cache

# --- the whole predicted page, before it is split into blocks ------------------------------------

_IMAGE = re.compile(r"!\[.*?\]\(.*?\)")
_FENCE_OPEN = re.compile(r"^```markdown\n?", re.M)
# Any ``` ending a line goes, not only the outer fence: that is what upstream does, and it is why
# fenced code is seldom seen as a code block there.
_FENCE_CLOSE = re.compile(r"```\n?$", re.M)
_RUNS = (
    (re.compile(r"_{4,}"), "____"),
    (re.compile(r" {4,}"), "    "),
    (re.compile(r"([^a-zA-Z0-9])\1{10,}"), r"\1\1\1\1"),  # ten or more of one symbol: four
)


def prepare_page(markdown: str) -> str:
    """Images dropped, a ```markdown fence unwrapped, long runs of one symbol shortened."""
    text = _IMAGE.sub("", markdown)
    text = _FENCE_CLOSE.sub("", _FENCE_OPEN.sub("", text))
    for pattern, repl in _RUNS:
        text = pattern.sub(repl, text)
    return text


# --- text blocks -----------------------------------------------------------------------------------

INLINE_MATH = re.compile(r"\$(.*?)\$|\\\((.*?)\\\)")
_ESCAPE = re.compile(r"\\[\\_&%^]")  # an escaped character goes with its backslash
_WRITTEN_ESCAPES = ("\\t", "\\n", "\t", "\n", "/t", "/n")
_NOT_WORD = re.compile(r"[^\w\u4e00-\u9fff]")


@lru_cache(maxsize=1)
def _latex_to_text():
    from pylatexenc.latex2text import LatexNodes2Text

    return LatexNodes2Text()


def _inline_math_as_unicode(text: str) -> str:
    """Inline math that uses \\, ^ or _ becomes its Unicode reading (pylatexenc), so ``$x^2$`` and
    ``x²``-like text compare by content; other inline math is left as written."""
    out, last = [], 0
    for m in INLINE_MATH.finditer(text):
        body = _ESCAPE.sub("", m.group(1) if m.group(1) is not None else m.group(2))
        if not any(c in body for c in "\\^_"):
            continue
        if body.endswith("\\"):
            body += " "
        try:
            reading = _latex_to_text().latex_to_text(body)
        except Exception:  # noqa: BLE001 -- upstream keeps the math as written when pylatexenc fails
            continue
        out += [text[last:m.start()], reading.strip()]
        last = m.end()
    return "".join(out) + text[last:]


def text_key(text: str) -> str:
    """What a text block is compared by: its letters, digits and CJK characters only (spaces and
    punctuation dropped), inline math read as Unicode."""
    text = _inline_math_as_unicode(text)
    for s in _WRITTEN_ESCAPES:
        text = text.replace(s, "")
    return _NOT_WORD.sub("", text)


# --- display formulas --------------------------------------------------------------------------------

_BRACKETED = re.compile(r"\\\[(.+?)(?<!\\)\\\]")
_FORMULA_DROPPED = [re.compile(p) for p in
                    (r"\\tag\{.*?\}", r"\\hspace\{.*?\}", r"\\begin\{.*?\}", r"\\end\{.*?\}", r"\\arraycolsep.*?\}")]
# Removed as plain substrings, in this order (so \mathbf goes before \mathbfcal is looked for, as upstream).
_FORMULA_WORDS = (
    "\\mathbf", "\\mathrm", "\\mathnormal", "\\mathit", "\\mathbb", "\\mathcal", "\\mathscr", "\\mathfrak",
    "\\mathsf", "\\mathtt", "\\textbf", "\\text", "\\boldmath", "\\boldsymbol", "\\operatorname", "\\bm",
    "\\symbfit", "\\mathbfcal", "\\symbf", "\\scriptscriptstyle", "\\notag", "\\setlength", "\\coloneqq",
    "\\space", "\\thickspace", "\\thinspace", "\\medspace", "\\nobreakspace", "\\negmedspace", "\\quad",
    "\\qquad", "\\enspace", "\\substackw", " ",
)


def formula_key(latex: str) -> str:
    """What a display formula is compared by: the body of its first \\[...\\], without tags, spacing,
    environments and font commands, lower-cased, no spaces."""
    m = _BRACKETED.search(latex)
    text = m.group(1).strip() if m else latex
    for pattern in _FORMULA_DROPPED:
        text = pattern.sub("", text)
    text = text.strip(".")
    for word in _FORMULA_WORDS:
        text = text.replace(word, "")
    return text.lower()


# --- tables ----------------------------------------------------------------------------------------

_TABLE_BODY = re.compile(r"<table\b[^>]*>(.*)</table>", re.S | re.I)
_PRESENTATION_ATTRS = [re.compile(f'( {a}=".*?")') for a in ("style", "height", "width", "align", "class")]
_TBODY = re.compile(r"</?tbody>")
_SPACES = re.compile(r"\s+")
_INLINE_TAGS = ("<sup>", "</sup>", "<sub>", "</sub>", "<span>", "</span>", "<div>", "</div>", "<p>", "</p>",
                '<spandata-span-identity="">')
_COLGROUP = re.compile(r"<colgroup>.*?</colgroup>")
TABLE_OPEN = '<html><body><table border="1" >'
TABLE_CLOSE = "</table></body></html>"


def table_html(html: str) -> str:
    """A table's HTML as TEDS and the table edit distance see it: header cells as cells, MathML as its
    alt text in $...$, presentation attributes and inline formatting tags dropped, entities decoded,
    whitespace folded, wrapped in one ``<table>``. '' for text with no ``<table``."""
    from bs4 import BeautifulSoup

    if "<table" not in html.replace(" ", "").replace("'", '"'):
        return ""
    soup = BeautifulSoup(html, "html.parser")
    for th in soup.find_all("th"):
        th.name = "td"
    for tag in soup.find_all("thead"):
        tag.unwrap()
    for math in soup.find_all("math"):
        math.replace_with(f"${math.get('alttext', '')}$")
    for tag in soup.find_all("span"):
        tag.unwrap()
    text = unicodedata.normalize("NFKC", html_entities.unescape(str(soup)).replace("\n", "")).strip()
    body = "".join(_TABLE_BODY.findall(text))
    for pattern in _PRESENTATION_ATTRS:
        body = pattern.sub("", body)
    body = _SPACES.sub(" ", _TBODY.sub("", body))
    text = TABLE_OPEN + body + TABLE_CLOSE
    for tag in _INLINE_TAGS:
        text = text.replace(tag, "")
    return _COLGROUP.sub("", text)
