"""Title-row stripping, the step before both table metrics, as upstream's ``table_title_stripping`` does it: a
table's title rows (leading <td> rows that repeat one text across every column, and <th> rows inside the header
block that span it with one text) are removed from the grid, so neither GriTS nor the record match scores a
title as a header or a record; what was removed and the surviving header rows travel with the table as its
``HeaderHints``. Written by hand because no package implements ParseBench's rules."""

from __future__ import annotations

import numpy as np

from quantgate.scoring.parsebench.tables.data import ExtractedTable, HeaderHints, TableData
from quantgate.scoring.parsebench.tables.records_headers import EMPTY_HEADER, HeaderInfo, build_column_keys
from quantgate.scoring.parsebench.tables.records_norm import normalize_table

NO_HINTS = HeaderHints(col_header_rows=frozenset(), th_title_rows=frozenset(), stripped_titles=frozenset())


def _texts(td: TableData, r: int) -> list[str]:
    return [str(td.data[r, c]).strip() for c in range(td.data.shape[1])]


def td_title_rows(td: TableData, nominal: set[int]) -> set[int]:
    """The leading rows above the first header row that repeat one non-empty text in every column (a
    ``<td colspan=N>`` title); none in a one-column table (every row would qualify) or when every row would."""
    n_rows, n_cols = td.data.shape
    if n_cols <= 1:
        return set()
    found: set[int] = set()
    for r in range(n_rows):
        values = _texts(td, r)
        if r in nominal or len(set(values)) != 1 or not values[0]:
            break
        found.add(r)
    return found if found and len(found) < n_rows else set()


def col_header_rows(td: TableData, nominal: set[int], td_titles: set[int]) -> set[int]:
    """The leading block of header rows under the <td> titles, each all <th> (a row with text in a <td> is a data
    row with a row header); a bottom row with any <td> text leaves the block."""
    n_rows, n_cols = td.data.shape
    end = start = max(td_titles) + 1 if td_titles else 0
    for r in range(start, n_rows):
        if r not in nominal or any(str(td.data[r, c]).strip() and (r, c) not in td.header_cells
                                   for c in range(n_cols)):
            break
        end = r + 1
    rows = set(range(end)) & nominal
    if rows:
        bottom = max(rows)
        if any(str(td.data[bottom, c]).strip() and (bottom, c) not in td.header_cells for c in range(n_cols)):
            rows.discard(bottom)
    return rows


def _header_text(td: TableData, c: int, r: int) -> str:
    text = ""
    for row, t in td.col_headers.get(c, []):
        if row == r:
            text = t.strip()  # the last entry of the row wins, as upstream reads it
    return text


def _is_spanning_title(td: TableData, r: int, header_rows: set[int], with_headers: set[int]) -> bool:
    """One text across the header block's columns (all of them, or all but an edge column), in fewer <th> cells
    of that row than the columns it covers (so it is one spanning cell, not repeated headers)."""
    n_cols = td.data.shape[1]
    texts = [_header_text(td, c, r) for c in range(n_cols)]
    if len({t for t in texts if t}) != 1:
        return False
    covered = {c for c, t in enumerate(texts) if t}
    others = {c for o in header_rows if o != r for c in range(n_cols)
              for row, t in td.col_headers.get(c, []) if row == o and t.strip()}
    target = others or with_headers
    if not target:
        return False
    uncovered = target - covered
    if uncovered and not uncovered <= {min(target), max(target)}:
        return False
    return sum(1 for _, t in td.row_headers.get(r, []) if t.strip()) < len(covered)


def th_title_rows(td: TableData, header_rows: set[int], *, max_top: int = 1) -> set[int]:
    """The header block's title rows to strip: up to ``max_top`` from the top (a rowspanning title and the rows
    its span fills count once), never the whole block; and the block's bottom row when it is a title (e.g.
    "(in millions)") and another header row stays."""
    n_cols = td.data.shape[1]
    with_headers = {c for c in range(n_cols)
                    if any(r in header_rows and t.strip() for r, t in td.col_headers.get(c, []))}
    titles = {r for r in header_rows if _is_spanning_title(td, r, header_rows, with_headers)}
    if not titles:
        return set()

    def continuation(r: int) -> bool:  # a row filled only by a rowspan from above
        return not any(row == r for c in range(n_cols) for row, _ in td.col_headers.get(c, []))

    ordered = sorted(header_rows)
    strip: set[int] = set()
    if max_top > 0:
        cap, taken, i = min(len(header_rows) - 1, max_top), 0, 0
        while i < len(ordered) and taken < cap and ordered[i] in titles:
            j = i + 1
            while j < len(ordered) and continuation(ordered[j]):
                j += 1
            strip.update(ordered[i:j])
            taken, i = taken + 1, j
    bottom = ordered[-1]
    if bottom in titles and bottom not in strip and header_rows - strip - {bottom}:
        strip.add(bottom)
    return strip


