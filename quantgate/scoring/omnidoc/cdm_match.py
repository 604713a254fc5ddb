"""CDM's matching and score (Character Detection Matching, OmniDocBench v1.5's formula metric, upstream
``metrics/cdm/modules/visual_matcher.py`` and ``metrics/cdm_metric.py`` at 523fd1d, re-implemented from reading
them): given the tokens of a truth and a predicted formula, each with the box the renderer found for it, how many
tokens match, as an F1.

Why it works this way (upstream's design, kept because parity is the point):

* One assignment (scipy's Hungarian ``linear_sum_assignment``) pairs truth and predicted tokens on a cost of three
  parts: the token (0 same, 0.05 the same after :func:`same_token`, else 1), the boxes' L1 distance in coordinates
  normalised by each image's size (weight 0.05), and the tokens' relative positions in reading order (weight 0.15).
* A pair only counts if its place fits one layout: RANSAC (scikit-image's ``ransac``, seeded 42, 3 points,
  residual 25 px, 50 trials) fits a translation and scale of the truth's box centres onto the prediction's; the
  pairs it leaves out get up to two more fits of their own (a formula set in two parts, e.g. two lines, may move
  each part differently). With 3 pairs or fewer there is nothing to fit and every pair fits.
* A fitting pair whose tokens differ (cost 1) still does not count. F1 = 2·matched / (truth tokens + predicted
  tokens), rounded to 3 decimals as upstream rounds it; a side with no token scores 0 (upstream divides by zero
  there and its caller records 0).

scikit-image's model protocol changed after the 0.20 upstream pins (``rng`` for ``random_state``; an
``estimate()`` returning None now means failure): :class:`_ShiftScale` speaks the new one, and the sampling is the
same ``default_rng(42).choice`` sequence, so the fits are upstream's (the demo's recorded boxes check it)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

# the matcher's weights and the fit's settings, as upstream sets them
TOKEN_WEIGHT, POSITION_WEIGHT, ORDER_WEIGHT = 1.0, 0.05, 0.15
SAME_AFTER_NORMALISING = 0.05
FIT_ROUNDS, FIT_POINTS, FIT_RESIDUAL_PX, FIT_TRIALS, FIT_SEED = 3, 3, 25, 50, 42

# tokens that render alike: upstream's table of synonyms, then its prefix rules (same_token)
_SYNONYMS = {"\\cdot": ".", "\\mid": "|", "\\to": "\\rightarrow", "\\top": "T", "\\Tilde": "\\tilde",
             "\\cdots": "\\dots", "\\prime": "'", "\\ast": "*", "\\left<": "\\langle", "\\right>": "\\rangle"}


class TokenBox(NamedTuple):
    """One rendered token: its LaTeX and its box (x_min, y_min, x_max, y_max) in pixels of its formula's image."""

    token: str
    box: tuple[float, float, float, float]


class CdmScore(NamedTuple):
    recall: float
    precision: float
    f1: float


def same_token(token: str) -> str:
    """The form two tokens share when they render alike (``\\leq`` and ``\\le``, ``\\Bigl(`` and ``(``, …)."""
    token = _SYNONYMS.get(token, token)
    if token.startswith(("\\left", "\\right")):
        token = token.replace("\\left", "").replace("\\right", "")
    if token.startswith(("\\big", "\\Big")):
        rest = token[4:]
        token = "\\" + rest.split("\\")[-1] if "\\" in rest else token[-1]
    if token in ("\\leq", "\\geq"):
        return token[:-1]
    if token in ("\\lVert", "\\rVert", "\\Vert"):
        return "\\|"
    if token in ("\\lvert", "\\rvert", "\\vert"):
        return "|"
    if token.endswith("rightarrow"):
        return "\\rightarrow"
    if token.endswith("leftarrow"):
        return "\\leftarrow"
    if token.startswith("\\wide"):
        return token.replace("wide", "")
    if token.startswith("\\var"):
        return token.replace("\\var", "")
    return token


def token_cost(gt: Sequence[str], pred: Sequence[str]) -> np.ndarray:
    """truth × prediction: 0 for the same token, 0.05 for the same after :func:`same_token`, else 1."""
    cost = np.ones((len(gt), len(pred)))
    gt_norm, pred_norm = [same_token(t) for t in gt], [same_token(t) for t in pred]
    for i, (a, a_norm) in enumerate(zip(gt, gt_norm, strict=True)):
        for j, (b, b_norm) in enumerate(zip(pred, pred_norm, strict=True)):
            if a == b:
                cost[i, j] = 0.0
            elif a_norm == b_norm:
                cost[i, j] = SAME_AFTER_NORMALISING
    return cost


