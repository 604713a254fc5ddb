"""GriTS-Con, ParseBench's table content score, as upstream computes it per page
(``evaluation/metrics/parse/grits_metric.py`` at the pinned commit, itself after Smock et al., "GriTS: Grid Table
Similarity Metric for Table Structure Recognition", ICDAR 2023): each cell normalized
(``grits_text.normalize_cell_text``); two grids compared by the factored 2D most-similar-substructures
heuristic (rows aligned by dynamic programming where two rows' reward is their cells' best 1-D alignment, columns
the same way, then the cells at aligned rows × aligned columns summed), with a cell pair's reward the
Ratcliff/Obershelp similarity ``2·|matching blocks| / (|a| + |b|)`` of Python's ``difflib`` (upstream's choice,
autojunk included); F-score of that sum against both grids' sizes. A page's truth tables are paired with its
predicted tables by the Hungarian assignment maximizing the summed GriTS (``scipy.optimize.linear_sum_assignment``,
upstream's solver, so ties fall the same way); an unpaired truth table scores 0; the page's GriTS-Con is the mean
over its truth tables.

Written by hand: no package implements GriTS on text grids (table-transformer's reference script is not a
library). The dynamic programs keep upstream's order of float additions and its tie-breaking, so values and
alignments equal upstream's exactly (tests/unit/scoring/test_parsebench_tables_grits.py)."""

from __future__ import annotations

from dataclasses import dataclass, field
from difflib import SequenceMatcher
from functools import lru_cache

import numpy as np

from quantgate.scoring.parsebench.tables.data import ExtractedTable, TableData
from quantgate.scoring.parsebench.tables.grits_text import normalize_cell_text

# upstream's guard: a big table whose row or column count differs from the other's by over 1.5× is scored 0
# without aligning (its O(R1·C1·R2·C2) cost would be minutes for a prediction that is structurally wrong)
MISMATCH_MIN_CELLS = 2500
MISMATCH_MAX_RATIO = 1.5
MISMATCH_SCORE = 0.0


@lru_cache(maxsize=200_000)
def similarity(a: str, b: str) -> float:
    """Ratcliff/Obershelp similarity of two cell texts; 1 for two empty cells."""
    if not a and not b:
        return 1.0
    matched = sum(block.size for block in SequenceMatcher(None, a, b).get_matching_blocks())
    return 2 * matched / (len(a) + len(b))


def _align_scores(rewards: np.ndarray) -> np.ndarray:
    """The best total reward of a monotone 1-D alignment of two sequences, for many pairs of sequences at once:
    ``rewards[a, b, i, j]`` rewards pairing entry i of pair (a, b)'s first sequence with entry j of its second;
    either side may skip. One array step per DP cell does, element by element, the float additions and maxima the
    scalar recursion does (no NaN or -0.0 can occur), so each pair's score is bit-equal to upstream's loop."""
    pairs, (n, m) = rewards.shape[:2], rewards.shape[2:]
    prev = np.zeros((*pairs, m + 1))
    for i in range(n):
        cur = np.zeros((*pairs, m + 1))
        for j in range(m):
            cur[..., j + 1] = np.maximum(np.maximum(prev[..., j] + rewards[..., i, j], prev[..., j + 1]), cur[..., j])
        prev = cur
    return prev[..., m]


def _align_outer(pair_reward, n: int, m: int) -> tuple[list[int], list[int], float]:
    """The outer alignment (rows of one grid with rows of the other, or columns), with its traceback: ties go to
    the pairing, then to skipping the first sequence's entry, as upstream's pointers do."""
    scores = [[0.0] * (m + 1) for _ in range(n + 1)]
    moves = [[0] * (m + 1) for _ in range(n + 1)]  # 0 pair, -1 skip an entry of the first, 1 of the second
    for i in range(1, n + 1):
        moves[i][0] = -1
    for j in range(1, m + 1):
        moves[0][j] = 1
    for i in range(1, n + 1):
        above, here = scores[i - 1], scores[i]
        for j in range(1, m + 1):
            diag = above[j - 1] + pair_reward(i - 1, j - 1)
            up, left = above[j], here[j - 1]
            best = max(diag, up, left)
            here[j] = best
            moves[i][j] = 0 if diag == best else (-1 if up == best else 1)
    first: list[int] = []
    second: list[int] = []
    i, j = n, m
    while i or j:
        if moves[i][j] == -1:
            i -= 1
        elif moves[i][j] == 1:
            j -= 1
        else:
            i, j = i - 1, j - 1
            first.append(i)
            second.append(j)
    return first[::-1], second[::-1], scores[n][m]


def _fscore(matched: float, n_true: int, n_pred: int) -> tuple[float, float, float]:
    precision = matched / n_pred if n_pred > 0 else 1.0
    recall = matched / n_true if n_true > 0 else 1.0
    f = 2 * precision * recall / (precision + recall) if precision + recall > 0 else 0.0
    return f, precision, recall


