"""Tables as graphs of cells, for olmOCR-bench's ``table`` checks and for TEDS.

A table (HTML, or markdown pipes) becomes its cells, each keyed by the (row, column) where it starts,
with its rowspan and colspan laid out on a grid the way a browser does; each cell then knows the cells
touching it above, below, left and right (several when spans make the edges uneven), and the heading
cells reached by walking up or left. The behaviour, quirks included, is olmOCR-bench's graph table model
(allenai/olmocr, ``olmocr/bench/table_parsing.py``, which the leaderboard scores with); quantgate writes
its own because no released library has it, and tests/unit/scoring/test_tablegraph.py holds it to
upstream's on generated tables and on every output of the bundled sample. Parsing is BeautifulSoup's
``html.parser``, as upstream's."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from itertools import repeat

Pos = tuple[int, int]  # (row, column) of a cell's top-left slot
RELATIONS = ("up", "down", "left", "right", "top_heading", "left_heading")  # the table check's field names
DIRECTIONS = RELATIONS[:4]


@dataclass(frozen=True)
class _Written:
    """One cell as the source writes it, before layout."""

    text: str
    rowspan: int = 1
    colspan: int = 1
    heading: bool = False


@dataclass(frozen=True)
class TableGraph:
    text: dict[Pos, str]
    headings: frozenset[Pos]
    neighbours: dict[str, dict[Pos, frozenset[Pos]]]  # direction -> cell -> the cells touching it there
    rectangular: bool  # every slot of the grid covered by some cell
    # A cell claims rows past the table's last row: possible only when a later cell's colspan cut its
    # rowspan short, so a cell lies to its left. Upstream's model raises (IndexError) on such a table.
    spans_past_end: bool

    def related(self, pos: Pos, relation: str) -> frozenset[Pos]:
        """The cells in ``relation`` (one of RELATIONS) to the cell at ``pos``."""
        if relation in DIRECTIONS:
            return self.neighbours[relation][pos]
        return self._heading(pos, "up" if relation == "top_heading" else "left")

    def _heading(self, start: Pos, direction: str) -> frozenset[Pos]:
        # Everything reachable going one way; its heading cells, or failing any, where the walk stops
        # (cells with nothing further that way). Each step strictly decreases a coordinate: it ends.
        seen: set[Pos] = set()
        frontier = set(self.neighbours[direction][start])
        while frontier:
            seen |= frontier
            frontier = {n for p in frontier for n in self.neighbours[direction][p]} - seen
        found = seen & self.headings
        return frozenset(found or {p for p in seen if not self.neighbours[direction][p]})

    def rows(self) -> list[list[str]]:
        """Per row that has any, the texts of the cells starting in it, left to right."""
        by_row: dict[int, list[tuple[int, str]]] = {}
        for (r, c), t in self.text.items():
            by_row.setdefault(r, []).append((c, t))
        return [[t for _, t in sorted(by_row[r])] for r in sorted(by_row)]


def _lay_out(rows: list[list[_Written]]) -> tuple[dict[Pos, Pos], dict[Pos, _Written], int]:
    """The grid (slot -> the cell covering it), the cells by their start, and the number of rows.

    Row by row, left to right, each slot takes the cell reaching down into it from above, else the next
    written cell. A written cell takes ``colspan`` slots and claims ``rowspan`` rows in each of them,
    replacing whatever claim from above those slots had (so a colspan can cut a rowspan short). When a
    row's written cells run out, the claims from above further right still fill their slots; rows are
    added at the end until every claim is used up."""
    grid: dict[Pos, Pos] = {}
    cells: dict[Pos, _Written] = {}
    claim: dict[int, tuple[Pos, int]] = {}  # column -> (cell, last row it covers)
    for r, written in enumerate(rows):
        todo = list(reversed(written))
        c = 0
        while todo:
            held = claim.get(c)
            if held and held[1] >= r:
                grid[(r, c)] = held[0]
                c += 1
                continue
            w = todo.pop()
            cells[(r, c)] = w
            for k in range(c, c + w.colspan):
                grid[(r, k)] = (r, c)
                claim[k] = ((r, c), r + w.rowspan - 1)
            c += w.colspan
        for k, (pos, last) in claim.items():
            if k >= c and last >= r:
                grid[(r, k)] = pos
    height = max([len(rows)] + [last + 1 for _, last in claim.values()])
    for r in range(len(rows), height):
        for k, (pos, last) in claim.items():
            if last >= r:
                grid[(r, k)] = pos
    return grid, cells, height


def _first(grid: dict[Pos, Pos], me: Pos, slots: Iterable[Pos]) -> Pos | None:
    for s in slots:
        other = grid.get(s)
        if other is not None and other != me:
            return other
    return None


def build(rows: list[list[_Written]]) -> TableGraph | None:
    """The graph of written rows; None when no cell is written."""
    grid, cells, height = _lay_out(rows)
    if not cells:
        return None
    width = 1 + max(c for _, c in grid)
    found: dict[str, dict[Pos, set[Pos]]] = {d: {p: set() for p in cells} for d in DIRECTIONS}
    past_end = False
    for (r0, c0), w in cells.items():
        # Neighbours are looked for along the cell's whole declared edge, even the part a later colspan
        # took over: upstream's behaviour.
        r1, c1 = r0 + w.rowspan - 1, c0 + w.colspan - 1
        past_end |= r1 >= height
        me = (r0, c0)
        scans = {"right": [zip(repeat(r), range(c1 + 1, width)) for r in range(r0, r1 + 1)],
                 "left": [zip(repeat(r), range(c0 - 1, -1, -1)) for r in range(r0, r1 + 1)],
                 "down": [zip(range(r1 + 1, height), repeat(c)) for c in range(c0, c1 + 1)],
                 "up": [zip(range(r0 - 1, -1, -1), repeat(c)) for c in range(c0, c1 + 1)]}
        for d, lines in scans.items():
            for line in lines:
                n = _first(grid, me, line)
                if n is not None:
                    found[d][me].add(n)
    return TableGraph(text={p: w.text for p, w in cells.items()},
                      headings=frozenset(p for p, w in cells.items() if w.heading),
                      neighbours={d: {p: frozenset(s) for p, s in m.items()} for d, m in found.items()},
                      rectangular=len(grid) == width * height,
                      spans_past_end=past_end)


# --- markdown -------------------------------------------------------------------------------------


def _is_rule(line: str) -> bool:
    body = line.replace("|", "").strip()
    return bool(body) and set(body) <= set("-: ")


def _md_rows(block: list[str]) -> list[list[str]]:
    # The first rule line (dashes, colons, spaces between pipes) goes, and so does any line made only of
    # "-", ":", " " and "|"; a leading and a trailing empty cell are the outer pipes'.
    rule = next((i for i, line in enumerate(block) if _is_rule(line)), None)
    out = []
    for i, line in enumerate(block):
        if i == rule or (line.strip() and set(line) <= set("-: |")):
            continue
        cells = [s.strip() for s in line.split("|")]
        if cells and cells[0] == "":
            cells = cells[1:]
        if cells and cells[-1] == "":
            cells = cells[:-1]
        if cells:
            out.append(cells)
    return out


def markdown_tables(content: str) -> list[TableGraph]:
    """Every run of two or more consecutive lines holding a "|" is a table; its first row and first
    column are headings."""
    blocks: list[list[str]] = []
    run: list[str] = []
    for line in content.strip().split("\n") + [""]:
        if "|" in line:
            run.append(line)
            continue
        if len(run) >= 2:
            blocks.append(run)
        run = []
    out = []
    for block in blocks:
        rows = [[_Written(t, heading=r == 0 or c == 0) for c, t in enumerate(cells)]
                for r, cells in enumerate(_md_rows(block))]
        g = build(rows) if rows else None
        if g is not None:
            out.append(g)
    return out


# --- HTML -----------------------------------------------------------------------------------------


def _span(raw) -> int:
    try:
        n = int(raw)
    except (TypeError, ValueError):
        return 1
    return n if n > 0 else 1


def html_tables(content: str) -> list[TableGraph]:
    """Every <table>, nested ones too, in document order. A table's rows are all the <tr> inside it
    (a nested table's as well); a row's cells are its own <th>/<td> children. A cell is a heading when
    it is a <th> or sits in a <thead>; <br> reads as a line break; rowspan="0" runs to the last row."""
    from bs4 import BeautifulSoup

    out = []
    for table in BeautifulSoup(content, "html.parser").find_all("table"):
        trs = table.find_all("tr")
        rows = []
        for i, tr in enumerate(trs):
            in_head = tr.find_parent("thead") is not None
            row = []
            for cell in tr.find_all(["th", "td"], recursive=False):
                for br in cell.find_all("br"):
                    br.replace_with("\n")
                raw_rows = cell.get("rowspan")
                down = len(trs) - i if isinstance(raw_rows, str) and raw_rows.strip() == "0" else _span(raw_rows)
                row.append(_Written(cell.get_text("").strip(), down, _span(cell.get("colspan")),
                                    cell.name == "th" or in_head))
            rows.append(row)
        g = build(rows) if rows else None
        if g is not None:
            out.append(g)
    return out


def read_tables(content: str, markdown: bool = True) -> list[TableGraph]:
    """The page's markdown tables (unless ``markdown`` is False), then its HTML tables."""
    return (markdown_tables(content) if markdown else []) + html_tables(content)
