"""TableRecordMatch (TRM), ParseBench's table score that reads a table as what it means: a list of records (one
per data row, column key → cell value). The truth's records are matched one to one with the prediction's
(Hungarian assignment through scipy, as upstream) and a pair scores the share of the two tables' column union
whose cells agree exactly after normalization; a table scores the matched pairs' sum over the larger record
count, and a page the mean over its truth tables, each paired to a prediction by GriTS-Con. Follows upstream's
``table_record_match_metric`` (``TableRecordMatchMetric.compute_extracted``) step by step; written by hand
because no package implements ParseBench's rules."""

from __future__ import annotations

import numpy as np
from scipy.optimize import linear_sum_assignment

from quantgate.scoring.parsebench.tables.data import ExtractedTable, HeaderHints, TableData
from quantgate.scoring.parsebench.tables.records_headers import (
    HeaderInfo,
    align_columns,
    data_row_indices,
    demote_pred_header,
    header_from_hints,
    promote_section_row,
    recover_pred_header,
)
from quantgate.scoring.parsebench.tables.records_norm import is_empty_or_nan, normalize_table
from quantgate.scoring.parsebench.tables.titles import NO_HINTS, strip_title_rows

__all__ = ["build_records", "match_records", "similarity_matrix", "normalize_table", "score_table_pair", "table_record_match"]

Record = dict[str, str]


def build_records(td: TableData, header: HeaderInfo) -> list[Record]:
    """One record per data row, keyed by column; a record with every cell blank is padding and left out."""
    if td.data.size == 0:
        return []
    records = [dict(zip(header.keys, (str(v) for v in td.data[r, :]), strict=True))
               for r in data_row_indices(header, td.data.shape[0])]
    return [rec for rec in records if any(v.strip() for v in rec.values())]


def similarity_matrix(gt: list[Record], pred: list[Record], mapping: dict[str, str], n_gt_cols: int,
                      n_pred_cols: int, zero_columns: frozenset[str]) -> np.ndarray:
    """Each truth record's similarity to each predicted one: its agreeing matched cells over the two tables'
    column union (a column on one side only counts, as 0, so missing and extra columns cost alike; a real truth
    column matched to a headerless one scores 0). Computed a column at a time, each value coded so all empty
    sentinels share one code, and compared by broadcasting: each entry is the same integer count over the same
    union size as upstream's cell-by-cell loop, so the same float, without a Python loop over every pair of
    records and every column (a 1,000-row table pair took seconds that way)."""
    sim = np.zeros((len(gt), len(pred)))
    total = n_gt_cols + n_pred_cols - len(mapping)
    if not mapping or total == 0:
        return sim
    codes: dict[str, int] = {}

    def coded(values: list[str]) -> np.ndarray:
        return np.array([0 if is_empty_or_nan(v) else codes.setdefault(v, len(codes) + 1) for v in values])

    agreed = np.zeros((len(gt), len(pred)), dtype=np.int64)
    for g, p in mapping.items():
        if g not in zero_columns:
            agreed += coded([r.get(g, "") for r in gt])[:, None] == coded([r.get(p, "") for r in pred])[None, :]
    return agreed / total


def match_records(gt: list[Record], pred: list[Record], mapping: dict[str, str], n_gt_cols: int, n_pred_cols: int,
                  zero_columns: frozenset[str]) -> float:
    """The best one-to-one record matching's similarity sum over the larger record count (1 when both tables
    have no records, 0 when one has none)."""
    if not gt and not pred:
        return 1.0
    if not gt or not pred:
        return 0.0
    sim = similarity_matrix(gt, pred, mapping, n_gt_cols, n_pred_cols, zero_columns)
    rows, cols = linear_sum_assignment(-sim)
    return sum(sim[r, c] for r, c in zip(rows, cols, strict=True)) / max(len(gt), len(pred))


def score_table_pair(gt_td: TableData, pred_td: TableData, gt_hints: HeaderHints, pred_hints: HeaderHints) -> float:
    """One truth table against its paired prediction (both title-stripped)."""
    gt_td, pred_td = normalize_table(gt_td), normalize_table(pred_td)
    gt = header_from_hints(gt_td, gt_hints)
    pred = header_from_hints(pred_td, pred_hints)
    pred = recover_pred_header(gt, pred_td, pred) or pred
    pred = demote_pred_header(gt, pred_td, pred)
    mapping, alignment = align_columns(gt, pred)
    # a spanning section row under the header block may be the header level the other side kept: tried on
    # each side in turn, kept when it matches more columns (or as many, more closely)
    for is_gt, td in ((True, gt_td), (False, pred_td)):
        promoted = promote_section_row(td, gt if is_gt else pred)
        if promoted is None:
            continue
        trial, score = align_columns(promoted, pred) if is_gt else align_columns(gt, promoted)
        if len(trial) > len(mapping) or (len(trial) == len(mapping) and score > alignment):
            mapping, alignment = trial, score
            gt, pred = (promoted, pred) if is_gt else (gt, promoted)
    if not mapping:
        return 0.0
    zero = frozenset(g for g, p in mapping.items()
                     if g not in gt.synthetic_keys and not is_empty_or_nan(g)
                     and (p in pred.synthetic_keys or is_empty_or_nan(p)))
    gt_records = build_records(gt_td, gt)
    if not gt_records:
        return 0.0
    return float(match_records(gt_records, build_records(pred_td, pred), mapping, len(gt.keys), len(pred.keys),
                               zero))


def table_record_match(expected: list[ExtractedTable], actual: list[ExtractedTable],
                       pairing: list[tuple[int, int | None]]) -> float | None:
    """A page's TRM: the mean over ``pairing`` (truth table → its GriTS-Con partner, or None) of each pair's
    score, an unpaired truth table scoring 0. None when the page has no truth table (upstream emits no value);
    0 when the prediction has none. Tables without hints are title-stripped here first, as upstream does."""
    if not expected:
        return None
    if not actual:
        return 0.0
    expected = [et if et.header_hints is not None else strip_title_rows(et) for et in expected]
    actual = [et if et.header_hints is not None else strip_title_rows(et) for et in actual]
    scores: list[float] = []
    for g, p in pairing:
        if p is None or p >= len(actual) or g >= len(expected):
            scores.append(0.0)
            continue
        gt_et, pred_et = expected[g], actual[p]
        scores.append(score_table_pair(gt_et.table_data, pred_et.table_data, gt_et.header_hints or NO_HINTS,
                                       pred_et.header_hints or NO_HINTS))
    return float(np.mean(scores)) if scores else 0.0
