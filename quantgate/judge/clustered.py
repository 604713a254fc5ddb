"""Verdict statistics with documents as the unit (docs/statistics.md has the why,
the calibration and a worked example). numpy/scipy only, and vectorised over S studies at once, so that
benchmarks/verdict_calibration_documents.py runs the very code a verdict runs.

* d = candidate − baseline per page, oriented so that higher is better. The estimate is the page-weighted
  mean r = Σ T_i / Σ n_i over documents i (T_i: the sum of d over its n_i pages), a ratio estimator; its
  standard error is the linearised one, se² = G/(G−1) · Σ u_i² / N², u_i = T_i − r·n_i.
* Kish's design effect deff = se² / (s²/N) (s² the page-level variance), effective n = N / max(1, deff).
* The interval: each end the outer of (a) a studentized bootstrap of Hall's (1992) skewness-corrected t
  that resamples documents, not pages (the ratio and its linearised se recomputed in every resample), and
  (b) the Student-t bound r ∓ t_{G−1}·se. A side the bootstrap cannot bound — more than α of resamples
  with no spread on that side, e.g. a lone damaged document — is unbounded: there is no fallback interval.
* Rare failures (the Bernoulli worst case): a failure that damages a share q = m/D of pages by D has mean
  −m, and n independent pages all miss it with probability (1 − m/D)^n. So no pass below
  n_rare = ⌈ln α / ln(1 − m/D)⌉ effective pages (≈ 3·D/m) and, because a failure can ruin whole documents
  (the largest ones at worst), below ``documents_rule`` documents (D_doc ≤ D: the worst page-weighted
  damage of one document). A declared D the pages contradict (a page damaged by more) is replaced.
* The bounded test: a pass also needs a test by betting (``log_wealth``) that is valid for any distribution
  within those bounds — heavy tails, rare failures, discrete scores — where the interval is not.
* ``classify`` applies the reasons in a fixed order; ``decide`` is one verdict; ``plan`` the pages and
  documents needed at a planning alternative; ``document_order``/``plan_looks`` the sequential design
  (its boundaries come from the spending functions of quantgate's group-sequential module).

Hand-written: no maintained library offers a cluster (document-level) studentized bootstrap of a ratio
with Hall's correction, vectorised over simulated studies; confseq (Howard & Waudby-Smith) has betting
confidence sequences for [0, 1] samples one at a time, not for document sums with a per-study stake cap
vectorised over studies, and this module is numpy/scipy only.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.special import ndtri
from scipy.stats import chi2
from scipy.stats import t as student_t

from quantgate.schema.metrics import METRICS, damage_problem
from quantgate.schema.settings import ALPHA, DEFAULT_POWER, MIN_DOCUMENTS, MIN_PAGES, VerdictSettings
from quantgate.schema.verdict import REASONS, VERDICTS, IntervalName, ReasonName, VerdictName, no_better_than_empty

# The bounded test stakes at most 90% of what a page (document) at the worst damage would take: one such
# page then costs ln 10 of log wealth instead of all of it, for good (a checks page with one check that
# flips is such a page), and identical scores need ~11% more pages than the count rule — which is why
# identical scores are judged by the count rule alone (an exact test on them).
STAKE_CAP = 0.9
PLANNING_CONFIDENCE = 0.80  # pages_needed plans with an 80% upper confidence bound on the spread
_CHUNK_ELEMENTS = 4_000_000


# --- documents ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class Documents:
    """Per-document sufficient statistics of the oriented differences, each (S, G): S studies of G
    documents. Everything a verdict needs; pages enter only through these."""

    pages: np.ndarray  # n_i
    total: np.ndarray  # T_i = Σ d over the document's pages
    sumsq: np.ndarray  # Σ d²
    worst: np.ndarray  # min d: the document's most damaged page

    def head(self, g: int) -> Documents:
        """The first g documents (a sequential look, documents in serving order)."""
        return Documents(self.pages[:, :g], self.total[:, :g], self.sumsq[:, :g], self.worst[:, :g])


def documents_of(d, document_ids: Sequence[str]) -> tuple[Documents, list[str]]:
    """One study's documents from its pages: ``d`` per page (oriented), ``document_ids`` per page.
    Documents are ordered by id, so the resamples do not depend on the order of the pages."""
    d = np.asarray(d, dtype=np.float64)
    if d.ndim != 1 or len(d) != len(document_ids):
        raise ValueError(f"documents: {len(document_ids)} document ids for {d.size} page differences; "
                         "give one document per page")
    if not np.isfinite(d).all():
        raise ValueError("page differences: NaN or infinite values; leave such pages out and list them")
    if any(not isinstance(x, str) or not x for x in document_ids):
        raise ValueError("documents: every page needs a non-empty document id (string)")
    ids, inv = np.unique(np.asarray(document_ids, dtype=object).astype(str), return_inverse=True)
    G = len(ids)
    worst = np.full(G, np.inf)
    np.minimum.at(worst, inv, d)
    docs = Documents(np.bincount(inv, minlength=G).astype(np.float64)[None], np.bincount(inv, d, G)[None],
                     np.bincount(inv, d * d, G)[None], worst[None])
    return docs, [str(i) for i in ids]


def documents_from_padded(d: np.ndarray, mask: np.ndarray) -> Documents:
    """S simulated studies at once: ``d`` and ``mask`` (S, G, P), P the most pages a document has."""
    d = np.where(mask, d, 0.0)
    return Documents(mask.sum(axis=2).astype(np.float64), d.sum(axis=2), (d * d).sum(axis=2),
                     np.where(mask, d, np.inf).min(axis=2))


@dataclass
class Cluster:
    """The estimate and its design, per study."""

    mean: np.ndarray  # r, the page-weighted mean of d
    se: np.ndarray  # linearised cluster standard error of r
    design_effect: np.ndarray  # Kish: se² / (s²/N); 1 where the pages have no spread
    effective_n: np.ndarray  # N / max(1, deff)
    pages: np.ndarray  # N
    documents: int  # G
    largest_document: np.ndarray  # pages of the largest document, n_max
    u: np.ndarray  # (S, G) residual totals T_i − r·n_i

    @property
    def size_ratio(self) -> np.ndarray:
        """n_max / n̄: how much larger than the mean the largest document is (1 for equal documents)."""
        return self.largest_document * self.documents / self.pages


def cluster_summary(docs: Documents) -> Cluster:
    n, T = docs.pages, docs.total
    G = n.shape[1]
    N = n.sum(axis=1)
    r = T.sum(axis=1) / N
    u = T - r[:, None] * n
    se = np.sqrt(G / max(G - 1, 1) * (u * u).sum(axis=1)) / N
    s2 = np.maximum(docs.sumsq.sum(axis=1) - N * r * r, 0.0) / np.maximum(N - 1, 1)
    with np.errstate(divide="ignore", invalid="ignore"):
        deff = np.where(s2 > 1e-300, se * se / (s2 / N), 1.0)
    return Cluster(r, se, deff, N / np.maximum(deff, 1.0), N, G, n.max(axis=1), u)


# --- resampling documents ----------------------------------------------------------------------

def resample_counts(G: int, n_resamples: int, seed: int) -> Iterator[np.ndarray]:
    """Chunks (k, G) of how often each document is drawn in each resample: the document indices are
    ``rng.integers(0, G, (B, G))``, the stream scipy.stats.bootstrap draws, chunked without changing it
    (so with one page per document these are exactly quantgate's page resamples)."""
    rng = np.random.default_rng(seed)
    step = max(1, _CHUNK_ELEMENTS // G)
    for s in range(0, n_resamples, step):
        k = min(step, n_resamples - s)
        idx = rng.integers(0, G, (k, G))
        yield np.bincount((idx + (np.arange(k) * G)[:, None]).ravel(), minlength=k * G).reshape(k, G).astype(
            np.float64)


@dataclass
class Bounds:
    """Per study: each end of the (1 − 2α) interval and the one-sided p-values. ``lo``/``hi`` are the
    outer of the Hall-bootstrap and Student-t ends; the parts are kept for the record and the tests."""

    mean: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    p_regression: np.ndarray  # H0′: mean ≥ −margin; small: a regression
    p_noninferiority: np.ndarray  # H0: mean ≤ −margin; small: a pass
    p_regression_hall: np.ndarray
    lo_hall: np.ndarray
    hi_hall: np.ndarray
    lo_t: np.ndarray
    hi_t: np.ndarray
    degenerate: np.ndarray  # no spread between documents: the interval is the value itself


def _quantile_sorted(s: np.ndarray, q: float) -> np.ndarray:
    """numpy's linear quantile of each row of partitioned ``s`` (the order statistics read are in place)."""
    B = s.shape[1]
    pos = min(max(q, 0.0), 1.0) * (B - 1)
    lo = min(int(math.floor(pos)), B - 1)
    hi = min(lo + 1, B - 1)
    a, b, f = s[:, lo], s[:, hi], pos - lo
    with np.errstate(invalid="ignore"):
        return np.where(f == 0, a, np.where(a == b, a, a + f * (b - a)))


def _g_inverse(y, a, c):
    with np.errstate(all="ignore"):
        exact = (np.cbrt(1 + 3 * a * (y - c)) - 1) / a
    return np.where(np.abs(a) > 1e-9, exact, y - c)


def cluster_bounds(docs: Documents, margin: float, alpha: float, counts, cl: Cluster | None = None) -> Bounds:
    """Intervals for S studies of the same G documents; ``counts`` from ``resample_counts(G, …)`` (a list
    to share one set of resamples across calls)."""
    cl = cluster_summary(docs) if cl is None else cl
    n, u, r, se, G = docs.pages, cl.u, cl.mean, cl.se, cl.documents
    S = len(r)
    rg = math.sqrt(G)
    if np.all(n == 1):  # pages: Σ w·n = G, and the sums with n are the sums without it
        F = np.concatenate([(np.stack([u, u * u, u ** 3], axis=1).reshape(S * 3, G) @ w.T).reshape(S, 3, -1)
                            for w in counts], axis=2)
        wu, wu2, wu3 = (F[:, i] for i in range(3))
        wn = wn2 = wn3 = np.full(wu.shape, float(G))
        wun, wu2n, wun2 = wu, wu2, wu
    else:
        feats = np.stack([u, n, u * u, u * n, n * n, u ** 3, u * u * n, u * n * n, n ** 3], axis=1).reshape(S * 9, G)
        F = np.concatenate([(feats @ w.T).reshape(S, 9, -1) for w in counts], axis=2)
        wu, wn, wu2, wun, wn2, wu3, wu2n, wun2, wn3 = (F[:, i] for i in range(9))
    su2 = (u * u).sum(axis=1)
    s_z = np.sqrt(su2 / max(G - 1, 1)) * G / cl.pages  # sd of the pseudo-values z_i = u_i·G/N
    with np.errstate(all="ignore"):
        delta = wu / wn  # r* − r
        s2 = wu2 - 2 * delta * wun + delta * delta * wn2  # Σ w u*², u*_i = u_i − δ·n_i
        s3 = wu3 - 3 * delta * wu2n + 3 * delta * delta * wun2 - delta ** 3 * wn3
        se_b = np.sqrt(np.maximum(G / (G - 1) * s2, 0.0)) / wn
        t_b = delta / se_b
        gamma_b = (s3 / G) / (np.maximum(s2, 0.0) / (G - 1)) ** 1.5
        a_b = gamma_b / (3 * rg)
        at = a_b * t_b
        g_b = t_b * (1 + at + at * at / 3) + a_b / 2
        gamma = ((u ** 3).sum(axis=1) / G) / (su2 / (G - 1)) ** 1.5
    # a resample with no spread between documents has an infinite t: its sign is the sign of its shift
    flat = s2 / G <= 1e-12 * (su2 / max(G - 1, 1))[:, None]
    tol = 1e-9 * s_z[:, None]
    g_b = np.where(flat, np.where(delta > tol, np.inf, np.where(delta < -tol, -np.inf, 0.0)), g_b)
    B = g_b.shape[1]
    kth = sorted({min(int(math.floor(q * (B - 1))) + j, B - 1) for q in (alpha, 1 - alpha) for j in (0, 1)})
    g_b = np.partition(g_b, kth, axis=1)
    xi_lo, xi_hi = _quantile_sorted(g_b, alpha), _quantile_sorted(g_b, 1 - alpha)
    a, c = gamma / (3 * rg), gamma / (6 * rg)
    with np.errstate(all="ignore"):
        lo_h = r - se * _g_inverse(xi_hi, a, c)
        hi_h = r - se * _g_inverse(xi_lo, a, c)
        t_m = (r + margin) / se
        at_m = a * t_m
        g_m = t_m * (1 + at_m + at_m * at_m / 3) + c
    # a side the bootstrap cannot bound is unbounded: no uncalibrated fallback may pass (or fail) a study
    lo_h = np.where(np.isfinite(xi_hi) & np.isfinite(lo_h), lo_h, -np.inf)
    hi_h = np.where(np.isfinite(xi_lo) & np.isfinite(hi_h), hi_h, np.inf)
    below = ((g_b < g_m[:, None]).sum(axis=1) + (g_b <= g_m[:, None]).sum(axis=1)) / (2 * B)
    q = float(student_t.ppf(1 - alpha, max(G - 1, 1)))
    lo_t, hi_t = r - q * se, r + q * se
    with np.errstate(all="ignore"):
        p_t = student_t.cdf(t_m, max(G - 1, 1))
    lo, hi = np.minimum(lo_h, lo_t), np.maximum(hi_h, hi_t)
    p_reg, p_ni = np.maximum(below, p_t), np.maximum(1 - below, 1 - p_t)
    const = s_z <= 1e-12 * np.maximum(1.0, np.abs(r))
    if const.any():  # every document's mean is the same value: the interval is that value
        lo, hi, p_reg, p_ni = lo.copy(), hi.copy(), p_reg.copy(), p_ni.copy()
        lo[const] = hi[const] = r[const]
        p_reg[const] = np.where(r[const] < -margin, 0.0, 1.0)
        p_ni[const] = np.where(r[const] > -margin, 0.0, 1.0)
    return Bounds(r, lo, hi, p_reg, p_ni, below, lo_h, hi_h, lo_t, hi_t, const)


def noise_floor(docs: Documents, alpha: float, counts) -> np.ndarray:
    """One-sided (1 − α) upper bound on |mean(e)| for the baseline against itself (e by document, as d).
    A guard that only withholds passes, so a side the bootstrap cannot bound takes the Student-t end."""
    b = cluster_bounds(docs, 1.0, alpha, counts)
    lo = np.where(np.isfinite(b.lo_hall), np.minimum(b.lo_hall, b.lo_t), b.lo_t)
    hi = np.where(np.isfinite(b.hi_hall), np.maximum(b.hi_hall, b.hi_t), b.hi_t)
    lo, hi = np.where(b.degenerate, b.mean, lo), np.where(b.degenerate, b.mean, hi)
    return np.maximum(np.abs(lo), np.abs(hi))


# --- rare failures -------------------------------------------------------------------------------

def rare_failure_count(margin: float, damage, alpha=ALPHA):
    """The fewest independent units (pages, or documents) that see, with probability ≥ 1 − α, a failure
    that damages a share m/D of them by D — the failure mode with mean exactly −m that is hardest to see.
    Smallest n with (1 − m/D)^n ≤ α: ⌈ln α / ln(1 − m/D)⌉ ≈ 3·D/m at α = 5%. Vectorised over D and α."""
    damage, alpha = np.asarray(damage, dtype=np.float64), np.asarray(alpha, dtype=np.float64)
    if np.any(damage <= margin):
        raise ValueError(f"worst damage {damage.min():g} must exceed the margin {margin:g} (a page damaged by at "
                         "most the margin cannot move the mean past it; there is nothing to rule out)")
    k = np.log(alpha) / np.log1p(-margin / damage)
    n = np.ceil(k - 1e-9)  # the tolerance: k within rounding of an integer is that integer
    n = np.where((1 - margin / damage) ** n <= alpha, n, n + 1)
    return n.astype(np.int64) if n.ndim else int(n)


def documents_rule(margin: float, damage_document, size_ratio, alpha=ALPHA):
    """Documents a study needs to see a failure that ruins whole documents: a share q of documents each
    damaged by D_doc on average has a page-weighted mean of −m when q = m·n̄/(D_doc·n_max) at worst (the
    failure strikes the largest documents), so the count is ``rare_failure_count`` at D_doc·n_max/n̄."""
    return rare_failure_count(margin, np.asarray(damage_document, dtype=np.float64) * np.asarray(size_ratio), alpha)


def log_wealth(docs: Documents, margin: float, damage_document, *, shift=None) -> np.ndarray:
    """The bounded test of H0: mean ≤ −margin (or ≤ ``shift``), by betting (Waudby-Smith & Ramdas 2024;
    the Kaplan–Wald idea): documents taken in order, Y_i = T_i + margin·n_i has E[Y] ≤ 0 under H0, and
    Y_i ≥ −(D_doc − margin)·n_i because no document's mean damage exceeds D_doc. A bettor stakes
    λ_i·Y_i, λ_i from the documents before i only (growth-rate adaptive: λ = μ̂/(σ̂² + μ̂²), clipped
    to [0, STAKE_CAP/((D_doc − margin)·n_max)] so wealth stays positive), so the wealth Π(1 + λ_i Y_i) is a
    nonnegative supermartingale under H0 and exceeds 1/α with probability at most α (Ville), whatever the
    distribution within the bounds — heavy tails, rare failures, discrete scores — at any look.
    On identical scores every λ sits at the cap: 1/α after ⌈ln(1/α) / ln(1 + 0.9·m/(D_doc − m))⌉ equal
    documents, about 11% more than the count rule. Returns the cumulative log wealth, (S, G); ``shift``
    (S,) replaces −margin (to invert the test)."""
    n, T = docs.pages, docs.total
    S, G = n.shape
    mu0 = np.full(S, -margin) if shift is None else np.asarray(shift, dtype=np.float64)
    Y = T - mu0[:, None] * n
    cap = STAKE_CAP / ((np.asarray(damage_document, dtype=np.float64) + mu0) * n.max(axis=1))
    # one pseudo-document at the all-zero value, so the first stake is at the cap (documents with no pages,
    # padding after a study's last one, change nothing)
    prior = -mu0 * n.sum(axis=1) / np.maximum((n > 0).sum(axis=1), 1)
    total, dev2 = prior.copy(), prior * prior
    out = np.empty((S, G))
    logw = np.zeros(S)
    Yt = np.ascontiguousarray(Y.T)  # a document's column as one row: read once per step
    with np.errstate(divide="ignore", invalid="ignore"):
        for i in range(G):
            cnt = i + 1.0  # documents seen, the prior included: the same in every study
            mu = total / cnt
            # fmax turns 0/0 (no spread yet, mean 0) into a zero stake and minimum caps it: what nan_to_num and
            # clip did (bit for bit at a finite cap), at a tenth of their cost in this loop, which runs once per document
            lam = np.minimum(np.fmax(mu / (dev2 / cnt + mu * mu), 0.0), cap)
            y = Yt[i]
            logw = logw + np.log(np.maximum(1.0 + lam * y, 0.0))
            out[:, i] = logw
            new = (total + y) / (cnt + 1.0)
            dev2 += (y - mu) * (y - new)
            total += y
    return out


def bounded_lower(docs: Documents, damage_document: float, alpha: float = ALPHA) -> float:
    """One study's lower confidence bound from the bounded test: the largest μ0 at which "mean ≤ μ0" is
    still rejected, on a grid refined three times. For the record; the verdict tests −margin directly."""
    lo, hi = -float(damage_document) + 1e-9, float(docs.total.sum() / docs.pages.sum())
    if hi <= lo:
        return lo
    arrays = (docs.pages, docs.total, docs.sumsq, docs.worst)
    for _ in range(3):
        grid = np.linspace(lo, hi, 101)
        many = Documents(*(np.repeat(a, len(grid), axis=0) for a in arrays))
        rejected = log_wealth(many, 0.0, damage_document, shift=grid)[:, -1] >= math.log(1 / alpha)
        if rejected.all():
            return float(hi)
        j = int(np.argmin(rejected))  # the first μ0 not rejected
        if j == 0:
            return float(grid[0])
        lo, hi = grid[j - 1], grid[j]
    return float(lo)


def damage_in_force(docs: Documents, declared: float | None, ceiling: float, declared_document: float | None = None):
    """The worst page damage D and worst document damage D_doc the rule uses, per study, and whether each
    declaration stands: a declared value some page (document) of the study exceeds is refuted and
    replaced by the ceiling (D) or by D (D_doc). Returns D, D_doc, page_refuted, document_refuted."""
    S = docs.pages.shape[0]
    worst_page = np.maximum(0.0, -docs.worst.min(axis=1))
    with np.errstate(invalid="ignore", divide="ignore"):
        worst_doc = np.maximum(0.0, -(docs.total / docs.pages).min(axis=1))
    D = np.full(S, float(ceiling))
    page_refuted = np.zeros(S, bool)
    if declared is not None:
        page_refuted = worst_page > declared * (1 + 1e-12)
        D = np.where(page_refuted, ceiling, declared)
    D_doc = D.copy()
    doc_refuted = np.zeros(S, bool)
    if declared_document is not None:
        doc_refuted = worst_doc > declared_document * (1 + 1e-12)
        D_doc = np.where(doc_refuted, D, np.minimum(declared_document, D))
    return D, D_doc, page_refuted, doc_refuted


def check_damage(field: str, value, metric: str, margin: float, ceiling: float) -> float | None:
    """A worst damage in force against the range this verdict judges it by, by the one rule the settings were
    made with (``schema.metrics.damage_problem``). Checked again here because what reaches a verdict is not
    always what was validated: ``compare`` hands on the registry's default damage and the truth-free test its
    own margin by ``model_copy`` (no validation), and a metric outside the registry is judged against the
    data's own range, which only the page differences give."""
    if value is None:
        return None
    problem = damage_problem(value, margin, ceiling, metric)
    if problem:
        raise ValueError(f"{field}: {problem}")
    return float(value)


# --- the baseline --------------------------------------------------------------------------------

def baseline_fit(score, floor: float | None, higher_is_better: bool, empty: float | None = None):
    """Whether the baseline's own mean score is on the readable side of its floor (True without a floor) and
    strictly better than ``empty``, what an empty output scores on the same pages (not judged when None).
    Vectorised. The floor is on the score itself, not on a difference: lower-is-better metrics (ned) need
    score ≤ floor, higher-is-better ones (checks) score ≥ floor."""
    score = np.asarray(score, dtype=np.float64)
    fit = np.ones(score.shape, bool) if floor is None else (score >= floor if higher_is_better else score <= floor)
    return fit & ~np.asarray(no_better_than_empty(score, empty, higher_is_better), bool)


# --- decisions -------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Rules:
    """The settings the verdict's rules read beside the margin, in one record: a verdict builds it from its
    :class:`VerdictSettings` (``Rules.of``, the one place); the calibration simulations, which judge many studies
    under settings no user would declare (a lifted minimum), build it themselves. Scalars: one set per call."""

    alpha: float = ALPHA  # one-sided, each end; the count rule's and the bounded test's level
    power: float = DEFAULT_POWER
    min_pages: int = MIN_PAGES
    min_documents: int = MIN_DOCUMENTS
    equivalence: bool = False

    @classmethod
    def of(cls, settings: VerdictSettings) -> Rules:
        s = settings
        return cls(alpha=s.alpha, power=s.power, min_pages=s.min_pages, min_documents=s.min_documents,
                   equivalence=s.equivalence)


@dataclass(frozen=True)
class Facts:
    """What each study's pages showed, that the rules judge: arrays of S studies (or scalars, broadcast).
    ``pages_rule``/``documents_rule``: the rare-failure counts a pass needs (effective pages, documents);
    ``bounded_ok``: the bounded test rejected; ``all_zero``: every page difference is 0; ``outputs_identical``:
    every output hash matches; ``noise_floor``: the baseline's shift against itself (None: no noise run);
    ``baseline_ok``: the baseline's own score is on the readable side of its floor."""

    pages_rule: Any
    documents_rule: Any
    bounded_ok: Any
    all_zero: Any
    outputs_identical: Any
    noise_floor: Any  # None: no noise run
    baseline_ok: Any = True


def classify(cl: Cluster, b: Bounds, margin: float, facts: Facts, rules: Rules = Rules()
             ) -> tuple[np.ndarray, np.ndarray]:
    """Verdict and reason codes (indices into VERDICTS / REASONS) for S studies, the first rule that applies:
    baseline unfit → too few pages → too few documents → identical (a pass only once rare failures are
    ruled out) → noise floor above the margin → interval beyond the margin (a regression needs no count
    rule) → interval inside the margin (a pass only once rare failures are ruled out) → straddles.
    Rare failures are ruled out when the effective pages reach ``pages_rule``, the documents
    ``documents_rule``, and — unless every score is identical, when the counts alone are an exact test
    (P(no page worse | mean ≤ −m) ≤ (1 − m/D)^n) — the bounded test rejects (``bounded_ok``)."""
    shape = cl.mean.shape
    full = lambda x, dt: np.broadcast_to(np.asarray(x, dt), shape)  # noqa: E731
    f = facts
    all_zero, ident, base = full(f.all_zero, bool), full(f.outputs_identical, bool), full(f.baseline_ok, bool)
    floor = full(np.nan if f.noise_floor is None else f.noise_floor, float)
    counts_ok = (cl.effective_n >= full(f.pages_rule, float)) & (cl.documents >= full(f.documents_rule, float))
    rare_ok = counts_ok & full(f.bounded_ok, bool)
    lo, hi = b.lo, b.hi
    inside = (lo > -margin) & (hi < margin) if rules.equivalence else lo > -margin
    worse, better = hi < -margin, (lo > margin) & rules.equivalence
    few_p, few_d = cl.pages < rules.min_pages, np.full(shape, cl.documents < rules.min_documents)
    V, R = VERDICTS.index, REASONS.index
    conds = [~base, few_p, few_d, all_zero & counts_ok & ident, all_zero & counts_ok, all_zero, floor > margin, worse,
             better, inside & rare_ok, inside]
    verdicts = ["inconclusive", "inconclusive", "inconclusive", "within_noise", "within_noise", "inconclusive",
                "inconclusive", "regression", "not_equivalent", "within_noise", "inconclusive"]
    reasons = ["baseline_unfit", "too_few_pages", "too_few_documents", "identical_outputs", "identical_scores",
               "rare_failures_not_ruled_out", "noise_exceeds_margin", "ci_beyond_margin", "ci_beyond_margin",
               "ci_inside_margin", "rare_failures_not_ruled_out"]
    verdict = np.select(conds, [V(v) for v in verdicts], V("inconclusive"))
    reason = np.select(conds, [R(x) for x in reasons], R("ci_straddles_margin"))
    return verdict, reason


@dataclass
class Plan:
    """Pages and documents for a study to decide at ``power`` if the true mean shift is ``shift``."""

    pages: np.ndarray | None
    documents: np.ndarray | None
    shift: float


def plan(cl: Cluster, b: Bounds, margin: float, *, damage_document, rules: Rules = Rules(),
         expected_shift: float = 0.0, pages_rule=0, documents_rule=0) -> Plan:
    """Pages (and documents) for a pass with probability ``power`` if the true shift is ``expected_shift``
    (oriented; 0: the candidate no different) — a planning alternative, never the observed shift (that is
    post-hoc power: near the margin it delivers about 62% of a promised 80%). Documents like the
    study's (same pages per document, same largest document); σ the spread of the pseudo-values
    z_i = u_i·G/N, the larger of their sd and the spread the interval implies, raised to its 80% upper
    confidence bound (χ², G − 1 df) because the study's own spread is uncertain. Two requirements, the
    larger wins: the interval, G' = ((z₁₋α + z_power)·σ / (shift + m))² (normal approximation); the
    bounded test, whose log wealth grows by g = λμ − λ²(σ² + μ²)/2 per document (μ = shift + m, λ the
    growth-optimal stake within its cap) with sd λσ·√G', so g·G' − z_power·λσ·√G' ≥ ln(1/α). Never below
    the count rules (pages_rule·deff effective pages, documents_rule documents) or the minimums. None
    (both) when no size passes: shift ≤ −margin."""
    alpha, power, min_pages, min_documents = rules.alpha, rules.power, rules.min_pages, rules.min_documents
    gap = expected_shift + margin
    if not gap > 0:
        return Plan(None, None, expected_shift)
    G = cl.documents
    z_half = float(student_t.ppf(1 - alpha, max(G - 1, 1)))
    sd = cl.se * math.sqrt(G)
    with np.errstate(invalid="ignore"):
        implied = np.where(np.isfinite(b.lo), (b.mean - b.lo) * math.sqrt(G) / z_half, sd)
    ucb = math.sqrt((G - 1) / chi2.ppf(1 - PLANNING_CONFIDENCE, G - 1)) if G > 1 else 1.0
    sigma = np.maximum(sd, implied) * ucb
    z_a, z_p = float(ndtri(1 - alpha)), float(ndtri(power))
    per_doc = cl.pages / G
    size_ratio = cl.size_ratio
    need_interval = ((z_a + z_p) * sigma / gap) ** 2
    # the bounded test, per page-mean units: y = Y/n̄ has mean gap, sd sigma; stakes capped at κ
    kappa = STAKE_CAP / ((np.asarray(damage_document, dtype=np.float64) - margin) * size_ratio)
    lam = np.minimum(kappa, gap / (sigma ** 2 + gap ** 2))
    g = lam * gap - lam ** 2 * (sigma ** 2 + gap ** 2) / 2
    # the stakes are learnt from the documents as they come: an allowance for it (a quarter nat, 5% more
    # spread; the delivered power of benchmarks/verdict_calibration_documents.py measures the whole plan)
    v = 1.05 * z_p * lam * sigma
    root = (v + np.sqrt(v * v + 4 * g * (math.log(1 / alpha) + 0.25))) / (2 * g)
    need = np.maximum(need_interval, root ** 2)
    for floor_ in (np.asarray(documents_rule, dtype=np.float64), float(min_documents), min_pages / per_doc,
                   np.asarray(pages_rule, dtype=np.float64) * np.maximum(cl.design_effect, 1.0) / per_doc):
        need = np.maximum(need, floor_)
    docs_needed = np.ceil(need - 1e-9)
    return Plan(np.ceil(docs_needed * per_doc - 1e-9).astype(np.int64), docs_needed.astype(np.int64), expected_shift)


def _with_noise(need: Plan, ce: Cluster, floor: float, margin: float, alpha: float, power: float) -> Plan:
    """The floor (|mean(e)| plus its sampling error) falls below the margin only if |mean(e)| does: the
    documents for that at ``power`` (normal approximation, the spread the floor implies, at least the
    pseudo-values' sd), beside the candidate's plan. None when the baseline's own shift reaches the margin."""
    G, shift = ce.documents, abs(float(ce.mean[0]))
    if need.documents is None or not margin > shift:
        return Plan(None, None, need.shift)
    z_a, z_p = float(ndtri(1 - alpha)), float(ndtri(power))
    sd = max(float(ce.se[0]) * math.sqrt(G), (floor - shift) * math.sqrt(G) / z_a)
    docs = max(int(need.documents[0]), math.ceil(((z_a + z_p) * sd / (margin - shift)) ** 2))
    return Plan(np.array([math.ceil(docs * float(ce.pages[0]) / G - 1e-9)]), np.array([docs]), need.shift)


@dataclass
class Decision:
    verdict: VerdictName
    reason: ReasonName
    mean: float  # oriented: higher is better
    ci_low: float
    ci_high: float
    margin: float
    alpha: float  # one-sided, each end (the interval's α_k at a sequential look: ``look_alpha``)
    look_alpha: float
    pages: int
    documents: int
    largest_document: int  # pages
    design_effect: float
    effective_n: float
    interval: IntervalName  # "cluster_hall_t" or "degenerate"
    lower_bound_from: str  # "studentized_hall", "student_t" or "unbounded"
    p_regression: float  # H0′ mean ≥ −margin, from the interval (Holm-adjust a family of these)
    p_noninferiority: float  # H0 mean ≤ −margin: the larger of the interval's and the bounded test's
    noise_floor: float | None
    noise_mean: float | None
    worst_page_damage: float  # D in force
    worst_page_damage_source: str  # "range", "declared", "range (declared value exceeded)"
    worst_document_damage: float
    worst_document_damage_source: str
    rare_failure_pages: int  # effective pages the rule needs
    rare_failure_documents: int  # documents the rule needs (documents_rule)
    bounded_log_wealth: float  # the bounded test: ≥ ln(1/α) rules out damage within the bounds
    bounded_low: float  # the bounded test's lower confidence bound on the mean (oriented)
    baseline_score: float | None
    baseline_floor: float | None
    pages_needed: int | None
    documents_needed: int | None
    planning_shift: float
    n_resamples: int
    seed: int
    order_seed: int


@dataclass(frozen=True)
class Evidence:
    """What a verdict knows beside the page differences and its settings. ``outputs_identical``: every output
    hash matches (None: not known). ``baseline_score``: the baseline's own mean score, judged against the
    settings' ``baseline_floor``. ``noise``: e = baseline′ − baseline on the same pages, oriented.
    ``empty_output_mean``: what an empty output scores on the same pages (the baseline must beat it; None: not
    scored). ``damage_ceiling``: the metric's range (None: the registry's; 1 for ned/checks, cer/wer clipped to [0, 1]).
    ``look_alpha``: a sequential look's nominal level α_k for the interval (the spending boundaries); the count
    rule and the bounded test stay at the settings' alpha, the bounded test being valid at any look.
    ``order_seed``: the documents' order for the bounded test (``document_order``)."""

    outputs_identical: bool | None = None
    baseline_score: float | None = None
    empty_output_mean: float | None = None
    noise: np.ndarray | None = None
    damage_ceiling: float | None = None
    look_alpha: float | None = None
    order_seed: int = 0


def decide(d, document_ids: Sequence[str], settings: VerdictSettings, evidence: Evidence | None = None) -> Decision:
    """One verdict. ``d`` per page (oriented, higher is better), ``document_ids`` per page; every rule's setting
    from ``settings`` (its alpha: the one-sided level of each end, of the count rule and of the bounded test)."""
    s, ev = settings, evidence or Evidence()
    margin, alpha, look_alpha = s.margin, s.alpha, ev.look_alpha
    if ev.damage_ceiling is not None:
        damage_ceiling = ev.damage_ceiling
    elif s.metric in METRICS:
        damage_ceiling = METRICS[s.metric].margin_ceiling
    else:
        damage_ceiling = max(1.0, float(np.abs(np.asarray(d, dtype=np.float64)).max(initial=0.0)))
    noise, baseline_score, n_resamples, seed = ev.noise, ev.baseline_score, s.n_resamples, s.seed
    power, order_seed = s.power, ev.order_seed
    expected_shift = -s.expected_shift  # oriented: higher is better
    # the margin itself was checked where the settings were made (schema.metrics.margin_problem); what is left is
    # the range it is judged against, the data's own for a metric with none registered
    if not margin < damage_ceiling:
        raise ValueError(f"margin {margin!r}: must be below the metric's range {damage_ceiling:g}")
    for name, a in (("alpha", alpha), ("look_alpha", alpha if look_alpha is None else look_alpha)):
        if not 0 < a < 0.5:
            raise ValueError(f"{name} {a!r}: a one-sided level in (0, 0.5)")
    interval_alpha = alpha if look_alpha is None else look_alpha
    D_decl = check_damage("worst_page_damage", s.worst_page_damage, s.metric, margin, damage_ceiling)
    Dd_decl = check_damage("worst_document_damage", s.worst_document_damage, s.metric, margin, D_decl or damage_ceiling)
    docs, ids = documents_of(d, document_ids)
    G = docs.pages.shape[1]
    if G < 2:
        raise ValueError("documents: a comparison needs at least 2 documents")
    cl = cluster_summary(docs)
    counts = list(resample_counts(G, n_resamples, seed))
    b = cluster_bounds(docs, margin, interval_alpha, counts, cl)
    floor = noise_mean = None
    if noise is not None:
        e = np.asarray(noise, dtype=np.float64)
        if e.shape != np.shape(d):
            raise ValueError("noise: the noise run must cover the same pages as the comparison")
        edocs, _ = documents_of(e, document_ids)
        floor = noise_floor(edocs, alpha, list(resample_counts(G, n_resamples, seed + 1)))
        noise_mean = float(e.mean())
    D, Dd, page_ref, doc_ref = damage_in_force(docs, D_decl, damage_ceiling, Dd_decl)
    pages_rule, docs_rule = rare_failure_count(margin, D, alpha), documents_rule(margin, Dd, cl.size_ratio, alpha)
    ok = baseline_fit(np.nan if baseline_score is None else baseline_score,
                      None if baseline_score is None else s.baseline_floor, s.higher_is_better,
                      None if baseline_score is None else ev.empty_output_mean)
    all_zero = bool(np.all(docs.sumsq == 0))
    pos = {x: i for i, x in enumerate(ids)}
    ordered = [pos[x] for x in document_order(ids, order_seed)]
    in_order = Documents(*(a[:, ordered] for a in (docs.pages, docs.total, docs.sumsq, docs.worst)))
    wealth = float(log_wealth(in_order, margin, Dd)[0, -1])
    rules = Rules.of(s)
    v, r = classify(cl, b, margin, Facts(pages_rule=pages_rule, documents_rule=docs_rule,
                                         bounded_ok=wealth >= math.log(1 / alpha), all_zero=all_zero,
                                         outputs_identical=bool(ev.outputs_identical), noise_floor=floor,
                                         baseline_ok=ok), rules)
    verdict, reason = VERDICTS[int(v[0])], REASONS[int(r[0])]
    need = Plan(None, None, expected_shift)
    if verdict == "inconclusive" and reason != "baseline_unfit":
        need = plan(cl, b, margin, damage_document=Dd, rules=rules, expected_shift=expected_shift,
                    pages_rule=pages_rule, documents_rule=docs_rule)
        if reason == "noise_exceeds_margin" and need.documents is not None and floor is not None:
            need = _with_noise(need, cluster_summary(edocs), float(floor[0]), margin, alpha, power)
    lo_from = ("unbounded" if not np.isfinite(b.lo[0]) else
               "studentized_hall" if b.lo_hall[0] <= b.lo_t[0] else "student_t")

    def source(declared, refuted, default):
        return default if declared is None else f"{default} (declared value exceeded)" if refuted else "declared"

    return Decision(
        verdict=verdict, reason=reason, mean=float(b.mean[0]), ci_low=float(b.lo[0]), ci_high=float(b.hi[0]),
        margin=margin, alpha=alpha, look_alpha=interval_alpha, pages=int(cl.pages[0]), documents=G,
        largest_document=int(cl.largest_document[0]), design_effect=float(cl.design_effect[0]),
        effective_n=float(cl.effective_n[0]), interval="degenerate" if b.degenerate[0] else "cluster_hall_t",
        lower_bound_from=lo_from, p_regression=float(b.p_regression[0]),
        # the interval's p and the bounded test's (1/wealth, an e-value's p): at most α exactly when both reject
        p_noninferiority=max(float(b.p_noninferiority[0]), min(1.0, math.exp(-wealth))),
        noise_floor=None if floor is None else float(floor[0]), noise_mean=noise_mean,
        worst_page_damage=float(D[0]), worst_page_damage_source=source(D_decl, page_ref[0], "range"),
        worst_document_damage=float(Dd[0]),
        worst_document_damage_source=source(Dd_decl, doc_ref[0], "worst_page_damage"),
        rare_failure_pages=int(pages_rule[0]), rare_failure_documents=int(docs_rule[0]), bounded_log_wealth=wealth,
        bounded_low=bounded_lower(in_order, float(Dd[0]), alpha), baseline_score=baseline_score,
        baseline_floor=s.baseline_floor, pages_needed=None if need.pages is None else int(need.pages[0]),
        documents_needed=None if need.documents is None else int(need.documents[0]), planning_shift=expected_shift,
        n_resamples=n_resamples, seed=seed, order_seed=order_seed)


def assumption(dec: Decision) -> str:
    """The sentence a verdict states about what it assumes."""
    doc = ("" if dec.worst_document_damage >= dec.worst_page_damage else
           f" and no document by more than {dec.worst_document_damage:g} on average")
    return f"assuming no page is damaged by more than {dec.worst_page_damage:g}{doc}"


# --- sequential looks ------------------------------------------------------------------------------

def document_order(document_ids, seed: int) -> list[str]:
    """The seeded order in which to serve documents (all pages of one together): by SHA-256 of (seed,
    document id), independent of the input order and of which other documents are in the set."""
    ids = sorted({str(i) for i in document_ids})
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f"seed {seed!r}: must be an integer >= 0")
    return sorted(ids, key=lambda i: hashlib.sha256(f"{seed}\x00{i}".encode()).hexdigest())


def page_order(page_documents: dict[str, str], seed: int) -> list[str]:
    """Pages in serving order: documents in ``document_order``, a document's pages together (by page id)."""
    by_doc: dict[str, list[str]] = {}
    for page, doc in page_documents.items():
        by_doc.setdefault(str(doc), []).append(str(page))
    return [p for doc in document_order(by_doc, seed) for p in sorted(by_doc[doc])]


def plan_looks(pages_per_document: Sequence[int], *, n_looks: int, first_pages: int, first_documents: int) -> list[int]:
    """Looks, as numbers of documents in serving order: equally spaced in pages, each at the first document
    boundary at or past its share of the pages, none before ``first_pages`` pages and ``first_documents``
    documents (give the rare-failure counts: a look that cannot pass is a look spent), the last at every
    document. A look less than half a spacing after the previous one is dropped (the last replaces it)."""
    cum = np.cumsum(np.asarray(pages_per_document, dtype=np.int64))
    if len(cum) == 0 or n_looks < 1:
        raise ValueError("plan_looks: needs documents and n_looks >= 1")
    G, N = len(cum), int(cum[-1])
    start = max(int(np.searchsorted(cum, first_pages)) + 1, first_documents)
    if start >= G:
        return [G]
    looks: list[int] = []
    for k in range(1, n_looks + 1):
        g = max(int(np.searchsorted(cum, N * k / n_looks - 1e-9)) + 1, start)
        if looks and (g <= looks[-1] or cum[g - 1] - cum[looks[-1] - 1] < N / n_looks / 2):
            if g == G:
                looks[-1] = G
            continue
        looks.append(min(g, G))
    if looks[-1] != G:
        looks.append(G)
    return looks
