"""Paired statistics for "within measurement noise": small, seeded, vectorised over studies (so the
calibration benchmark runs the very code a verdict runs), and tested against known answers.

Method (docs/statistics.md has the why, a worked example and the calibration table):
* Paired by page, oriented so that higher is better: d_i = ±(candidate_i − baseline_i).
* Interval for mean(d): a studentized bootstrap of Hall's (1992) skewness-corrected t statistic
  (the "bootstrap Hall" interval of Zhou & Dinh 2005). Page differences are skewed and zero-heavy;
  on such data the percentile and BCa bounds are anti-conservative at n ≈ 32
  (benchmarks/verdict_calibration.py measures all three). Where it cannot be formed — too many
  resamples with no spread, e.g. 199 identical pages of 200 — BCa (as scipy.stats.bootstrap
  computes it) is used, then the percentile interval; the verdict names the interval it used.
* Resampling draws page indices exactly as scipy.stats.bootstrap does (``rng.integers(0, n, (B, n))``,
  chunked without changing the stream); every interval needs only the first three moments of each
  resample.
* Each end of the (1 − 2α) interval is a one-sided test at level α: non-inferiority passes when
  the lower end is above −margin, a regression is called when the upper end is below −margin.
  p-values invert the same interval, so ``p ≤ α`` agrees with it (up to ties).

Verdicts are made by ``quantgate.judge.clustered`` (documents as the unit); what stays here is the
page-level interval, which the sequential looks and the historical page-level calibration
(benchmarks/verdict_calibration.py) still use, and the descriptive percentile interval of ``quantgate score``.

Hand-written because no maintained library offers the Hall-studentized bootstrap, p-values from a
bootstrap interval, or either vectorised over many simulated studies.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
from scipy.special import ndtr, ndtri

from quantgate.schema.settings import DEFAULT_CONFIDENCE, DEFAULT_RESAMPLES, MIN_PAGES
from quantgate.schema.verdict import INTERVALS, REASONS, VERDICTS

_CHUNK_ELEMENTS = 4_000_000  # bounds memory: resamples per chunk × pages


# --- resampling ------------------------------------------------------------------------------

def resample_indices(n: int, n_resamples: int, seed: int) -> Iterator[np.ndarray]:
    """Chunks of the (n_resamples, n) page indices of scipy.stats.bootstrap (one ``integers(0, n,
    (B, n))`` call; chunking keeps the stream), so with the same generator both see the same resamples."""
    rng = np.random.default_rng(seed)
    step = max(1, _CHUNK_ELEMENTS // n)
    for s in range(0, n_resamples, step):
        yield rng.integers(0, n, (min(step, n_resamples - s), n))


def bootstrap_moments(x: np.ndarray, indices, order: int = 3) -> tuple[np.ndarray, ...]:
    """The first ``order`` (≤ 3) raw moments of ``x - mean(x)`` in every resample; ``x`` is (S, n).
    A few samples gather their resampled values; many (the calibration benchmark's studies, which
    share resamples) turn the indices into counts and take one matrix product."""
    x = np.atleast_2d(np.asarray(x, dtype=np.float64))
    S, n = x.shape
    xc = x - x.mean(axis=1, keepdims=True)  # centred first: no cancellation in the variance
    parts = []
    for idx in indices:
        k = len(idx)
        if S <= 8:
            g = xc[:, idx]  # (S, k, n)
            ms = [g.mean(axis=2)]
            if order > 1:
                g2 = g * g
                ms += [g2.mean(axis=2), (g2 * g).mean(axis=2)][: order - 1]
            parts.append(np.stack(ms))
        else:
            flat = (idx + (np.arange(k) * n)[:, None]).ravel()
            w = np.bincount(flat, minlength=k * n).reshape(k, n).astype(np.float64)
            parts.append(np.stack([xc, xc * xc, xc * xc * xc][:order]) @ w.T / n)
    return tuple(np.concatenate(parts, axis=-1))


def bootstrap_means(x: np.ndarray, n_resamples: int = DEFAULT_RESAMPLES, seed: int = 0) -> np.ndarray:
    """Means of ``n_resamples`` resamples of the 1-D sample ``x``."""
    x = np.asarray(x, dtype=np.float64)
    if len(x) == 0:
        raise ValueError("bootstrap of an empty sample")
    m1 = bootstrap_moments(x, resample_indices(len(x), n_resamples, seed), order=1)[0][0]
    return m1 + x.mean()


def percentile_ci(x: np.ndarray, confidence: float = DEFAULT_CONFIDENCE, n_resamples: int = DEFAULT_RESAMPLES,
                  seed: int = 0) -> tuple[float, float]:
    """Plain percentile interval (descriptive summaries only; verdicts use ``paired_bounds``)."""
    means = bootstrap_means(x, n_resamples, seed)
    alpha = (1 - confidence) / 2
    lo, hi = np.quantile(means, [alpha, 1 - alpha])
    return float(lo), float(hi)


def _quantile_sorted(s: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Per-row linear quantile of row-sorted ``s`` (numpy's default method), safe with ±inf."""
    B = s.shape[1]
    pos = np.clip(q, 0.0, 1.0) * (B - 1)
    lo = np.minimum(np.floor(pos).astype(np.int64), B - 1)
    hi = np.minimum(lo + 1, B - 1)
    r = np.arange(s.shape[0])
    a, b, f = s[r, lo], s[r, hi], pos - lo
    with np.errstate(invalid="ignore"):
        return np.where(f == 0, a, np.where(a == b, a, a + f * (b - a)))


