"""ParseBench's text preparation for its content rules: how an output (and a rule's expected words and sentences)
is normalized before counting. Written by hand because no package implements ParseBench's normalization (its
own package needs Python >= 3.12 and pulls its inference stack); each step follows upstream's
``evaluation/metrics/parse/utils.normalize_text`` and ``rules_base`` helpers, checked against them in
tests/unit/scoring/test_parsebench_*.py. Markdown tables are read with quantgate's own reader
(``scoring.tablegraph``); HTML tables are laid out here as upstream lays them out for its text rules."""

from __future__ import annotations

import html
import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass

from quantgate.scoring.tablegraph import markdown_tables

# An HTML table is laid out cell by cell over the slots its spans cover, as upstream lays it out; a model's output
# can ask for rowspan="100000" colspan="100000". Past this many slots (a 500 × 500 table; ParseBench's largest truth
# tables are a few thousand cells) a table is not laid out: each reader says what it does instead.
MAX_GRID_CELLS = 250_000


class TableTooLarge(ValueError):
    """A table whose spans would fill, or whose grid would span, more slots than ``MAX_GRID_CELLS``."""

# Unicode punctuation that upstream folds to ASCII before anything else.
_QUOTE_FOLD = str.maketrans({
    **{c: "'" for c in "\u2018\u2019\u201a\u201b`\u00b4\u02bc\u02b9\uff07\u2032\u2035\u02bb\u02ca\u02cb"},
    **{c: '"' for c in "\u201c\u201d\u201e\u201f\u301d\u301e\uff02\u2033\u2036\u02ee"},
    "\uff0c": ",", "\uff0e": ".", "\uff1a": ":", "\uff1b": ";", "\uff01": "!", "\uff1f": "?",
    "\uff08": "(", "\uff09": ")", "\u3001": ",", "\u3002": ".",
})
# After accents are dropped: dashes, ellipsis, micro sign, and the bullet / circled-x symbol classes.
_SYMBOL_FOLD = str.maketrans({
    "\uff3f": "_", "\u2013": "-", "\u2014": "-", "\u2011": "-", "\u2012": "-", "\u2212": "-",
    "\u2026": "...", "\n": " ", "\u00b5": "\u03bc",
    **{c: "\u2022" for c in "\u25cf\u25cb\u25e6\u2219\u2981\u00b7"},
    **{c: "\u2297" for c in "\u2bbe\u24e7\u2a02"},
})
# Literal strings upstream deletes (or turns into a space), in its order.
_DROPPED = ("<ins>", "</ins>", "<u>", "</u>", "~~", "<mark>", "</mark>")
# Scripts whose combining marks carry meaning (dakuten, Indic vowel signs): kept when accents are dropped.
_MARK_KEEPING = (("\u3040", "\u30ff"), ("\u4e00", "\u9fff"), ("\u3400", "\u4dbf"), ("\uf900", "\ufaff"),
                 ("\uac00", "\ud7af"), ("\u1100", "\u11ff"), ("\u0b80", "\u0bff"), ("\u0c80", "\u0cff"))

AUTOLINK = re.compile(r"<((?:https?://|mailto:)[^>\s]+|[^>@\s]+@[^>@\s]+\.[^>@\s]+)>", re.IGNORECASE)
HTML_TAG = re.compile(r"</?[^>]+>")
LEADING_MARKDOWN = re.compile(r"^(?:\s*(?:#{1,6}\s+|>\s+|[*+-]\s+|\d+[.)]\s+))+")
MULTI_DOT = re.compile(r"\.(?:\s*\.)+")
MARKDOWN_IMAGE = re.compile(r"!\[[^\]]*\]\([^)]*\)")

# (pattern, replacement) steps of the markdown/HTML strip, in upstream's order.
_EMPHASIS_STEPS = (
    (re.compile(r"\*\*(.*?)\*\*"), r"\1"), (re.compile(r"__(.*?)__"), r"\1"),
    (re.compile(r"</?b>"), ""), (re.compile(r"</?i>"), ""),
    (re.compile(r"\*(.*?)\*"), r"\1"), (re.compile(r"_(.*?)_"), r"\1"),
)
_TAIL_STEPS = (
    (re.compile(r"</?(?:s|del|strike)>", re.IGNORECASE), ""),
    (re.compile(r"</?span\b[^>]*>", re.IGNORECASE), ""),
    (re.compile(r"<sup[^>]*>.*?</sup>", re.IGNORECASE), ""),  # footnote markers go with their tags
    (re.compile(r"<sub[^>]*>.*?</sub>", re.IGNORECASE), ""),
    (re.compile(r"[\u00b9\u00b2\u00b3\u2070\u2074-\u2079]+"), ""),
    (re.compile(r"[\u2080-\u2089]+"), ""),
    (re.compile(r"-{2,}"), "-"),
    (re.compile(r"\.{2,}\s*$"), ""),  # trailing dot leaders
)


