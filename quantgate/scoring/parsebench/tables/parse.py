"""How ParseBench's table dimension finds and reads a page's HTML tables, as upstream's evaluator does
(``evaluation/metrics/parse/table_extraction.py`` and ``table_parsing.py`` at the pinned commit): each top-level
``<table>...</table>`` slice found by a depth-aware string scan, each slice parsed on its own (BeautifulSoup over
lxml, as upstream) into a grid where a spanned cell's text fills every slot it covers, ``<th>`` cells recorded as
headers, and the text around the table kept as context; and the step before it, where a predicted heading just
above a table becomes the table's title row when the truth's table has one.

Written by hand: no package implements ParseBench's table reading (upstream's own needs Python >= 3.12 and
pulls its inference stack); checked against upstream's in tests/unit/scoring/test_parsebench_tables_parse.py.

One deliberate divergence, for safety: upstream fills a dictionary cell by cell for every span, so one predicted
``rowspan="100000" colspan="100000"`` would take the machine's memory. Here a table whose spans would fill more
than ``MAX_GRID_CELLS`` slots, or whose grid would be larger than that, is not parsed: a predicted one is dropped
and counted as unparseable (as upstream drops a predicted table it cannot parse), a truth one is a DataError.
A predicted table upstream's parser raises on (a span that is not an integer, one that throws the grid out of
bounds) is dropped the same way, where upstream's evaluator would fail the whole page."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from rapidfuzz import fuzz

from quantgate.errors import DataError
from quantgate.scoring.parsebench.tables.data import ExtractedTable, TableData
from quantgate.scoring.parsebench.text import MAX_GRID_CELLS, TableTooLarge, flatten_cell, normalize

TITLE_MATCH = 0.8  # a preceding text this similar (rapidfuzz ratio / 100) to a truth title row is that title
CONTEXT_BEFORE_SIBLINGS, CONTEXT_BEFORE_CHARS = 3, 300
CONTEXT_AFTER_SIBLINGS, CONTEXT_AFTER_CHARS = 2, 200
_TAG_END = (">", " ", "\t", "\n", "\r")  # what may follow "<table" in a real tag (not "<tabledata>")


def _soup(text: str):
    from bs4 import BeautifulSoup

    return BeautifulSoup(text, "lxml")


def _real_tag_at(lower: str, at: int) -> bool:
    end = at + len("<table")
    return end >= len(lower) or lower[end] in _TAG_END


def extract_html_tables(md: str) -> list[str]:
    """Every top-level ``<table ...>...</table>`` slice of the text, a nested table kept inside its outer one; an
    unclosed table runs to the end of the text."""
    if not md:
        return []
    lower, out, start_at = md.lower(), [], 0
    while (start := lower.find("<table", start_at)) != -1:
        if not _real_tag_at(lower, start):
            start_at = start + 1
            continue
        depth, pos, end = 0, start, -1
        while pos < len(lower):
            opens, closes = lower.find("<table", pos + 1), lower.find("</table>", pos + 1)
            if closes == -1:
                break
            if opens != -1 and opens < closes:
                pos = opens
                if _real_tag_at(lower, opens):
                    depth += 1
            elif depth == 0:
                end = closes + len("</table>")
                break
            else:
                depth, pos = depth - 1, closes
        if end == -1:
            out.append(md[start:])
            break
        out.append(md[start:end])
        start_at = end
    return out


def _text_of(node) -> str:
    if hasattr(node, "get_text"):
        return node.get_text(strip=True)
    return node.strip() if isinstance(node, str) else ""


def _context(table, *, before: bool) -> str:
    parts: list[str] = []
    node = table.previous_sibling if before else table.next_sibling
    for _ in range(CONTEXT_BEFORE_SIBLINGS if before else CONTEXT_AFTER_SIBLINGS):
        if node is None or getattr(node, "name", None) == "table":
            break
        if (text := _text_of(node)) and before:
            parts.insert(0, text)
        elif text:
            parts.append(text)
        node = node.previous_sibling if before else node.next_sibling
    joined = " ".join(parts)
    return joined[-CONTEXT_BEFORE_CHARS:] if before else joined[:CONTEXT_AFTER_CHARS]


def _grid(cells: dict[tuple[int, int], str]) -> np.ndarray:
    if not cells:
        return np.array([[]], dtype=object)
    height, width = max(r for r, _ in cells) + 1, max(c for _, c in cells) + 1
    if height * width > MAX_GRID_CELLS:
        raise TableTooLarge(f"a {height} × {width} grid is over {MAX_GRID_CELLS:,} cells")
    grid = np.empty((height, width), dtype=object)  # a span that moved left writes where numpy's index wraps, as upstream
    grid[:] = ""
    for (r, c), text in cells.items():
        grid[r, c] = text
    return grid


def _one_table(table) -> TableData:
    # a nested table is read as its text, so its rows do not join the outer table's
    for nested in table.find_all("table"):
        nested.replace_with(nested.get_text(" ", strip=True))
    rows = table.find_all(["tr"])
    caption = table.find("caption")
    caption_text = caption.get_text(strip=True) if caption else ""
    td = TableData(data=np.array([[]], dtype=object))
    if thead := table.find("thead"):
        td.header_rows.update(rows.index(tr) for tr in thead.find_all("tr") if tr in rows)  # Tag equality, as upstream
    cells: dict[tuple[int, int], str] = {}
    filled = 0
    for r, tr in enumerate(rows):
        c = 0
        for cell in tr.find_all(["th", "td"]):
            while (r, c) in cells:
                c += 1
            flatten_cell(cell)
            text, is_th = cell.get_text().strip(), cell.name == "th"
            if is_th:
                td.header_rows.add(r)
                td.header_cols.add(c)
            down, across = int(cell.get("rowspan", 1)), int(cell.get("colspan", 1))
            filled += max(down, 0) * max(across, 0)
            if filled > MAX_GRID_CELLS:
                raise TableTooLarge(f"its spans fill over {MAX_GRID_CELLS:,} grid cells")
            for i in range(r, r + down):
                for j in range(c, c + across):
                    cells[(i, j)] = text
                    if is_th:
                        td.header_cells.add((i, j))
            if is_th:
                for j in range(c, c + across):
                    td.col_headers.setdefault(j, []).append((r, text))
                for i in range(r, r + down):
                    td.row_headers.setdefault(i, []).append((c, text))
            c += across
    td.data = _grid(cells)
    td.context_before = _context(table, before=True)
    if caption_text:
        mark = f"<caption>{caption_text}</caption>"
        td.context_before = f"{mark} {td.context_before}" if td.context_before else mark
    td.context_after = _context(table, before=False)
    return td


def parse_html_tables(html: str) -> list[TableData]:
    """Each top-level table of the HTML, parsed. Raises ValueError (or IndexError) where upstream's parser raises
    (a span that is not an integer...) and :class:`TableTooLarge` over the grid cap."""
    tables = _soup(html).find_all("table")
    # chosen before any nested table is flattened: a flattened one no longer has a table above it
    top = [t for t in tables if not any(p.name == "table" for p in t.parents if hasattr(p, "name"))]
    return [_one_table(t) for t in top]


@dataclass(frozen=True)
class TablePairs:
    """Both sides' tables of one page, and upstream's per-page counts."""
    expected: list[ExtractedTable]
    actual: list[ExtractedTable]
    n_expected: int
    n_actual: int
    unparseable_pred: int  # predicted tables dropped because they do not parse


def _side(md: str, *, truth: bool, page: str) -> tuple[list[ExtractedTable], int]:
    out, dropped = [], 0
    for i, raw in enumerate(extract_html_tables(md)):
        try:
            parsed = parse_html_tables(raw)
        except (ValueError, IndexError) as e:
            if truth:
                raise DataError(f"{page}: truth table {i + 1} cannot be read ({e}); fix its HTML in the ParseBench "
                                "file's expected_markdown") from None
            parsed = []
        if not parsed:
            if truth:
                raise DataError(f"{page}: truth table {i + 1} has no table HTML can parse; fix its HTML in the "
                                "ParseBench file's expected_markdown")
            dropped += 1
            continue
        out.append(ExtractedTable(raw_html=raw, table_data=parsed[0]))
    return out, dropped


def extract_table_pairs(expected_md: str, actual_md: str, *, page: str = "page") -> TablePairs:
    """The page's truth tables and predicted tables, each slice parsed on its own (so a malformed prediction
    cannot shift which grid goes with which slice). A truth table that does not parse is a DataError naming the
    page and table (a dataset bug); a predicted one is dropped and counted (the model pays for it as a missing
    table)."""
    expected, _ = _side(expected_md, truth=True, page=page)
    actual, dropped = _side(actual_md, truth=False, page=page)
    return TablePairs(expected, actual, len(expected), len(actual), dropped)


def _span(cell, default: int = 1) -> int | None:
    try:
        return int(cell.get("colspan", default))
    except ValueError:
        return None


def _truth_titles(expected_md: str) -> list[str]:
    """The text of each truth table's first row where that row is one cell spanning every column of the next."""
    titles = []
    for table in _soup(expected_md).find_all("table"):
        first = table.find("tr")
        cells = first.find_all(["th", "td"]) if first is not None else []
        if len(cells) != 1 or (span := _span(cells[0])) is None or span <= 1:
            continue
        second = first.find_next_sibling("tr")
        widths = [_span(c) for c in second.find_all(["th", "td"])] if second is not None else None
        if widths is None or None in widths or span < sum(widths):  # type: ignore[arg-type]
            continue
        if title := cells[0].get_text(strip=True):
            titles.append(title)
    return titles


