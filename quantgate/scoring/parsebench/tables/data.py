"""The records ParseBench's table dimension (GTRM: GriTS-Con and TableRecordMatch) passes between its steps,
with the fields upstream's ``TableData``, ``ExtractedTable`` and ``HeaderHints`` carry
(``evaluation/metrics/parse/table_parsing.py``, ``table_extraction.py``, ``table_title_stripping.py`` at the
pinned commit), so each step can be compared with upstream's on the same input.

Plain dataclasses, not pydantic: a grid is a numpy array of cell strings (object dtype, rows × columns, spans
expanded into every cell they cover), built and read thousands of times per page pair."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass
class TableData:
    """One parsed table: its grid and what its markup says about headers. Cell text is as parsed, not
    normalized (each metric normalizes in its own way)."""
    data: np.ndarray  # object array of str, rows × columns
    header_rows: set[int] = field(default_factory=set)  # rows holding a <th> (or a markdown header row)
    header_cols: set[int] = field(default_factory=set)
    col_headers: dict[int, list[tuple[int, str]]] = field(default_factory=dict)  # column → (header row, text)
    row_headers: dict[int, list[tuple[int, str]]] = field(default_factory=dict)  # row → (header col, text)
    header_cells: set[tuple[int, int]] = field(default_factory=set)  # grid cells covered by a <th>
    context_before: str = ""
    context_after: str = ""


@dataclass(frozen=True)
class HeaderHints:
    """Header geometry of a table whose title rows were removed, in the trimmed table's row numbers."""
    col_header_rows: frozenset[int]
    th_title_rows: frozenset[int]
    stripped_titles: frozenset[str]  # the removed title rows' text, not normalized


@dataclass(frozen=True)
class ExtractedTable:
    """One table of a page as both metrics read it: its HTML slice, its parsed grid, and (after title
    stripping) its header hints."""
    raw_html: str
    table_data: TableData
    header_hints: HeaderHints | None = None