def _keeps_marks(ch: str) -> bool:
    return any(lo <= ch <= hi for lo, hi in _MARK_KEEPING)


def _drop_accents(text: str) -> str:
    kept: list[str] = []
    for ch in unicodedata.normalize("NFD", text):
        if unicodedata.category(ch) != "Mn" or (kept and _keeps_marks(kept[-1])):
            kept.append(ch)
    return unicodedata.normalize("NFC", "".join(kept))


def normalize(text: str | None) -> str:
    """Upstream's ``normalize_text``: lower-cased, accents dropped, emphasis and inline tags stripped."""
    if text is None:
        return ""
    text = AUTOLINK.sub(r"\1", text)
    text = re.sub(r"<br\s*/?>", " ", text)
    text = re.sub(r"\s+", " ", text.translate(_QUOTE_FOLD))
    for pattern, repl in _EMPHASIS_STEPS:
        text = pattern.sub(repl, text)
    text = _drop_accents(text.replace("_", " "))
    for literal in _DROPPED:
        text = text.replace(literal, "")
    text = text.replace("<br/>", " ").replace("<br />", " ").translate(_SYMBOL_FOLD).replace("$$", "")
    for pattern, repl in _TAIL_STEPS:
        text = pattern.sub(repl, text)
    return text.lower()


_LATEX_BLOCK = re.compile(r"\$\$(?:[^$]|\$[^$])+\$\$", re.DOTALL)
_LATEX_INLINE = re.compile(r"\$(?!\d)(?:[^$\\\n]|\\.)+\$")  # "$15.00" is money, not math
_LATEX_COMMAND = re.compile(r"\\(?:[a-zA-Z]+|[^a-zA-Z])")
_LATEX_KEPT = re.compile(r"[0-9a-zA-Z+\-*/=<>().,]")


def _formula_token(body: str) -> str:
    bare = _LATEX_COMMAND.sub(" ", body)
    for ch, repl in (("{", " "), ("}", " "), ("^", ""), ("_", "")):
        bare = bare.replace(ch, repl)
    return "".join(ch for ch in bare if _LATEX_KEPT.match(ch)) or "LATEX"


def replace_latex(text: str) -> str:
    """Each formula becomes a token of its digits, letters and operators, so formulas stay comparable."""
    text = _LATEX_BLOCK.sub(lambda m: f" {_formula_token(m.group(0)[2:-2])} ", text)
    return _LATEX_INLINE.sub(lambda m: _formula_token(m.group(0)[1:-1]), text)


_DIAGRAM_FENCE = re.compile(r"^`{3,}(?:mermaid|description)[^\S\n]*\n.*?^`{3,}[^\S\n]*$", re.MULTILINE | re.DOTALL)
_TABLE_BLOCK = re.compile(r"<table\b[^>]*>.*?</table>", re.IGNORECASE | re.DOTALL)
_TABLE_OPEN = re.compile(r"<table\b[^>]*>", re.IGNORECASE)


def strip_diagrams(text: str) -> str:
    """mermaid/description fences are generated syntax, never document words."""
    return _DIAGRAM_FENCE.sub(" ", text)


def strip_tables(text: str) -> str:
    """HTML tables removed (an unclosed one to the end): the unexpected/too-many rules judge prose only."""
    if "<table" not in text.lower():
        return text
    while True:
        text, n = _TABLE_BLOCK.subn(" ", text)
        if not n:
            break
    opened = _TABLE_OPEN.search(text)
    return text[:opened.start()] + " " if opened else text


_SUPERSCRIPT = str.maketrans("0123456789", "\u2070\u00b9\u00b2\u00b3\u2074\u2075\u2076\u2077\u2078\u2079")
_SUBSCRIPT = str.maketrans("0123456789", "".join(chr(0x2080 + d) for d in range(10)))


