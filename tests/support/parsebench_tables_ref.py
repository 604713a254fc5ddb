"""Upstream ParseBench's table records (``TableData``, ``ExtractedTable``, ``HeaderHints``) turned into
quantgate's (``quantgate.scoring.parsebench.tables.data``) and back, field by field, so a step of the table
dimension can be fed the very input upstream's step got and its output compared."""

from __future__ import annotations

import numpy as np

from quantgate.scoring.parsebench.tables import data as ours
from tests.support import parsebench_ref


def _upstream():
    pb = parsebench_ref.load()  # noqa: F841 (installs the import hook)
    import parse_bench.evaluation.metrics.parse.table_extraction as ext
    import parse_bench.evaluation.metrics.parse.table_parsing as par
    import parse_bench.evaluation.metrics.parse.table_title_stripping as tit
    return par, ext, tit


def _grid(a) -> np.ndarray:
    out = np.empty(a.shape, dtype=object)
    for idx in np.ndindex(a.shape):
        out[idx] = a[idx]
    return out


def to_ours_data(td) -> ours.TableData:
    return ours.TableData(data=_grid(td.data), header_rows=set(td.header_rows), header_cols=set(td.header_cols),
                          col_headers={k: list(v) for k, v in td.col_headers.items()},
                          row_headers={k: list(v) for k, v in td.row_headers.items()},
                          header_cells=set(td.header_cells), context_before=td.context_before,
                          context_after=td.context_after)


def to_ours_hints(h) -> ours.HeaderHints | None:
    if h is None:
        return None
    return ours.HeaderHints(col_header_rows=frozenset(h.col_header_rows), th_title_rows=frozenset(h.th_title_rows),
                            stripped_titles=frozenset(h.stripped_titles))


def to_ours(et) -> ours.ExtractedTable:
    return ours.ExtractedTable(raw_html=et.raw_html, table_data=to_ours_data(et.table_data),
                               header_hints=to_ours_hints(et.header_hints))


def to_upstream_data(td: ours.TableData):
    par, _, _ = _upstream()
    return par.TableData(data=_grid(td.data), header_rows=set(td.header_rows), header_cols=set(td.header_cols),
                         col_headers={k: list(v) for k, v in td.col_headers.items()},
                         row_headers={k: list(v) for k, v in td.row_headers.items()},
                         header_cells=set(td.header_cells), context_before=td.context_before,
                         context_after=td.context_after)


def to_upstream(et: ours.ExtractedTable):
    _, ext, tit = _upstream()
    h = et.header_hints
    hints = None if h is None else tit.HeaderHints(col_header_rows=frozenset(h.col_header_rows),
                                                   th_title_rows=frozenset(h.th_title_rows),
                                                   stripped_titles=frozenset(h.stripped_titles))
    return ext.ExtractedTable(raw_html=et.raw_html, table_data=to_upstream_data(et.table_data), header_hints=hints)


def same_data(a: ours.TableData, b: ours.TableData) -> bool:
    """Equal grids (shape and every cell's text) and equal header records."""
    return (a.data.shape == b.data.shape and all(str(a.data[i]) == str(b.data[i]) for i in np.ndindex(a.data.shape))
            and (a.header_rows, a.header_cols, a.col_headers, a.row_headers, a.header_cells,
                 a.context_before, a.context_after)
            == (b.header_rows, b.header_cols, b.col_headers, b.row_headers, b.header_cells,
                b.context_before, b.context_after))