@dataclass(frozen=True)
class PairGrits:
    """GriTS-Con of one truth table against one predicted table, and the row and column alignments found."""
    grits_con: float
    precision: float
    recall: float
    upper_bound: float
    row_map: dict[int, int] = field(default_factory=dict)  # truth row → predicted row
    col_map: dict[int, int] = field(default_factory=dict)


ZERO = PairGrits(0.0, 0.0, 0.0, 0.0)


def grits_grids(true: list[list[str]], pred: list[list[str]]) -> PairGrits:
    """GriTS-Con of two normalized text grids (each non-empty, rows of equal length)."""
    r1, c1, r2, c2 = len(true), len(true[0]), len(pred), len(pred[0])
    # each distinct pair of texts compared once (empty cells, repeated headers and spans repeat a lot)
    t_texts, t_index = np.unique(np.array(true, dtype=object).ravel(), return_inverse=True)
    p_texts, p_index = np.unique(np.array(pred, dtype=object).ravel(), return_inverse=True)
    distinct = np.array([[similarity(a, b) for b in p_texts] for a in t_texts], dtype=np.float64)
    sim = distinct[t_index][:, p_index].reshape(r1, c1, r2, c2)  # sim[tr, tc, pr, pc]
    rows = _align_scores(sim.transpose(0, 2, 1, 3)).tolist()  # truth row × predicted row
    cols = _align_scores(sim.transpose(1, 3, 0, 2)).tolist()  # truth column × predicted column
    true_rows, pred_rows, rows_score = _align_outer(lambda i, j: rows[i][j], r1, r2)
    true_cols, pred_cols, cols_score = _align_outer(lambda i, j: cols[i][j], c1, c2)
    n_true, n_pred = r1 * c1, r2 * c2
    upper, _, _ = _fscore(min(rows_score, cols_score), n_true, n_pred)
    matched = 0.0
    for tr, pr in zip(true_rows, pred_rows, strict=False):
        for tc, pc in zip(true_cols, pred_cols, strict=False):
            matched += float(sim[tr, tc, pr, pc])  # in upstream's order of additions
    f, precision, recall = _fscore(matched, n_true, n_pred)
    return PairGrits(f, precision, recall, upper, dict(zip(true_rows, pred_rows, strict=True)),
                     dict(zip(true_cols, pred_cols, strict=True)))


def _normalized(td: TableData) -> list[list[str]]:
    rows, cols = td.data.shape
    return [[normalize_cell_text(str(td.data[r, c])) for c in range(cols)] for r in range(rows)]


def table_grits(truth: TableData, pred: TableData) -> PairGrits | None:
    """GriTS-Con of two parsed tables; None when either grid is empty (upstream then scores the pair 0)."""
    if truth.data.size == 0 or pred.data.size == 0:
        return None
    (tr, tc), (pr, pc) = truth.data.shape, pred.data.shape
    if max(tr * tc, pr * pc) >= MISMATCH_MIN_CELLS:
        ratios = (max(tr, pr) / max(min(tr, pr), 1), max(tc, pc) / max(min(tc, pc), 1))
        if max(ratios) > MISMATCH_MAX_RATIO:
            s = MISMATCH_SCORE
            return PairGrits(s, s, s, s)
    return grits_grids(_normalized(truth), _normalized(pred))


@dataclass(frozen=True)
class GritsResult:
    """A page's GriTS-Con: the mean over its truth tables (None never: a page with truth tables always scores;
    the field is optional for callers that carry "no tables"), the truth → prediction pairing (one entry per truth
    table, None where unpaired) and each truth table's pair score in upstream's order (paired ones in the
    assignment's order, then the unpaired)."""
    value: float | None
    pairing: list[tuple[int, int | None]]
    per_table: list[tuple[int, int | None, PairGrits]] = field(default_factory=list)


def grits_con(expected: list[ExtractedTable], actual: list[ExtractedTable]) -> GritsResult:
    """The page's GriTS-Con and pairing. No truth table: 0 with an empty pairing; no predicted table: 0 with
    every truth table unpaired (upstream's values; the page pipeline decides before this whether a page is
    scored at all)."""
    if not expected:
        return GritsResult(0.0, [])
    if not actual:
        return GritsResult(0.0, [(i, None) for i in range(len(expected))])
    from scipy.optimize import linear_sum_assignment

    pairs = {(i, j): table_grits(t.table_data, p.table_data) or ZERO
             for i, t in enumerate(expected) for j, p in enumerate(actual)}
    cost = np.zeros((len(expected), len(actual)))
    for (i, j), g in pairs.items():
        cost[i, j] = -g.grits_con
    rows, cols = linear_sum_assignment(cost)
    matched = {int(i): int(j) for i, j in zip(rows, cols, strict=True)}
    per_table: list[tuple[int, int | None, PairGrits]] = [(i, j, pairs[(i, j)]) for i, j in matched.items()]
    per_table += [(i, None, ZERO) for i in range(len(expected)) if i not in matched]
    scores = [g.grits_con for *_, g in per_table]
    return GritsResult(sum(scores) / len(scores), [(i, matched.get(i)) for i in range(len(expected))], per_table)
