"""TableRecordMatch's cell normalization, as upstream's ``table_record_match_metric`` applies it before it builds
records (``normalize_table``, ``_normalize_trm_cell_text``, ``_is_empty_or_nan``): written by hand because no
package implements ParseBench's rules. Title stripping runs its detectors on a table normalized this way, so the two
steps decide on the same text."""

from __future__ import annotations

import re

import numpy as np

from quantgate.scoring.parsebench.tables.data import TableData
from quantgate.scoring.parsebench.text import normalize

# Cells that mean "no value": two of them agree, one against real content disagrees.
EMPTY_SENTINELS = frozenset({"", "nan", "NaN", "NAN", "none", "None", "-", "—", "n/a", "N/A"})

# Upstream keeps sub/superscript content in tables (H₂O, x²) where prose normalization drops it, so the parsed
# Unicode forms and <sup>/<sub> markup both become plain characters first.
_SUPERSCRIPT_PLAIN = str.maketrans("⁰¹²³⁴⁵⁶⁷⁸⁹⁺⁻⁼⁽⁾ⁿⁱ", "0123456789+-=()ni")
_SUBSCRIPT_PLAIN = str.maketrans("₀₁₂₃₄₅₆₇₈₉₊₋₌₍₎ₐₑₕᵢⱼₖₗₘₙₒₚᵣₛₜᵤᵥₓ", "0123456789+-=()aehijklmnoprstuvx")
_SUP_TAG = re.compile(r"<sup[^>]*>(.*?)</sup>", re.IGNORECASE)
_SUB_TAG = re.compile(r"<sub[^>]*>(.*?)</sub>", re.IGNORECASE)

# (pattern, replacement) in upstream's order: leader dots (their count is a visual filler), then the spaces a
# model adds or drops around $ % ( ) ®, then thousands separators between digits ("Smith, John" keeps its comma).
_TRM_STEPS = tuple((re.compile(p), r) for p, r in (
    (r"(?:\.\s){2,}\.?", ""), (r"\.{2,}", ""), (r"  +", " "),
))
_TRM_PUNCT_STEPS = tuple((re.compile(p), r) for p, r in (
    (r"\$\s+", "$"), (r"\s+%", "%"), (r"\s+\(", "("), (r"\s+\)", ")"), (r"\s+®", "®"), (r"(\d),(\d)", r"\1\2"),
))


def sub_sup_plain(text: str) -> str:
    """<sup>/<sub> markup unwrapped and Unicode super/subscripts as their plain characters."""
    text = _SUB_TAG.sub(r"\1", _SUP_TAG.sub(r"\1", text))
    return text.translate(_SUPERSCRIPT_PLAIN).translate(_SUBSCRIPT_PLAIN)


def trm_cell_text(text: str) -> str:
    """The record match's own cell folding, applied after the shared text normalization."""
    for pattern, repl in _TRM_STEPS:
        text = pattern.sub(repl, text)
    text = text.strip()
    for pattern, repl in _TRM_PUNCT_STEPS:
        text = pattern.sub(repl, text)
    return text


def cell_text(text: str) -> str:
    return trm_cell_text(normalize(sub_sup_plain(text)))


def is_empty_or_nan(value: str) -> bool:
    return str(value).strip() in EMPTY_SENTINELS


def normalize_table(td: TableData) -> TableData:
    """Every cell and header text normalized, and the columns left with no text at all (cells and header
    entries) dropped and the rest renumbered: an empty column is layout noise that would otherwise count in the
    record similarity's column union. Each side is normalized alone, so the two may end with different widths;
    a sentinel such as "-" is content and keeps its column. Row headers keep their row numbers."""
    if td.data.size == 0:
        return td
    n_rows, n_cols = td.data.shape
    grid = np.empty_like(td.data)
    for idx in np.ndindex(td.data.shape):
        grid[idx] = cell_text(str(td.data[idx]))
    col_headers = {c: [(r, cell_text(t)) for r, t in entries] for c, entries in td.col_headers.items()}
    row_headers = {r: [(c, cell_text(t)) for c, t in entries] for r, entries in td.row_headers.items()}

    def has_text(c: int) -> bool:
        return any(str(grid[r, c]) != "" for r in range(n_rows)) or any(t != "" for _, t in col_headers.get(c, []))

    keep = [c for c in range(n_cols) if has_text(c)]
    header_cols, header_cells = td.header_cols, td.header_cells
    if len(keep) != n_cols:
        new = {old: i for i, old in enumerate(keep)}
        grid = grid[:, keep]
        col_headers = {new[c]: col_headers[c] for c in keep if c in col_headers}
        header_cols = {new[c] for c in td.header_cols if c in new}
        header_cells = {(r, new[c]) for r, c in td.header_cells if c in new}
        row_headers = {r: [(new[c], t) for c, t in entries if c in new] for r, entries in row_headers.items()}
    return TableData(data=grid, header_rows=td.header_rows, header_cols=header_cols, col_headers=col_headers,
                     row_headers=row_headers, header_cells=header_cells, context_before=td.context_before,
                     context_after=td.context_after)