def merge_preceding_titles_into_tables(expected_md: str, actual_md: str) -> str:
    """The prediction with a heading or paragraph just before a table moved into the table as a full-width ``<th>``
    first row, where it reads like a truth table's title row (rapidfuzz ratio >= 0.8 after upstream's text
    normalization): otherwise a model that wrote the title above the table loses a row the truth has. The text
    comes back unchanged when nothing moved; re-serialized by BeautifulSoup when something did. A predicted span
    that is not an integer leaves its table as it is (upstream's evaluator fails the page there)."""
    if not expected_md or not actual_md or not (titles := _truth_titles(expected_md)):
        return actual_md
    wanted = [normalize(t) for t in titles]
    soup, moved = _soup(actual_md), False
    for table in soup.find_all("table"):
        first = table.find("tr")
        if first is not None:
            lead = first.find_all(["th", "td"])
            if len(lead) == 1 and ((span := _span(lead[0])) is None or span > 1):
                continue  # already has a title row
        prev = table.previous_sibling
        while prev is not None and isinstance(prev, str) and not prev.strip():
            prev = prev.previous_sibling
        text = _text_of(prev) if prev is not None else ""
        if not text:
            continue
        said = normalize(text)
        if max(fuzz.ratio(said, t) / 100.0 for t in wanted) < TITLE_MATCH:
            continue
        widths = [[_span(c) for c in tr.find_all(["th", "td"])] for tr in table.find_all("tr")]
        if any(None in w for w in widths):
            continue
        columns = max((sum(w) for w in widths), default=0)  # type: ignore[arg-type]
        if columns < 2:
            continue
        row = soup.new_tag("tr")
        head = soup.new_tag("th", colspan=str(columns))
        head.string = text
        row.append(head)
        if thead := table.find("thead"):
            thead.insert(0, row)
        elif (first_tr := table.find("tr")) is not None:
            first_tr.insert_before(row)
        else:
            table.append(row)
        prev.extract()
        moved = True
    if not moved:
        return actual_md
    body = soup.find("body")
    return body.decode_contents() if body else str(soup)