def _share_below(s: np.ndarray, v: np.ndarray) -> np.ndarray:
    """(#(s < v) + #(s <= v)) / 2B per row: scipy's percentile-of-score ('mean' kind)."""
    return ((s < v[:, None]).sum(axis=1) + (s <= v[:, None]).sum(axis=1)) / (2 * s.shape[1])


# --- intervals -------------------------------------------------------------------------------

@dataclass
class Bounds:
    """Per study: the (1 − 2α) interval of mean(x), and the one-sided p-value of H0: mean ≥ −margin
    (small: a regression). ``method`` indexes INTERVALS."""

    mean: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    p_regression: np.ndarray
    method: np.ndarray


def paired_bounds(x: np.ndarray, margin: float, alpha: float, indices, moments=None) -> Bounds:
    """Intervals for S studies at once: ``x`` is (S, n); ``indices`` the resamples (``resample_indices``).
    ``moments``: ``bootstrap_moments(x, indices)`` when already computed (sequential looks at several
    levels on the same pages share them)."""
    x = np.atleast_2d(np.asarray(x, dtype=np.float64))
    S, n = x.shape
    mean = x.mean(axis=1)
    s = x.std(axis=1, ddof=1)
    m1, m2, m3 = bootstrap_moments(x, indices) if moments is None else moments
    const = s <= 1e-12 * np.maximum(1.0, np.abs(mean))
    lo, hi, p, method = _hall(x, mean, s, m1, m2, m3, margin, alpha)
    todo = ~np.isfinite(lo) | ~np.isfinite(hi) | ~np.isfinite(p)
    if todo.any():
        blo, bhi, bp, bm = _bca(x[todo], mean[todo], m1[todo], margin, alpha)
        lo[todo], hi[todo], p[todo], method[todo] = blo, bhi, bp, bm
    if const.any():  # no spread at all: the interval is the value itself
        lo[const] = hi[const] = mean[const]
        p[const] = np.where(mean[const] < -margin, 0.0, 1.0)
        method[const] = INTERVALS.index("degenerate")
    return Bounds(mean, lo, hi, p, method)


def _hall(x, mean, s, m1, m2, m3, margin, alpha):
    """Bootstrap of Hall's transformed t: g(T) = T + aT² + a²T³/3 + b, a = γ/(3√n), b = γ/(6√n)
    (monotone, so it inverts in closed form); γ the skewness, recomputed in every resample."""
    n = x.shape[1]
    rn = math.sqrt(n)
    with np.errstate(all="ignore"):
        gamma = ((x - mean[:, None]) ** 3).mean(axis=1) / s**3
        v_b = np.maximum(m2 - m1 * m1, 0.0)
        s_b = np.sqrt(v_b * (n / (n - 1)))
        gamma_b = (m3 - m1 * (3 * m2 - 2 * m1 * m1)) / (s_b * s_b * s_b)
        t_b = m1 * rn / s_b
        a_b = gamma_b * (1 / (3 * rn))
        at = a_b * t_b
        g_b = t_b * (1 + at + at * at / 3) + a_b / 2  # T + aT² + a²T³/3 + b, with b = a/2
    # a resample with (almost) no spread has an infinite t: its sign is the sign of its shift
    flat = v_b <= 1e-12 * (s[:, None] ** 2)
    tol = 1e-9 * s[:, None]
    g_b = np.where(flat, np.where(m1 > tol, np.inf, np.where(m1 < -tol, -np.inf, 0.0)), g_b)
    B = g_b.shape[1]
    kth = sorted({min(int(math.floor(q * (B - 1))) + j, B - 1) for q in (alpha, 1 - alpha) for j in (0, 1)})
    g_b = np.partition(g_b, kth, axis=1)  # only the order statistics the two quantiles read
    xi_lo = _quantile_sorted(g_b, np.full(len(x), alpha))
    xi_hi = _quantile_sorted(g_b, np.full(len(x), 1 - alpha))
    a, c = gamma / (3 * rn), gamma / (6 * rn)
    se = s / rn
    lo = mean - se * _g_inverse(xi_hi, a, c)
    hi = mean - se * _g_inverse(xi_lo, a, c)
    with np.errstate(all="ignore"):
        t_m = (mean + margin) / se
        at_m = a * t_m
        g_m = t_m * (1 + at_m + at_m * at_m / 3) + c
    p = _share_below(g_b, g_m)
    bad = ~np.isfinite(xi_lo) | ~np.isfinite(xi_hi) | ~np.isfinite(g_m)
    lo[bad] = hi[bad] = p[bad] = np.nan
    return lo, hi, p, np.full(len(x), INTERVALS.index("studentized_hall"), dtype=np.int64)