def flatten_cell(cell) -> None:
    """An HTML table cell as upstream's table readers take its text: a <br> as a space, <sup>/<sub> digits as
    their Unicode forms (in place, on the parsed cell)."""
    for br in cell.find_all("br"):
        br.replace_with(" ")
    for tag, digits in (("sup", _SUPERSCRIPT), ("sub", _SUBSCRIPT)):
        for el in cell.find_all(tag):
            el.replace_with(el.get_text().translate(digits))


def _int_or_one(raw: object) -> int:
    try:
        return int(str(raw))
    except ValueError:
        return 1


@dataclass(frozen=True)
class Placed:
    """A <th>/<td> cell where the grid walk put it: its top-left slot and the slots its spans cover."""
    row: int
    col: int
    down: int
    across: int
    text: str
    header: bool


def lay_out(table, span: Callable[[object], int]) -> tuple[dict[tuple[int, int], str], list[Placed]]:
    """Upstream's grid walk over one table's rows: each cell goes to the first slot of its row a span from above
    has not filled, and its text fills every slot its ``rowspan``/``colspan`` cover (a later cell overwrites);
    <sup>/<sub> digits as Unicode, <br> as a space. ``span`` reads a span attribute (the chart rules raise on one
    that is not a number, the text rules read it as 1). Raises :class:`TableTooLarge` before filling past the cap."""
    grid: dict[tuple[int, int], str] = {}
    placed: list[Placed] = []
    filled = 0
    for r, tr in enumerate(table.find_all("tr")):
        c = 0
        for cell in tr.find_all(["th", "td"]):
            while (r, c) in grid:
                c += 1
            flatten_cell(cell)
            text, down, across = cell.get_text().strip(), span(cell.get("rowspan", 1)), span(cell.get("colspan", 1))
            filled += max(down, 0) * max(across, 0)
            if filled > MAX_GRID_CELLS:
                raise TableTooLarge(f"its spans fill over {MAX_GRID_CELLS:,} grid slots")
            grid.update({(i, j): text for i in range(r, r + down) for j in range(c, c + across)})
            placed.append(Placed(r, c, down, across, text, cell.name == "th"))
            c += across
    return grid, placed


def grid_rows(grid: dict[tuple[int, int], str]) -> list[list[str]]:
    """The laid-out grid as rows ("" where nothing was placed); :class:`TableTooLarge` past the cap."""
    if not grid:
        return []
    height, width = max(i for i, _ in grid) + 1, max(j for _, j in grid) + 1
    if height * width > MAX_GRID_CELLS:
        raise TableTooLarge(f"a {height} × {width} grid is over {MAX_GRID_CELLS:,} slots")
    return [[grid.get((i, j), "") for j in range(width)] for i in range(height)]


def top_level_tables(text: str) -> list:
    """The HTML tables not inside another, each nested table replaced by its text (as upstream reads them)."""
    from bs4 import BeautifulSoup

    tables = BeautifulSoup(text, "lxml").find_all("table")
    # chosen before any nested table is flattened: a flattened one no longer has a table above it
    out = [t for t in tables if not any(p.name == "table" for p in t.parents)]
    for table in out:
        for nested in table.find_all("table"):
            nested.replace_with(nested.get_text(" ", strip=True))
    return out


def html_grid_rows(text: str) -> list[list[str]]:
    """Each top-level HTML table as upstream's evaluator lays it out for text search: a grid where a spanned
    cell's text fills every slot it covers (quantgate's ``scoring.tablegraph`` keeps one cell per span, right for
    structure but not for upstream's counts), a nested table read as its text. All tables' rows in document order.
    A table over the grid cap is left out of the search (upstream would try to lay it out)."""
    out: list[list[str]] = []
    for table in top_level_tables(text):
        try:
            out.extend(grid_rows(lay_out(table, _int_or_one)[0]))
        except TableTooLarge:
            continue
    return out


def with_table_cells(text: str) -> str:
    """The text plus, on lines of their own, every table cell and every row of several cells joined: the
    missing rules find content wherever a table put it."""
    extra: list[str] = []
    rows = [row for table in markdown_tables(text) for row in table.rows()] + html_grid_rows(text)
    for row in rows:
        cells = [c.strip() for c in row if c.strip()]
        extra.extend(cells)
        if len(cells) > 1:
            extra.append(" ".join(cells))
    return text + "\n" + "\n".join(extra) if extra else text


def unescape(text: str) -> str:
    """HTML entities decoded at most twice, stopping when a pass would create ampersands (over-decoding)."""
    for _ in range(2):
        decoded = html.unescape(text)
        if decoded == text or decoded.count("&") > text.count("&"):
            break
        text = decoded
    return text
