"""Paired statistics for "within measurement noise" — small, seeded, and tested against known
answers (scipy.stats.bootstrap; simulated error rates).

Method (docs/statistics.md has a worked example):
* Every comparison is paired by page: d_i = candidate_i − baseline_i, oriented so that higher is
  better (lower-is-better metrics are negated first).
* The confidence interval of mean(d) is a percentile paired bootstrap over pages (as sacrebleu's
  paired bootstrap resampling), 10,000 resamples by default, seeded.
* Equivalence is a non-inferiority form of two one-sided tests (Schuirmann 1987): at confidence
  0.90 each side of the interval is a one-sided 5% test. ``within_noise`` when the lower end lies
  above −margin; ``regression`` when the whole interval lies below −margin; else ``inconclusive``.
* The margin is the larger of the requested one and the noise floor: the largest mean difference
  the baseline shows against itself (two baseline runs, e.g. at two concurrency levels, which are
  not batch-invariant) — max(|lo|, |hi|) of the same bootstrap interval on e_i = b'_i − b_i.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

DEFAULT_RESAMPLES = 10_000
DEFAULT_CONFIDENCE = 0.90
_CHUNK_ELEMENTS = 4_000_000  # bounds memory: resamples per chunk × pages


def bootstrap_means(x: np.ndarray, n_resamples: int = DEFAULT_RESAMPLES, seed: int = 0) -> np.ndarray:
    """Means of ``n_resamples`` resamples of ``x`` with replacement (vectorised, chunked)."""
    x = np.asarray(x, dtype=np.float64)
    n = len(x)
    if n == 0:
        raise ValueError("bootstrap of an empty sample")
    rng = np.random.default_rng(seed)
    out = np.empty(n_resamples)
    step = max(1, _CHUNK_ELEMENTS // n)
    for s in range(0, n_resamples, step):
        k = min(step, n_resamples - s)
        idx = rng.integers(0, n, size=(k, n), dtype=np.int32 if n < 2**31 else np.int64)
        out[s:s + k] = x[idx].mean(axis=1)
    return out


def percentile_ci(x: np.ndarray, confidence: float = DEFAULT_CONFIDENCE, n_resamples: int = DEFAULT_RESAMPLES,
                  seed: int = 0) -> tuple[float, float]:
    means = bootstrap_means(x, n_resamples, seed)
    alpha = (1 - confidence) / 2
    lo, hi = np.quantile(means, [alpha, 1 - alpha])
    return float(lo), float(hi)


def noise_floor(e: np.ndarray, confidence: float = DEFAULT_CONFIDENCE, n_resamples: int = DEFAULT_RESAMPLES,
                seed: int = 0) -> float:
    """Largest mean difference the baseline plausibly shows against itself (metric units)."""
    e = np.asarray(e, dtype=np.float64)
    if np.all(e == e[0]):
        return abs(float(e[0]))
    lo, hi = percentile_ci(e, confidence, n_resamples, seed)
    return max(abs(lo), abs(hi))


def pages_needed(mean: float, sd: float, margin: float, confidence: float = DEFAULT_CONFIDENCE) -> int | None:
    """Pages for the interval (normal approximation at the observed spread) to clear −margin on
    the side the mean is on. None when the mean sits on −margin (no n decides it)."""
    gap = abs(mean + margin)
    if gap == 0 or not math.isfinite(sd):
        return None
    from statistics import NormalDist

    z = NormalDist().inv_cdf(1 - (1 - confidence) / 2)
    return max(2, math.ceil((z * sd / gap) ** 2))


@dataclass
class Decision:
    verdict: str
    mean: float  # oriented: higher is better
    ci_low: float
    ci_high: float
    margin: float
    noise_floor: float | None
    pages_needed: int | None


def decide(d_oriented: np.ndarray, margin: float, *, noise: np.ndarray | None = None,
           confidence: float = DEFAULT_CONFIDENCE, n_resamples: int = DEFAULT_RESAMPLES, seed: int = 0) -> Decision:
    d = np.asarray(d_oriented, dtype=np.float64)
    if len(d) < 2:
        raise ValueError("a paired comparison needs at least 2 pages")
    if margin < 0:
        raise ValueError("margin must be >= 0")
    floor = noise_floor(noise, confidence, n_resamples, seed + 1) if noise is not None and len(noise) else None
    used = max(margin, floor or 0.0)
    lo, hi = percentile_ci(d, confidence, n_resamples, seed)
    mean = float(d.mean())
    if lo > -used:
        verdict = "within_noise"
    elif hi < -used:
        verdict = "regression"
    else:
        verdict = "inconclusive"
    need = pages_needed(mean, float(d.std(ddof=1)), used, confidence) if verdict == "inconclusive" else None
    return Decision(verdict, mean, lo, hi, used, floor, need)
