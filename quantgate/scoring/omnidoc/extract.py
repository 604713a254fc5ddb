"""A predicted page's markdown split into the blocks OmniDocBench's end-to-end protocol scores (the
behaviour of upstream's utils/extract.py at 24e6428, re-implemented): LaTeX tables, HTML tables, display
formulas (and inline ones, which stay in their text too and compete as formula candidates), markdown pipe
tables (as HTML), fenced code, and paragraphs.

Each extracted span is blanked (replaced by as many spaces, or line breaks for pipe tables) so later steps
do not see it again and every block keeps its offset in the page, which orders the blocks."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from quantgate.scoring.omnidoc.normalize import prepare_page

Kind = Literal["text", "formula", "html_table", "latex_table"]


@dataclass(frozen=True)
class Block:
    kind: Kind
    start: int  # offset in the prepared page: blocks are in page order
    content: str
    inline: bool = False  # a formula found inside running text (a candidate only)


def _blank(text: str, spans: list[tuple[int, int]], fill: str = " ") -> str:
    chars = list(text)
    for a, b in spans:
        chars[a:b] = fill * (b - a)
    return "".join(chars)


def _outermost(text: str, opening: re.Pattern, closing: re.Pattern) -> list[tuple[int, int]]:
    """Spans of outermost opening…closing pairs, nesting counted; a closing with nothing open is
    ignored. An opening never closed is passed over and the search resumes after it (so a stray
    ``<table>`` does not swallow the rest of the page)."""
    token = re.compile(f"(?P<open>{opening.pattern})|{closing.pattern}")
    spans: list[tuple[int, int]] = []
    pos = 0
    while True:
        depth, outer = 0, None
        for m in token.finditer(text, pos):
            if m.group("open") is not None:
                outer = m if depth == 0 else outer
                depth += 1
            elif depth:
                depth -= 1
                if depth == 0:
                    spans.append((outer.start(), m.end()))
        if depth == 0:
            return spans
        pos = outer.end()


_LATEX_TABLE = re.compile(r"\\begin\{table\}.*?\\end\{table\}", re.S)
_TABULAR_OPEN, _TABULAR_CLOSE = re.compile(r"\\begin\{tabular\}"), re.compile(r"\\end\{tabular\}")
_HTML_OPEN, _HTML_CLOSE = re.compile(r"<table[^>]*>"), re.compile(r"</table>")


def _latex_tables(text: str) -> tuple[str, list[Block]]:
    spans = [m.span() for m in _LATEX_TABLE.finditer(text)]
    spans += _outermost(_blank(text, spans), _TABULAR_OPEN, _TABULAR_CLOSE)
    spans.sort()
    return _blank(text, spans), [Block("latex_table", a, text[a:b]) for a, b in spans]


def _html_tables(text: str) -> tuple[str, list[Block]]:
    spans = _outermost(text, _HTML_OPEN, _HTML_CLOSE)
    return _blank(text, spans), [Block("html_table", a, text[a:b]) for a, b in spans]


# $$…$$, \[…\], $…$, \(…\), tried in that order at each position; may span lines.
_MATH = re.compile(r"\$\$(.*?)\$\$|\\\[(.*?)\\\]|\$(.*?)\$|\\\((.*?)\\\)", re.S)
_DOLLARS = re.compile(r"\$\$(.*?)\$\$|\$(.*?)\$|\\\((.*?)\\\)", re.S)


def _formulas(text: str) -> tuple[str, list[Block]]:
    """Display math ($$…$$, \\[…\\]) is taken out of the text; inline math ($…$, \\(…\\)) stays in
    its text and is also offered as a formula candidate. Contents lose all whitespace and are written
    as \\[…\\]."""
    blocks, taken = [], []
    for m in _MATH.finditer(text):
        squeezed = "".join(m.group(0).split())
        inner = _DOLLARS.search(squeezed)
        if inner is None:  # \[…\]
            blocks.append(Block("formula", m.start(), squeezed))
            taken.append(m.span())
        elif inner.group(1):  # $$…$$ (non-empty)
            blocks.append(Block("formula", m.start(),
                                _DOLLARS.sub(lambda d: "\\[" + (d.group(1) or "") + "\\]", squeezed)))
            taken.append(m.span())
        else:
            body = _DOLLARS.sub(lambda d: "\\[" + (d.group(2) or "") + (d.group(3) or "") + "\\]", squeezed)
            blocks.append(Block("formula", m.start(), body, inline=True))
    return _blank(text, taken), blocks


_ROW_SPAN = re.compile(r"\|\s*.*?\s*\|\n", re.S)  # upstream's test that a page has pipe tables at all


def _is_row(line: str) -> bool:
    s = line.strip()
    return len(s) >= 2 and s.startswith("|") and s.endswith("|")


def _row_cells(line: str) -> list[str]:
    # Upstream's conversion drops every cell holding ':' or '---' (so rules like |---|:-:| vanish, and
    # so do cells such as "10:30"): kept, since the published numbers were computed so.
    cells = [c.strip() for c in line.strip().split("|")[1:-1]]
    return [c for c in cells if ":" not in c and "---" not in c]


def pipe_table_html(rows: list[list[str]]) -> str:
    """Every cell a ``<td>`` with explicit spans and line breaks between tags, as upstream's markdown
    conversion writes them, so the normalised HTML (and its edit distance) comes out the same."""
    body = "".join("<tr>\n" + "".join(f'<td colspan="1" rowspan="1">{c}</td>\n' for c in r) + "</tr>\n"
                   for r in rows)
    return f'<table border="1" >\n{body}</table>'


def _pipe_tables(text: str) -> tuple[str, list[Block]]:
    """Runs of lines that start and end with '|' become one HTML table each (rows left without cells
    dropped). Upstream converts only when the page has at least two pipe rows, and loses the line just
    above a table when no blank line separates them: both kept, as the published numbers were computed so.
    A converted table also ends the paragraphs around it, as upstream's conversion does: it is blanked
    with line breaks, not spaces."""
    if len(_ROW_SPAN.findall(text + "\n")) < 2:
        return text, []
    blocks, taken = [], []
    lines = text.split("\n")
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line) + 1)
    k = 0
    while k < len(lines):
        if not _is_row(lines[k]):
            k += 1
            continue
        first = k
        while k < len(lines) and _is_row(lines[k]):
            k += 1
        rows = [cells for cells in map(_row_cells, lines[first:k]) if cells]
        begin = starts[first - 1] if first and lines[first - 1].strip() else starts[first]
        blocks.append(Block("html_table", starts[first], pipe_table_html(rows)))
        taken.append((begin, starts[k] - 1))
    return _blank(text, taken, fill="\n"), blocks


_CODE = re.compile(r"```(\w+)\n(.*?)```", re.S)


def _code(text: str) -> tuple[str, list[Block]]:
    spans, blocks = [], []
    for m in _CODE.finditer(text):
        spans.append(m.span())
        blocks.append(Block("text", m.start(), m.group(2).strip()))
    return _blank(text, spans), blocks


_LATEX_WRAPPERS = [(re.compile(p, f), r"\1") for p, f in (
    (r"\\title\{(.*?)\}", 0), (r"\\title\s*\{\s*(.*?)\s*\}", re.S), (r"\\text\s*\{\s*(.*?)\s*\}", re.S),
    (r"\\section\*?\{(.*?)\}", 0), (r"\\section\*?\{\s*(.*?)\s*\}", re.S))]


def _paragraphs(text: str) -> list[Block]:
    """Blank-line-separated paragraphs (single lines when the page has no blank line). A paragraph that
    is all ``<table>…</table>`` is a table; one that starts and ends with '$' is a formula."""
    for pattern, repl in _LATEX_WRAPPERS:
        text = pattern.sub(repl, text)
    sep = "\n\n" if "\n\n" in text else "\n"
    blocks, offset = [], 0
    for part in text.split(sep):
        # Upstream's offset for a paragraph leaves out the separators before it, so a paragraph sorts
        # slightly early against blocks taken out whole; kept, as it decides the order of formula candidates.
        start, offset = offset, offset + len(part)
        tidy = "\n".join(s for s in (line.strip() for line in part.strip().split("\n")) if s)
        if not tidy:
            continue
        if tidy.startswith("<table") and tidy.endswith("</table>"):
            blocks.append(Block("html_table", start, tidy))
        elif tidy.startswith("$") and tidy.endswith("$"):
            if tidy.replace("$", "").strip():
                blocks.append(Block("formula", start, tidy))
        else:
            blocks.append(Block("text", start, tidy))
    return blocks


def split_blocks(markdown: str) -> list[Block]:
    """The page's blocks in page order (a stable sort: at one offset, earlier steps first)."""
    text = prepare_page(markdown)
    blocks: list[Block] = []
    for step in (_latex_tables, _html_tables, _formulas, _pipe_tables, _code):
        text, found = step(text)
        blocks += found
    blocks += _paragraphs(text)
    return sorted(blocks, key=lambda b: b.start)
