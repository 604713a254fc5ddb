"""TableRecordMatch's header side, as upstream's ``table_record_match_metric`` reads it: a column key per column
(its header rows' text joined, or a positional ``col_N``), the rows that hold records, and the fuzzy alignment of
one table's keys to the other's (rapidfuzz ratio, Hungarian assignment through scipy, as upstream). Also the three
repairs upstream tries before giving up on a pair: a prediction's unmarked header row promoted, a prediction's
headers demoted when the truth has none, and a section-header row promoted on either side. Written by hand
because no package implements ParseBench's rules."""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
from rapidfuzz import fuzz
from scipy.optimize import linear_sum_assignment

from quantgate.scoring.parsebench.tables.data import HeaderHints, TableData
from quantgate.scoring.parsebench.tables.records_norm import is_empty_or_nan, trm_cell_text
from quantgate.scoring.parsebench.text import normalize

SYNTHETIC_KEY_PREFIX = "col_"
KEY_SEPARATOR = " "
COLUMN_MATCH_THRESHOLD = 0.9  # header similarity (rapidfuzz ratio / 100) for two columns to be the same column
# a dash with spaces round it joins a flattened hierarchical header ("Group A - B" is "Group A B")
_HIERARCHY_DASH = re.compile(r"\s+[-\u2010\u2011\u2012\u2013\u2014\u2015\u2212]\s+")


@dataclass(frozen=True)
class HeaderInfo:
    """One table's header reading: its column keys (which of them are placeholders) and the rows that are
    headers or titles."""
    keys: list[str]
    synthetic_keys: frozenset[str]
    col_header_rows: frozenset[int]
    th_title_rows: frozenset[int]
    td_title_rows: frozenset[int]
    stripped_titles: frozenset[str]


EMPTY_HEADER = HeaderInfo([], frozenset(), frozenset(), frozenset(), frozenset(), frozenset())


def disambiguate_keys(raw: list[str]) -> list[str]:
    """A repeated key becomes key_0, key_1, …, so each column keeps a key of its own."""
    seen: dict[str, int] = {}
    out: list[str] = []
    for k in raw:
        seen[k] = seen[k] + 1 if k in seen else 0
        out.append(f"{k}_{seen[k]}" if seen[k] else k)
    for k, count in seen.items():
        if count:
            out[raw.index(k)] = f"{k}_0"
    return out


def build_column_keys(td: TableData, col_header_rows: set[int] | frozenset[int],
                      title_rows: set[int] | frozenset[int]) -> tuple[list[str], frozenset[str]]:
    """Each column's key: its header-row texts (title rows left out) top to bottom, joined by a space; a column
    without header text gets ``col_<index>``. Returns the keys and the set of those placeholder keys."""
    raw: list[str] = []
    synthetic: set[int] = set()
    for c in range(td.data.shape[1]):
        parts = sorted(((r, t) for r, t in td.col_headers.get(c) or []
                        if r in col_header_rows and r not in title_rows), key=lambda p: p[0])
        key = KEY_SEPARATOR.join(t for _, t in parts if t.strip())
        if not key:
            key = f"{SYNTHETIC_KEY_PREFIX}{c}"
            synthetic.add(c)
        raw.append(key)
    keys = disambiguate_keys(raw)
    return keys, frozenset(keys[c] for c in synthetic)


def header_from_hints(td: TableData, hints: HeaderHints) -> HeaderInfo:
    """The header reading of a title-stripped (and normalized) table: the geometry as title stripping found it,
    the keys rebuilt from this table. The titles were normalized by title stripping already: normalizing them
    again would not be a no-op ("1,2,3" → "12,3" → "123")."""
    if td.data.size == 0:
        return EMPTY_HEADER
    keys, synthetic = build_column_keys(td, hints.col_header_rows, hints.th_title_rows)
    return HeaderInfo(keys, synthetic, frozenset(hints.col_header_rows), frozenset(hints.th_title_rows),
                      frozenset(), frozenset(t for t in hints.stripped_titles if t))


def data_row_indices(header: HeaderInfo, n_rows: int) -> list[int]:
    """Rows that hold records: not header rows, not titles, except a title closing a header block of several rows
    (a section label such as "SPINAL DISORDERS"), which is data."""
    emitted: set[int] = set()
    if len(header.col_header_rows) > 1 and header.th_title_rows and max(header.col_header_rows) in header.th_title_rows:
        emitted.add(max(header.col_header_rows))
    headers = header.col_header_rows - emitted
    return [r for r in range(n_rows) if r not in headers and r not in header.td_title_rows]


def _match_key(key: str) -> str:
    return _HIERARCHY_DASH.sub(" ", key).lower()


def _align_core(gt_keys: list[str], pred_keys: list[str], gt_synthetic: frozenset[str],
                pred_synthetic: frozenset[str]) -> tuple[dict[str, str], float]:
    gt_norm, pred_norm = [_match_key(k) for k in gt_keys], [_match_key(k) for k in pred_keys]
    sim = np.zeros((len(gt_keys), len(pred_keys)))
    for i, gk in enumerate(gt_keys):
        g_empty = is_empty_or_nan(gk) or gk in gt_synthetic
        for j, pk in enumerate(pred_keys):
            # a placeholder (or empty) key only ever matches another placeholder
            if g_empty == (is_empty_or_nan(pk) or pk in pred_synthetic):
                sim[i, j] = fuzz.ratio(gt_norm[i], pred_norm[j]) / 100.0
    rows, cols = linear_sum_assignment(-sim)
    mapping: dict[str, str] = {}
    scores: list[float] = []
    for r, c in zip(rows, cols, strict=True):
        if sim[r, c] >= COLUMN_MATCH_THRESHOLD:
            mapping[gt_keys[r]] = pred_keys[c]
            scores.append(sim[r, c])
    return mapping, float(np.mean(scores)) if scores else 0.0


