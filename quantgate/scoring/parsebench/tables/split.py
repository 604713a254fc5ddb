"""The merged-table splitter, as upstream's ``table_splitting`` does it: a model that wrote side-by-side tables as
one wide table repeats the column header every P columns; when the truth has more tables than the prediction,
each predicted table's repeating periods are candidates, and the combination (over the page's tables) whose
table count comes closest to the truth's (then more repeating header rows, then longer periods) is applied if it
beats splitting nothing. Runs before GriTS and the record match, on tables that still have their titles.
Written by hand because no package implements ParseBench's rules."""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from rapidfuzz import fuzz

from quantgate.scoring.parsebench.tables.data import ExtractedTable, TableData
from quantgate.scoring.parsebench.tables.records_headers import COLUMN_MATCH_THRESHOLD, header_row_values
from quantgate.scoring.parsebench.tables.records_norm import normalize_table
from quantgate.scoring.parsebench.tables.titles import header_info

SAFETY_CAP = 256  # combinations of the page's splittable tables tried at most; beyond it nothing is split
REPEAT_SHARE = 0.8  # share of a period's columns whose header must match the first segment's


def repeats_with_period(row: list[str], period: int) -> bool:
    """Every later segment of the header row matches the first in at least 80 % of its columns (fuzzy, case
    folded; two blanks match)."""
    first = row[:period]
    for s in range(1, len(row) // period):
        segment = row[s * period:(s + 1) * period]
        same = sum(1 for a, b in zip(first, segment, strict=True)
                   if fuzz.ratio(a.lower(), b.lower()) / 100.0 >= COLUMN_MATCH_THRESHOLD or (not a and not b))
        if same < period * REPEAT_SHARE:
            return False
    return True


def period_candidates(td: TableData) -> list[tuple[int, int]]:
    """(period, header rows repeating with it) for each period dividing the width into two or more segments
    with at least one repeating header row."""
    header = header_info(td)
    if not header.col_header_rows or td.data.shape[1] < 2:
        return []
    n_cols = td.data.shape[1]
    rows = header_row_values(td, header)
    out = []
    for period in range(1, n_cols // 2 + 1):
        if n_cols % period == 0:
            repeating = sum(1 for row in rows if repeats_with_period(row, period))
            if repeating:
                out.append((period, repeating))
    return out


def sub_table(td: TableData, start: int, end: int) -> TableData:
    """Columns [start, end) of the table, its trailing blank rows dropped (a shorter side-by-side table pads
    the merged one), its column headers and header cells renumbered, no row headers."""
    grid = td.data[:, start:end]
    height = 0
    for r in range(grid.shape[0] - 1, -1, -1):
        if any(str(v).strip() for v in grid[r, :]):
            height = r + 1
            break
    grid = grid[:height, :]
    return TableData(data=grid, header_rows=set(td.header_rows),
                     header_cols={c - start for c in range(start, end) if c in td.header_cols},
                     col_headers={c - start: td.col_headers[c] for c in range(start, end) if c in td.col_headers},
                     row_headers={},
                     header_cells={(r, c - start) for r, c in td.header_cells if start <= c < end and r < height})


@dataclass(frozen=True)
class SplitOption:
    """One way to read a predicted table: whole (``sub_tables`` None) or cut every ``period`` columns."""
    n_segments: int
    n_repeating_rows: int
    period: int
    sub_tables: tuple[TableData, ...] | None


NO_SPLIT = SplitOption(1, 0, 0, None)


def split_options(td: TableData) -> list[SplitOption]:
    """Whole first, then one option per candidate period."""
    options = [NO_SPLIT]
    n_cols = td.data.shape[1] if td.data.ndim == 2 else 0
    for period, repeating in period_candidates(td):
        n = n_cols // period
        options.append(SplitOption(n, repeating, period,
                                   tuple(sub_table(td, s * period, (s + 1) * period) for s in range(n))))
    return options


def joint_split(actual: list[ExtractedTable], n_expected: int) -> list[SplitOption] | None:
    """One option per predicted table, chosen jointly by (|tables − truth tables|, −repeating rows, −periods)
    and only when strictly better than no split; None otherwise or past the safety cap."""
    if not actual:
        return None
    options = [split_options(normalize_table(et.table_data)) for et in actual]
    variable = [i for i, o in enumerate(options) if len(o) >= 2]
    if not variable:
        return None
    product = 1
    for i in variable:
        product *= len(options[i])
        if product > SAFETY_CAP:
            return None
    fixed_segments = len(actual) - len(variable)  # a table with no option but whole is one table
    best: tuple[int, int, int] | None = None
    best_combo: tuple[SplitOption, ...] = ()
    for combo in itertools.product(*(options[i] for i in variable)):
        score = (abs(fixed_segments + sum(o.n_segments for o in combo) - n_expected),
                 -sum(o.n_repeating_rows for o in combo), -sum(o.period for o in combo))
        if best is None or score < best:
            best, best_combo = score, combo
    if best is None or best >= (abs(len(actual) - n_expected), 0, 0):
        return None
    chosen = [NO_SPLIT] * len(actual)
    for i, option in zip(variable, best_combo, strict=True):
        chosen[i] = option
    return chosen


def split_ambiguous_merged_pred(expected: list[ExtractedTable], actual: list[ExtractedTable]) -> list[ExtractedTable]:
    """The predicted tables with merged ones cut into their side-by-side parts, when the truth has more tables
    than the prediction and a split brings the count closer; otherwise ``actual`` itself. A part has no HTML of
    its own (``raw_html`` empty); a table left whole keeps its own."""
    if len(expected) <= len(actual):
        return actual
    chosen = joint_split(actual, len(expected))
    if chosen is None:
        return actual
    out: list[ExtractedTable] = []
    for et, option in zip(actual, chosen, strict=True):
        if option.sub_tables is None:
            out.append(et)
        else:
            out.extend(ExtractedTable(raw_html="", table_data=t) for t in option.sub_tables)
    return out