def _l1(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    from scipy.spatial.distance import cdist

    # minkowski with p=1 rather than cityblock: the same metric, computed as upstream does to the last bit, so
    # the assignment breaks ties as upstream's does
    return cdist(a, b, "minkowski", p=1) / a.shape[-1]


def _boxes(boxes: Sequence[TokenBox], size: tuple[int, int]) -> np.ndarray:
    w, h = size
    return np.array([[b.box[0] / w, b.box[1] / h, b.box[2] / w, b.box[3] / h] for b in boxes])


def _order(n: int) -> np.ndarray:
    return np.array([[i / n] for i in range(n)])


def assign(gt: Sequence[TokenBox], pred: Sequence[TokenBox], gt_size: tuple[int, int],
           pred_size: tuple[int, int]) -> tuple[list[tuple[int, int]], np.ndarray]:
    """The Hungarian pairs (truth index, prediction index) and the token cost matrix they were chosen on."""
    from scipy.optimize import linear_sum_assignment

    tokens = token_cost([b.token for b in gt], [b.token for b in pred])
    cost = (TOKEN_WEIGHT * tokens + POSITION_WEIGHT * _l1(_boxes(gt, gt_size), _boxes(pred, pred_size))
            + ORDER_WEIGHT * _l1(_order(len(gt)), _order(len(pred))))
    cost[np.isnan(cost) | np.isinf(cost)] = 100
    rows, cols = linear_sum_assignment(cost)
    return [(int(i), int(j)) for i, j in zip(rows, cols, strict=True)], tokens


class _ShiftScale:
    """Truth box centres onto predicted ones by a shift and one scale about their mean: upstream's
    ``SimpleAffineTransform``, in scikit-image's current model protocol."""

    def __init__(self, shift: np.ndarray, scale: float) -> None:
        self.shift, self.scale = shift, scale

    @classmethod
    def from_estimate(cls, src: np.ndarray, dst: np.ndarray) -> _ShiftScale:
        src_mid, dst_mid = np.mean(src, axis=0), np.mean(dst, axis=0)
        spread = np.mean(np.linalg.norm(dst - dst_mid, axis=1)) / (np.mean(np.linalg.norm(src - src_mid, axis=1))
                                                                    + 1e-10)
        return cls(dst_mid - src_mid, spread)

    def residuals(self, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
        # the scale is about the mean of the points it is applied to (all pairs here), as upstream applies it
        mid = np.mean(src, axis=0)
        moved = self.scale * (src - mid) + mid + self.shift
        return np.sqrt(np.sum((moved - dst) ** 2, axis=1))


def fitting(pairs: list[tuple[int, int]], gt: Sequence[TokenBox], pred: Sequence[TokenBox]) -> np.ndarray:
    """Which pairs fit a layout: up to :data:`FIT_ROUNDS` RANSAC fits, each on the pairs no earlier fit took."""
    from skimage.measure import ransac

    def centre(b: TokenBox) -> list[float]:
        x0, y0, x1, y1 = b.box
        return [float((y0 + y1) / 2), float((x0 + x1) / 2)]

    src = np.array([centre(gt[i]) for i, _ in pairs])
    dst = np.array([centre(pred[j]) for _, j in pairs])
    if len(pairs) <= FIT_POINTS:
        return np.ones(len(pairs), dtype=bool)
    fits = np.zeros(len(pairs), dtype=bool)
    for _ in range(FIT_ROUNDS):
        left = ~fits
        if left.sum() <= FIT_POINTS:
            break
        _, took = ransac((src[left], dst[left]), _ShiftScale, min_samples=FIT_POINTS,
                         residual_threshold=FIT_RESIDUAL_PX, max_trials=FIT_TRIALS, rng=FIT_SEED)
        if took is None or not took.any():
            break
        fits[np.flatnonzero(left)[took]] = True
        if fits.all():
            break
    return fits


def score(gt: Sequence[TokenBox], pred: Sequence[TokenBox], gt_size: tuple[int, int],
          pred_size: tuple[int, int]) -> CdmScore:
    """CDM of one formula from its tokens' boxes (each side's empty boxes already dropped, as upstream's loader
    drops them): recall, precision and F1, each rounded to 3 decimals."""
    if not gt or not pred:
        return CdmScore(0.0, 0.0, 0.0)
    pairs, tokens = assign(gt, pred, gt_size, pred_size)
    fits = fitting(pairs, gt, pred)
    matched = sum(1 for k, (i, j) in enumerate(pairs) if fits[k] and tokens[i, j] != 1)
    return CdmScore(round(matched / len(gt), 3), round(matched / len(pred), 3),
                    round(2 * matched / (len(gt) + len(pred)), 3))
