"""Tables as ParseBench's chart rules read them (upstream's ``evaluation/metrics/parse/table_parsing.py``,
``parse_markdown_tables`` / ``parse_html_tables``): a rectangular grid of cell texts (a spanned cell's text in
every slot it covers), the header texts over each column and beside each row, and the text just before the table,
where a chart's title usually stands.

This is not ``scoring.tablegraph`` (olmOCR-bench's newer graph model, which keeps one cell per span): the chart
rules search every slot and read the headers and context this older layout keeps. Written by hand because no
package has it; HTML is read with BeautifulSoup over lxml, as upstream reads it, so the text around a table comes
out of the same parse tree."""

from __future__ import annotations

from dataclasses import dataclass, field

from quantgate.scoring.parsebench.text import TableTooLarge, grid_rows, lay_out, top_level_tables

MD_CONTEXT_LINES = 5  # lines kept before a markdown table
HTML_CONTEXT_SIBLINGS, HTML_CONTEXT_CHARS = 3, 300  # elements kept before an HTML table, and their last characters


@dataclass
class ChartTable:
    cells: list[list[str]]  # rows of equal length
    col_headers: dict[int, list[str]] = field(default_factory=dict)
    row_headers: dict[int, list[str]] = field(default_factory=dict)
    context: str = ""  # the text before the table

    @property
    def width(self) -> int:
        return len(self.cells[0]) if self.cells else 0


def _is_rule_line(line: str) -> bool:
    body = line.replace("|", "").strip()
    return bool(body) and all(c in "- :" for c in body)


def _md_rows(lines: list[str]) -> list[list[str]]:
    rule = next((i for i, line in enumerate(lines) if _is_rule_line(line)), None)
    rows = []
    for i, line in enumerate(lines):
        if i == rule or (line.strip() and all(c in "- :|" for c in line)):
            continue
        cells = [c.strip() for c in line.split("|")]
        cells = cells[1:] if cells and cells[0] == "" else cells
        cells = cells[:-1] if cells and cells[-1] == "" else cells
        if cells:
            rows.append(cells)
    return rows


def markdown_tables(content: str) -> list[ChartTable]:
    """Every run of two or more lines holding a pipe; its first row heads the columns, its first column the rows."""
    lines = content.strip().split("\n")
    runs, start = [], None
    for i, line in enumerate([*lines, ""]):  # the sentinel closes a table at the end
        if "|" in line and i < len(lines):
            start = i if start is None else start
        elif start is not None:
            runs.append((start, i))
            start = None
    out = []
    for start, end in runs:
        rows = _md_rows(lines[start:end]) if end - start >= 2 else []
        if not rows:
            continue
        width = max(map(len, rows))
        cells = [r + [""] * (width - len(r)) for r in rows]
        out.append(ChartTable(cells, {c: [cells[0][c]] for c in range(width)},
                              {r: [cells[r][0]] for r in range(1, len(cells))},
                              "\n".join(lines[max(0, start - MD_CONTEXT_LINES):start])))
    return out


def _text_of(node) -> str:
    if hasattr(node, "get_text"):
        return node.get_text(strip=True)
    return node.strip() if isinstance(node, str) else ""


def _context_before(table) -> str:
    parts: list[str] = []
    node = table.previous_sibling
    for _ in range(HTML_CONTEXT_SIBLINGS):
        if node is None or getattr(node, "name", None) == "table":
            break
        if text := _text_of(node):
            parts.insert(0, text)
        node = node.previous_sibling
    return " ".join(parts)[-HTML_CONTEXT_CHARS:]


def html_tables(content: str) -> list[ChartTable]:
    """Every top-level HTML table (a nested one read as its text), spans laid out on the grid, <th> cells
    recorded as headers of the columns and rows they cover, <sup>/<sub> digits as Unicode, the caption put before
    the context as ``<caption>...</caption>``. A span that is not a number raises ValueError, as upstream's does;
    a table over the grid cap (``text.MAX_GRID_CELLS``) is left out, where upstream would try to lay it out."""
    out = []
    for table in top_level_tables(content):
        caption = table.find("caption")
        caption_text = caption.get_text(strip=True) if caption else ""
        t = ChartTable([])
        try:
            grid, placed = lay_out(table, int)
            t.cells = grid_rows(grid)
        except TableTooLarge:
            continue
        for p in (p for p in placed if p.header):
            for j in range(p.col, p.col + p.across):
                t.col_headers.setdefault(j, []).append(p.text)
            for i in range(p.row, p.row + p.down):
                t.row_headers.setdefault(i, []).append(p.text)
        context = _context_before(table)
        if caption_text:
            context = f"<caption>{caption_text}</caption> {context}" if context else f"<caption>{caption_text}</caption>"
        t.context = context
        out.append(t)
    return out


def chart_tables(content: str) -> list[ChartTable]:
    """The output's markdown tables, then its HTML tables (upstream's order)."""
    return markdown_tables(content) + html_tables(content)