def _strip_prefix(keys: list[str], synthetic: frozenset[str], title: str) -> tuple[list[str], frozenset[str]] | None:
    prefix = title + KEY_SEPARATOR
    if not any(k.startswith(prefix) for k in keys):
        return None
    stripped = [k[len(prefix):] if k.startswith(prefix) else k for k in keys]
    return stripped, frozenset(s for s, k in zip(stripped, keys, strict=True) if k in synthetic)


def align_columns(gt: HeaderInfo, pred: HeaderInfo) -> tuple[dict[str, str], float]:
    """Truth key → predicted key for the columns whose headers match, and their mean similarity. When fewer than
    half the columns match, a title one side stripped may still prefix the other side's keys (one side kept
    "Months of Development 3", the other wrote "3"): that prefix is removed and the larger mapping kept."""
    if not gt.keys or not pred.keys:
        return {}, 0.0
    best = _align_core(gt.keys, pred.keys, gt.synthetic_keys, pred.synthetic_keys)
    least = min(len(gt.keys), len(pred.keys))
    if least <= 1 or len(best[0]) >= least * 0.5:
        return best
    for title in pred.stripped_titles:
        trial = _strip_prefix(gt.keys, gt.synthetic_keys, title)
        if trial is not None:
            mapping, score = _align_core(trial[0], pred.keys, trial[1], pred.synthetic_keys)
            original = dict(zip(trial[0], gt.keys, strict=True))
            mapping = {original[k]: v for k, v in mapping.items()}
            if len(mapping) > len(best[0]):
                best = mapping, score
    for title in gt.stripped_titles:
        trial = _strip_prefix(pred.keys, pred.synthetic_keys, title)
        if trial is not None:
            mapping, score = _align_core(gt.keys, trial[0], gt.synthetic_keys, trial[1])
            original = dict(zip(trial[0], pred.keys, strict=True))
            mapping = {k: original[v] for k, v in mapping.items()}
            if len(mapping) > len(best[0]):
                best = mapping, score
    return best


def promote_section_row(td: TableData, header: HeaderInfo) -> HeaderInfo | None:
    """The row just under the header block, when it holds one value (a spanning section label), read as one more
    header row; None when there is no such row."""
    if not header.col_header_rows:
        return None
    row = max(header.col_header_rows) + 1
    if row >= td.data.shape[0]:
        return None
    if len({v for v in (str(x).strip() for x in td.data[row, :]) if v}) != 1:
        return None
    rows = header.col_header_rows | {row}
    keys, synthetic = build_column_keys(td, rows, header.th_title_rows)
    return HeaderInfo(keys, synthetic, rows, header.th_title_rows, header.td_title_rows, header.stripped_titles)


def recover_pred_header(gt: HeaderInfo, td: TableData, pred: HeaderInfo) -> HeaderInfo | None:
    """A prediction with no header text whose first record row names a truth column (a header written as <td>):
    that row becomes its header row. None when the truth has no real keys, the prediction has some, or no value
    of the row matches."""
    if not set(gt.keys) - gt.synthetic_keys or not set(pred.keys) <= pred.synthetic_keys:
        return None
    rows = data_row_indices(pred, td.data.shape[0])
    if not rows:
        return None
    first = [str(v).strip() for v in td.data[rows[0], :]]
    real = {k.lower() for k in gt.keys if k not in gt.synthetic_keys}
    if not any(fuzz.ratio(v.lower(), k) / 100.0 >= COLUMN_MATCH_THRESHOLD for v in first if v for k in real):
        return None
    keys = disambiguate_keys([v if v else f"{SYNTHETIC_KEY_PREFIX}{c}" for c, v in enumerate(first)])
    return HeaderInfo(keys, frozenset(k for c, k in enumerate(keys) if not first[c]), pred.col_header_rows | {rows[0]},
                      pred.th_title_rows, pred.td_title_rows, pred.stripped_titles)


def demote_pred_header(gt: HeaderInfo, td: TableData, pred: HeaderInfo) -> HeaderInfo:
    """The truth is authoritative: when it has no header text, the prediction's header (and title) rows are read
    as records under positional keys."""
    if not set(gt.keys) <= gt.synthetic_keys or not set(pred.keys) - pred.synthetic_keys:
        return pred
    keys = [f"{SYNTHETIC_KEY_PREFIX}{c}" for c in range(td.data.shape[1])]
    return HeaderInfo(keys, frozenset(keys), frozenset(), frozenset(), frozenset(), frozenset())


def header_row_values(td: TableData, header: HeaderInfo) -> list[list[str]]:
    """Each header row's text per column (a colspan's text in every column it covers), normalized, top to
    bottom: what the merged-table splitter compares to find a repeating header."""
    lookup = {(c, r): trm_cell_text(normalize(t.strip())) for c, entries in td.col_headers.items() for r, t in entries}
    return [[lookup.get((c, r), "") for c in range(td.data.shape[1])] for r in sorted(header.col_header_rows)]
