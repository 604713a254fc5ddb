"""Pairing a page's truth blocks with its predicted blocks of one category, as OmniDocBench's end-to-end
protocol does (the behaviour of upstream's utils/match_quick.py and match.py at 24e6428, re-implemented).

``quick_match`` (text and formulas): a prediction split into consecutive pieces may be joined to match one
truth block; an optimal one-to-one assignment on normalised edit distance follows; a truth block left
unmatched may still be found inside a longer prediction; what remains is paired off by raw edit distance.
Its observable quirks are kept because the published numbers were computed with them (docs/metrics.md):
a prediction whose truth blocks were all claimed elsewhere disappears, predictions left over when the
truth runs out disappear, and when every prediction is used each unmatched truth block counts twice.

``assignment_match`` (tables): the optimal one-to-one assignment alone.

Both take normalised, non-empty strings and return pairs of index tuples: ``((), (j,))`` is a prediction
with no truth, ``((i,), ())`` truth with nothing predicted."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# The protocol's thresholds, on normalised edit distance (edits / longer length):
MATCHED_OUTRIGHT = 0.25  # a pair this close takes both blocks out of the split-prediction search
PIECE_FITS = 0.6  # a piece of a split prediction must fit somewhere in the truth this well
ACCEPTED = 0.7  # an assigned pair further apart than this is not a match
FOUND_INSIDE = 0.4  # a truth block found inside a prediction this well belongs to it

Pair = tuple[tuple[int, ...], tuple[int, ...]]


def _lev(a, b, cutoff: int | None = None) -> int:
    from rapidfuzz.distance import Levenshtein

    return Levenshtein.distance(a, b, score_cutoff=cutoff)


def ned(a: str, b: str) -> float:
    """Normalised edit distance: edits / the longer length (both empty: 0)."""
    longest = max(len(a), len(b))
    return _lev(a, b) / longest if longest else 0.0


def ned_matrix(rows: list[str], cols: list[str]) -> np.ndarray:
    from rapidfuzz.distance import Levenshtein
    from rapidfuzz.process import cdist

    dist = cdist(rows, cols, scorer=Levenshtein.distance, dtype=np.int64, workers=1)
    longest = np.maximum.outer(np.array([len(r) for r in rows]), np.array([len(c) for c in cols]))
    return np.divide(dist, longest, out=np.zeros(dist.shape), where=longest > 0)


def best_window(haystack: str, needle: str) -> float | None:
    """The fewest edits turning some stretch of ``haystack`` as long as ``needle`` into ``needle``, per
    character of ``needle``; None when ``needle`` is empty or longer than ``haystack``."""
    n = len(needle)
    if n == 0 or len(haystack) < n:
        return None
    best = n
    for i in range(len(haystack) - n + 1):
        best = min(best, _lev(haystack[i:i + n], needle, cutoff=best))
        if best == 0:
            break
    return best / n


def _extend_verdict(truth: str, pieces: list[str]) -> tuple[bool, bool]:
    """Whether adding the last piece to the ones before brings the join closer to ``truth`` (and every
    piece fits inside it), and whether to try one more piece after it."""
    if len(pieces) < 2:
        return False, False
    if ned(truth, " ".join(pieces)) > ned(truth, " ".join(pieces[:-1])):
        return False, False
    for piece in pieces[:-1]:
        fit = best_window(truth, piece)
        if fit is None or fit > PIECE_FITS:
            return False, False
    fit = best_window(truth, pieces[-1])
    if fit is None:
        return False, False
    return fit < PIECE_FITS, len(" ".join(pieces)) <= len(truth)


@dataclass
class _Candidate:
    span: tuple[int, ...]  # consecutive prediction indices
    cost: float


def _best_join(truth: str, pred: list[str], start: int, blocked: set[int]) -> _Candidate:
    end = start + 1
    while end < len(pred) and end not in blocked:
        extend, more = _extend_verdict(truth, pred[start:end + 1])
        if not extend:
            break
        end += 1
        if not more:
            break
    return _Candidate(tuple(range(start, end)), ned(truth, " ".join(pred[start:end])))


def _pick_disjoint(candidates: list[_Candidate]) -> list[tuple[int, ...]]:
    """Among overlapping joins, a set of mutually disjoint ones with the lowest mean cost. Candidates
    sorted by first index are clustered by overlap with the cluster being built; within a cluster each
    candidate joins every chain it does not overlap (an identical span keeps the cheaper cost), or
    starts a chain of its own; the cheapest chain on average wins (the first, on a tie)."""
    ordered = sorted(candidates, key=lambda c: c.span[0])
    clusters: list[list[_Candidate]] = []
    for cand in ordered:
        if clusters and any(set(cand.span) & set(c.span) for c in clusters[-1]):
            clusters[-1].append(cand)
        else:
            clusters.append([cand])
    chosen: list[tuple[int, ...]] = []
    for cluster in clusters:
        chains = [[cluster[0]]]
        for cand in cluster[1:]:
            placed = False
            for chain in chains:
                same = next((k for k, c in enumerate(chain) if c.span == cand.span), None)
                if same is not None:
                    if chain[same].cost > cand.cost:
                        del chain[same]
                        chain.append(cand)
                    placed = True
                elif not any(set(c.span) & set(cand.span) for c in chain):
                    chain.append(cand)
                    placed = True
            if not placed:
                chains.append([cand])
        best = min(chains, key=lambda ch: sum(c.cost for c in ch) / len(ch))
        chosen += [c.span for c in best]
    return chosen


def _columns(cost: np.ndarray, truth: list[str], pred: list[str]) -> list[tuple[int, ...]]:
    """The prediction as matching columns: single blocks, and runs of consecutive blocks joined because
    together they match a truth block that no single block matched outright."""
    close = cost < MATCHED_OUTRIGHT
    taken_truth, taken_pred = set(np.nonzero(close.any(axis=1))[0]), set(np.nonzero(close.any(axis=0))[0])
    free_pred = [j for j in range(len(pred)) if j not in taken_pred]
    candidates = []
    for i in range(len(truth)):
        if i in taken_truth or not free_pred:
            continue
        best = None
        for j in free_pred:
            cand = _best_join(truth[i], pred, j, taken_pred)
            if best is None or cand.cost < best.cost:
                best = cand
        candidates.append(best)
    joins = {span[0]: span for span in _pick_disjoint(candidates)}
    columns, j = [], 0
    while j < len(pred):
        span = joins.get(j, (j,))
        columns.append(span)
        j = span[-1] + 1
    return columns


def quick_match(truth: list[str], pred: list[str], v15: bool = False) -> list[Pair]:
    """``v15``: the leftovers as OmniDocBench v1.5 (upstream 523fd1d) pairs them — by normalised rather than raw
    edit distance, and an unmatched truth block counted once rather than twice."""
    from scipy.optimize import linear_sum_assignment

    if not truth:
        return [((), (j,)) for j in range(len(pred))]
    if not pred:
        return [((i,), ()) for i in range(len(truth))]
    if len(truth) == 1 and len(pred) == 1:
        return [((0,), (0,))]
    columns = _columns(ned_matrix(truth, pred), truth, pred)
    cost = ned_matrix(truth, [" ".join(pred[k] for k in span) for span in columns])
    accepted = {int(r): columns[c] for r, c in zip(*linear_sum_assignment(cost), strict=True) if cost[r, c] <= ACCEPTED}

    groups: dict[tuple[int, ...], list[int]] = {}  # prediction span -> truth blocks, in creation order
    for i in sorted(accepted):
        groups.setdefault(accepted[i], []).append(i)
    placed = set(accepted)
    unaccepted = [i for i in range(len(truth)) if i not in accepted]
    for j, p in enumerate(pred):
        inside = [i for i in unaccepted if (w := best_window(p, truth[i])) is not None and w < FOUND_INSIDE]
        if inside:
            fresh = [i for i in inside if i not in placed]
            groups.setdefault((j,), []).extend(fresh)  # may stay empty: the prediction is then dropped
            placed.update(fresh)

    pairs: list[Pair] = [(tuple(sorted(set(g))), span) for span, g in groups.items() if g]
    used_pred = {j for span in groups for j in span}
    # Upstream walks the leftover indices as Python sets (match_quick.convert_final_matches), so where blocks tie
    # in the assignment below it takes the one CPython's set order puts first (e.g. {4, 5, 7, 8} iterates 8
    # first); the same set operations give the same order here. Blocks then listed in index order are sorted.
    left_truth = list(set(range(len(truth))) - placed)
    left_pred = list(set(range(len(pred))) - used_pred)
    if left_pred and left_truth:
        dist = np.array([[(ned if v15 else _lev)(truth[i], pred[j]) for j in left_pred] for i in left_truth])
        rows, cols = linear_sum_assignment(dist)
        pairs += [((left_truth[r],), (left_pred[c],)) for r, c in zip(rows, cols, strict=True)]
        assigned = {left_truth[r] for r in rows}
        pairs += [((i,), ()) for i in sorted(left_truth) if i not in assigned]
    elif left_pred:
        pairs.append(((), tuple(sorted(left_pred))))
    elif v15:
        pairs += [((i,), ()) for i in sorted(left_truth)]
    else:  # each twice: once in set order, once in index order (merge_duplicates_add_unmatched)
        pairs += [((i,), ()) for i in left_truth] + [((i,), ()) for i in sorted(left_truth)]
    return pairs


def assignment_match(truth: list[str], pred: list[str]) -> list[Pair]:
    """Each truth block with its optimal partner (by normalised edit distance), or with nothing."""
    from scipy.optimize import linear_sum_assignment

    if not pred:
        return [((i,), ()) for i in range(len(truth))]
    cost = ned_matrix(truth, pred)
    partner = {int(r): int(c) for r, c in zip(*linear_sum_assignment(cost), strict=True)}
    return [((i,), (partner[i],) if i in partner else ()) for i in range(len(truth))]