def stripped_title_texts(td: TableData, th_titles: set[int], td_titles: set[int]) -> set[str]:
    """The removed titles' texts (the record match strips them as key prefixes when the other side kept them)."""
    n_cols = td.data.shape[1]
    out = {t.strip() for r in th_titles for c in range(n_cols) for row, t in td.col_headers.get(c, [])
           if row == r and t.strip()}
    return out | {v for r in td_titles for v in _texts(td, r) if v}


def header_info(td: TableData) -> HeaderInfo:
    """The header reading of a table that still has its titles (the merged-table splitter runs before
    stripping)."""
    if td.data.size == 0:
        return EMPTY_HEADER
    nominal = set(td.header_rows)
    td_titles = td_title_rows(td, nominal)
    rows = col_header_rows(td, nominal, td_titles)
    th_titles = th_title_rows(td, rows)
    keys, synthetic = build_column_keys(td, rows, th_titles)
    return HeaderInfo(keys, synthetic, frozenset(rows), frozenset(th_titles), frozenset(td_titles),
                      frozenset(stripped_title_texts(td, th_titles, td_titles)))


def remove_rows(td: TableData, rows: frozenset[int] | set[int]) -> tuple[TableData, dict[int, int]]:
    """The table without ``rows``, every row-numbered field renumbered; and old → new row numbers."""
    old_to_new = {old: new for new, old in enumerate(r for r in range(td.data.shape[0]) if r not in rows)}
    if not rows:
        return td, old_to_new
    col_headers = {c: kept for c, entries in td.col_headers.items()
                   if (kept := [(old_to_new[r], t) for r, t in entries if r in old_to_new])}
    return TableData(data=np.delete(td.data, sorted(rows), axis=0),
                     header_rows={old_to_new[r] for r in td.header_rows if r in old_to_new},
                     header_cols=set(td.header_cols), col_headers=col_headers,
                     row_headers={old_to_new[r]: list(v) for r, v in td.row_headers.items() if r in old_to_new},
                     header_cells={(old_to_new[r], c) for r, c in td.header_cells if r in old_to_new},
                     context_before=td.context_before, context_after=td.context_after), old_to_new


def strip_title_rows(et: ExtractedTable, *, max_top_title_rows: int = 1) -> ExtractedTable:
    """The table without its title rows, with hints in the trimmed table's row numbers. Leading all-empty rows
    go first (they are not titles but would hide the header block). The detectors read the record match's
    normalized text; the grid keeps its own. ``max_top_title_rows`` 0 strips no top titles at all (neither <td>
    nor <th>); a bottom <th> title stays in the grid (the record match reads it as data when the block has
    several rows) but is named in ``th_title_rows`` so it is no part of a column key."""
    td = et.table_data
    if td.data.size == 0:
        return ExtractedTable(raw_html=et.raw_html, table_data=td, header_hints=NO_HINTS)
    leading: set[int] = set()
    for r in range(td.data.shape[0]):
        if any(_texts(td, r)):
            break
        leading.add(r)
    if leading:
        td, _ = remove_rows(td, leading)
    norm = normalize_table(td)
    nominal = set(norm.header_rows)
    td_titles = td_title_rows(norm, nominal) if max_top_title_rows > 0 else set()
    rows = col_header_rows(norm, nominal, td_titles)
    th_titles = th_title_rows(norm, rows, max_top=max_top_title_rows)
    bottom = max(rows) if rows and max(rows) in th_titles else None
    trimmed, old_to_new = remove_rows(td, frozenset(td_titles | (th_titles - {bottom})))
    hints = HeaderHints(col_header_rows=frozenset(old_to_new[r] for r in rows if r in old_to_new),
                        th_title_rows=frozenset(old_to_new[r] for r in th_titles if r in old_to_new),
                        stripped_titles=frozenset(stripped_title_texts(norm, th_titles, td_titles)))
    return ExtractedTable(raw_html=et.raw_html, table_data=trimmed, header_hints=hints)