def _g_inverse(y, a, c):
    with np.errstate(all="ignore"):
        exact = (np.cbrt(1 + 3 * a * (y - c)) - 1) / a
    return np.where(np.abs(a) > 1e-9, exact, y - c)


def _bca(x, mean, m1, margin, alpha):
    """BCa exactly as scipy.stats.bootstrap computes it (the jackknife acceleration of a mean has a
    closed form), with the p-value from inverting it; the percentile interval where BCa is undefined."""
    theta = np.sort(m1 + mean[:, None], axis=1)
    z0 = ndtri(_share_below(theta, mean))
    dev = x - mean[:, None]
    with np.errstate(all="ignore"):
        acc = (dev**3).sum(axis=1) / (6 * ((dev**2).sum(axis=1)) ** 1.5)
        za = ndtri(alpha)
        q_lo = ndtr(z0 + (z0 + za) / (1 - acc * (z0 + za)))
        q_hi = ndtr(z0 + (z0 - za) / (1 - acc * (z0 - za)))
        B = theta.shape[1]
        w = ndtri(np.clip(_share_below(theta, np.full(len(x), -margin)), 0.5 / B, 1 - 0.5 / B))
        u = (w - z0) / (1 + acc * (w - z0))
        p = 1 - ndtr(u - z0)  # the level at which the upper end touches −margin
    ok = (np.isfinite(z0) & np.isfinite(acc) & (1 - acc * (z0 + za) > 0) & (1 - acc * (z0 - za) > 0)
          & (1 + acc * (w - z0) > 0))
    method = np.where(ok, INTERVALS.index("bca"), INTERVALS.index("percentile"))
    q_lo = np.where(ok, q_lo, alpha)
    q_hi = np.where(ok, q_hi, 1 - alpha)
    p = np.where(ok, p, 1 - _share_below(theta, np.full(len(x), -margin)))
    return _quantile_sorted(theta, q_lo), _quantile_sorted(theta, q_hi), p, method


def noise_floor(e: np.ndarray, alpha: float = (1 - DEFAULT_CONFIDENCE) / 2, n_resamples: int = DEFAULT_RESAMPLES,
                seed: int = 0) -> float:
    """A one-sided (1 − α) upper confidence bound on |mean(e)|, the shift the baseline shows
    against itself: max(|lo|, |hi|) of the same interval (metric units)."""
    e = np.asarray(e, dtype=np.float64)
    b = paired_bounds(e[None, :], 1.0, alpha, resample_indices(len(e), n_resamples, seed))
    return float(max(abs(b.lo[0]), abs(b.hi[0])))


# --- decisions -------------------------------------------------------------------------------

def classify(n: int, b: Bounds, all_zero, floor, margin: float, *, equivalence: bool = False,
             min_pages: int = MIN_PAGES) -> tuple[np.ndarray, np.ndarray]:
    """Verdict and reason codes (indices into VERDICTS / REASONS), first rule that applies:
    too few pages → identical outputs → noise floor above the margin → where the interval ``b`` lies."""
    lo, hi = np.asarray(b.lo, float), np.asarray(b.hi, float)
    all_zero = np.broadcast_to(np.asarray(all_zero, bool), lo.shape)
    floor = np.broadcast_to(np.asarray(np.nan if floor is None else floor, float), lo.shape)
    inside = (lo > -margin) & (hi < margin) if equivalence else lo > -margin
    worse, better = hi < -margin, (lo > margin) & equivalence
    V, R = VERDICTS.index, REASONS.index
    verdict = np.select([np.full(lo.shape, n < min_pages), all_zero, floor > margin, inside, worse, better],
                        [V("inconclusive"), V("within_noise"), V("inconclusive"), V("within_noise"), V("regression"),
                         V("not_equivalent")], V("inconclusive"))
    reason = np.select([np.full(lo.shape, n < min_pages), all_zero, floor > margin, inside, worse | better],
                       [R("too_few_pages"), R("identical_outputs"), R("noise_exceeds_margin"), R("ci_inside_margin"),
                        R("ci_beyond_margin")], R("ci_straddles_margin"))
    return verdict, reason
