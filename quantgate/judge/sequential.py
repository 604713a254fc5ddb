"""Group-sequential verdicts: serve pages in a seeded random order, look at the verdicts after each
batch, and stop a variant's accuracy pass as soon as every verdict is decisive (docs/statistics.md,
"Sequential verdicts"; simulated in benchmarks/sequential_verdicts.py).

Each look k (after n_k pages) runs the fixed-design verdict of ``clustered`` (documents as the unit, the
rare-failure rule and the bounded test at the design's alpha) on the first n_k pages, the interval at a
nominal one-sided level α_k instead of 5%: non-inferiority passes when the lower end of the
(1 − 2α_k) interval clears −margin, a regression is called when the upper end lies below −margin.
α_k = 1 − Φ(c_k), where c_1, c_2, … are Lan–DeMets alpha-spending boundaries for the z statistics of the
nested page sets (joint normal, corr(Z_j, Z_k) = √(n_j/n_k)): the chance of ever crossing, at a
true shift of exactly one margin, is the spent alpha, 5% by the last look. Each side (pass,
regression) spends its own 5%; stopping on one side only removes chances to cross the other, so
each error stays at or below its 5%. A metric's verdict is frozen at the look where it first
became decisive; the pass stops when all are, or at the last look, which spends what is left.
The boundaries: ``quantgate.judge.boundaries``.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np

from quantgate.errors import InputError
from quantgate.judge import clustered as C
from quantgate.judge import stats
from quantgate.judge.boundaries import check_looks, design, repeated_p
from quantgate.judge.compare import within_range
from quantgate.schema.metrics import METRICS
from quantgate.schema.sequential import LookBoundary, SequentialDecision, SequentialMetric, Spending
from quantgate.schema.settings import ALPHA, MIN_PAGES, VerdictSettings
from quantgate.schema.verdict import DECISIVE

# The first look: the interval is calibrated at 5% from 30 pages (MIN_PAGES), but early looks test at
# far smaller levels, where 30 skewed pages are not: at a nominal 0.1% they pass a candidate one margin
# worse 1.5% of the time, 60 pages 0.35% (benchmarks/sequential_verdicts.py, "small_n"); a plan whose
# first look is at 30 pages falsely passed 6.0% of 400-page skewed studies, from 60 pages 5.2%.
FIRST_LOOK = 2 * MIN_PAGES


# --- the plan: looks and page order ----------------------------------------------------------

def plan_looks(n_max: int, *, first: int | None = None, step: int | None = None, n_looks: int | None = None,
               min_pages: int = MIN_PAGES) -> list[int]:
    """Page counts at which to look. ``n_looks``: equally spaced fractions of ``n_max`` (every 25% is
    ``n_looks=4``); ``step``: every ``step`` pages. No look before ``first`` (default FIRST_LOOK, 60
    pages; never below ``min_pages``, under which no verdict is decisive). A look less than half a
    step after the previous one is dropped (the final look at ``n_max`` replaces it), so no look is
    spent on a handful of pages."""
    for name, v in (("n_max", n_max), ("first", first), ("step", step), ("n_looks", n_looks)):
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 1):
            raise InputError(f"{name} {v!r}: must be a positive integer")
    if (step is None) == (n_looks is None):
        raise InputError("give either step (pages between looks) or n_looks (equally spaced looks), not both")
    first = max(min_pages, FIRST_LOOK if first is None else first)
    if n_max <= first:
        return [n_max] if n_max >= 2 else check_looks([n_max])
    spacing: float
    if n_looks is not None:
        raw = [round(n_max * k / n_looks) for k in range(1, n_looks + 1)]
        spacing = n_max / n_looks
    else:
        assert step is not None  # one of the two, checked above
        raw = list(range(step, n_max + 1, step))
        spacing = step
    looks: list[int] = []
    for n in sorted({max(n, first) for n in raw if n < n_max} | {n_max}):
        if looks and n - looks[-1] < spacing / 2:  # too close to the last look to be worth one
            if n == n_max:
                looks[-1] = n_max
            continue
        looks.append(n)
    return looks


def page_order(page_ids, seed: int) -> list[str]:
    """The seeded random order in which to serve pages: by SHA-256 of (seed, page id), so it does
    not depend on the order the ids come in, on numpy, or on which other pages are in the set."""
    ids = [str(i) for i in page_ids]
    if len(set(ids)) != len(ids):
        dup = sorted({i for i in ids if ids.count(i) > 1})
        raise InputError(f"page ids repeat: {dup[:10]}; each page must appear once")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise InputError(f"seed {seed!r}: must be an integer >= 0")
    return sorted(ids, key=lambda i: hashlib.sha256(f"{seed}\x00{i}".encode()).hexdigest())


# --- one look ----------------------------------------------------------------------------------

def look_verdicts(d: np.ndarray, margin: float, nominal_alpha: float, indices, *, floor=None,
                  equivalence: bool = False, min_pages: int = MIN_PAGES, moments=None):
    """The fixed-design verdict at a look's nominal level, for S studies at once (``d`` is (S, n),
    oriented; ``indices`` from ``stats.resample_indices``; ``moments`` from ``stats.bootstrap_moments``
    when several levels are judged on the same pages): verdict and reason codes and the bounds."""
    d = np.atleast_2d(np.asarray(d, dtype=np.float64))
    b = stats.paired_bounds(d, margin, nominal_alpha, indices, moments=moments)
    v, r = stats.classify(d.shape[1], b, np.all(d == 0, axis=1), floor, margin,
                          equivalence=equivalence, min_pages=min_pages)
    return v, r, b


# --- the decision at a look --------------------------------------------------------------------

@dataclass(frozen=True)
class LookPages:
    """The pages served so far, *in ``page_order``*, per metric: ``d`` the oriented differences (higher is
    better; NaN where a page has no value), ``noise`` the baseline re-run's (optional), ``baseline`` the baseline's
    own page scores (for baseline_score), ``empty`` what an empty output scores on each page in the metric's own
    units (NaN where not scored; the baseline must beat its mean on a look's pages, as in the fixed design); per
    page: ``documents`` (None: each page its own) and ``same_output`` (both outputs hash the same;
    identical_outputs needs every one)."""

    d: dict[str, np.ndarray]
    noise: dict[str, np.ndarray] | None = None
    documents: list[str] | None = None
    baseline: dict[str, np.ndarray] | None = None
    same_output: np.ndarray | None = None
    empty: dict[str, np.ndarray] | None = None


def _look_mean(values: np.ndarray | None, upto: int, keep: np.ndarray) -> float | None:
    """The mean of ``values`` over a look's judged pages (the first ``upto``, where ``keep``); None without values
    or when one of those pages has none (then it is not the same pages, as ``judge.compare.empty_output_mean``)."""
    if values is None:
        return None
    v = np.asarray(values, dtype=np.float64)[:upto][keep]
    return None if len(v) == 0 or bool(np.isnan(v).any()) else float(v.mean())


def _evaluate(s: VerdictSettings, pages: LookPages, bound: LookBoundary, repeated: tuple, best_p: float
              ) -> SequentialMetric:
    """One metric at one look: the document-level verdict of ``judge.clustered`` on the look's pages, the
    interval at the look's nominal level, the count rules and the bounded test at the design's alpha.
    ``repeated``: (looks, n_max, spending) for the repeated p-value."""
    metric, margin = s.metric, s.margin
    d = pages.d[metric][: bound.pages]
    keep = ~np.isnan(d)  # a page without a value for this metric (e.g. no table) is left out
    d = d[keep]
    documents = pages.documents or [f"page {i}" for i in range(len(pages.d[metric]))]
    docs = [x for x, k in zip(documents[: bound.pages], keep, strict=True) if k]
    n = len(d)
    if n < 2 or len(set(docs)) < 2:
        return SequentialMetric(metric=metric, verdict="inconclusive",
                                reason="too_few_pages" if n < 2 else "too_few_documents", decisive=False,
                                decided_at_look=None, pages=n, mean=float(d.mean()) if n else None, ci_low=None,
                                ci_high=None, nominal_alpha=bound.nominal_alpha, interval=None, margin=margin,
                                noise_floor=None, p_regression_nominal=None, p_regression=best_p)
    base = None if pages.baseline is None else pages.baseline.get(metric)
    e = None if pages.noise is None else pages.noise.get(metric)
    same = pages.same_output
    empty = None if pages.empty is None else pages.empty.get(metric)
    ev = C.Evidence(outputs_identical=None if same is None else bool(np.all(np.asarray(same)[: bound.pages][keep])),
                    baseline_score=None if base is None else float(np.nanmean(base[: bound.pages][keep])),
                    empty_output_mean=_look_mean(empty, bound.pages, keep),
                    noise=None if e is None else e[: bound.pages][keep], look_alpha=bound.nominal_alpha)
    dec = C.decide(d, docs, s, ev)  # the count rule and the bounded test at the settings' alpha
    decisive = dec.verdict in DECISIVE
    ceiling = METRICS[metric].margin_ceiling if metric in METRICS else 1.0
    lo, hi = within_range(dec.ci_low, dec.ci_high, ceiling)
    p_nom = dec.p_regression
    looks, n_max, spending = repeated
    p_rep = min(best_p, repeated_p(p_nom, bound.look, looks, n_max, spending)) if n >= s.min_pages else best_p
    return SequentialMetric(metric=metric, verdict=dec.verdict, reason=dec.reason, decisive=decisive,
                            decided_at_look=bound.look if decisive else None, pages=n, mean=dec.mean,
                            ci_low=lo, ci_high=hi, nominal_alpha=bound.nominal_alpha,
                            interval=dec.interval, margin=margin, noise_floor=dec.noise_floor,
                            p_regression_nominal=p_nom, p_regression=p_rep)


def _shared(settings: dict[str, VerdictSettings]) -> VerdictSettings:
    """The settings every metric of one sequential design shares (seed, resamples, minimum, test)."""
    first = next(iter(settings.values()))
    for m, s in settings.items():
        if (s.seed, s.n_resamples, s.min_pages, s.test) != (first.seed, first.n_resamples, first.min_pages,
                                                             first.test):
            raise InputError(f"settings for {m!r}: seed, resamples, min_pages and test must be the same for every "
                             "metric of a sequential design")
    return first


def sequential_decide(look: int, looks: list[int], pages: LookPages, settings: dict[str, VerdictSettings], *,
                      previous: SequentialDecision | None = None, n_max: int | None = None,
                      spending: Spending = "obrien_fleming") -> SequentialDecision:
    """The decision at ``look`` (1-based) of the plan ``looks``: ``pages`` holds at least ``looks[look-1]`` pages
    per metric, ``settings`` each metric's verdict settings (its margin and rules). ``previous``: the decision at
    ``look - 1``, whose decisive metrics stay frozen; without it the earlier looks are replayed (same seed, same
    answer)."""
    alpha = ALPHA
    plan = design(looks, n_max=n_max, alpha=alpha, spending=spending)
    n_max = looks[-1] if n_max is None else n_max
    if isinstance(look, bool) or not isinstance(look, int) or not 1 <= look <= len(looks):
        raise InputError(f"look {look!r}: must be 1..{len(looks)} (a look of the plan {looks})")
    d_by_metric = pages.d
    if not d_by_metric:
        raise InputError("no metrics to decide: d_by_metric is empty")
    n_pages = looks[look - 1]
    arrays, noise = {}, {}
    if pages.documents is not None and len(pages.documents) < n_pages:
        raise InputError(f"documents: {len(pages.documents)} given, but look {look} needs the first {n_pages} pages'")
    for m, d in d_by_metric.items():
        if m not in settings:
            raise InputError(f"metric {m!r}: no margin given (settings for {sorted(settings)})")
        arrays[m] = np.asarray(d, dtype=np.float64)
        if arrays[m].ndim != 1 or len(arrays[m]) < n_pages:
            raise InputError(f"metric {m!r}: {len(arrays[m])} page differences, but look {look} needs the first "
                             f"{n_pages}")
        if pages.noise is not None and m in pages.noise:
            noise[m] = np.asarray(pages.noise[m], dtype=np.float64)
            if len(noise[m]) < n_pages or np.isnan(noise[m][:n_pages])[~np.isnan(arrays[m][:n_pages])].any():
                raise InputError(f"noise run for {m!r}: must cover the first {n_pages} pages the comparison has")
    shared = _shared({m: settings[m] for m in arrays})
    seed, n_resamples, min_pages, test = shared.seed, shared.n_resamples, shared.min_pages, shared.test
    for m, v in (pages.empty or {}).items():
        if m in arrays and len(v) < n_pages:
            raise InputError(f"empty output for {m!r}: {len(v)} page scores, but look {look} needs the first {n_pages}")
    data = LookPages(arrays, noise or None, None if pages.documents is None else [str(x) for x in pages.documents],
                     pages.baseline, pages.same_output, pages.empty)
    if previous is not None:
        # the looks already made must match; later ones may change (a budget that ended early)
        same = (previous.looks[: look - 1] == list(looks[: look - 1]) and previous.n_max == n_max
                and previous.spending == spending
                and previous.alpha == alpha and previous.seed == seed and previous.test == test
                and previous.n_resamples == n_resamples and previous.min_pages == min_pages)
        if not same or previous.look != look - 1 or set(previous.metrics) != set(arrays):
            raise InputError(f"previous decision (look {previous.look}) is not look {look - 1} of this plan with the "
                             "same metrics and settings; pass previous=None to replay the looks")
        if previous.stop:
            raise InputError(f"the pass already stopped at look {previous.look} ({previous.stop_reason})")
        start, state = look, dict(previous.metrics)
    else:
        start, state = 1, {}
    for k in range(start, look + 1):
        for m in arrays:
            if m in state and state[m].decisive:
                continue  # frozen at its decisive look
            best = state[m].p_regression if m in state else 1.0
            state[m] = _evaluate(settings[m], data, plan[k - 1], (looks, n_max, spending), best)
        if k < look and all(s.decisive for s in state.values()):
            raise InputError(f"the pass already stopped at look {k} (every verdict decisive); do not look again")
    done = all(s.decisive for s in state.values())
    last = look == len(looks)
    return SequentialDecision(test=test, spending=spending, alpha=alpha, n_max=n_max, looks=list(looks), plan=plan,
                              seed=seed, n_resamples=n_resamples, min_pages=min_pages, look=look, pages_used=n_pages,
                              alpha_spent=plan[look - 1].alpha_spent, stop=done or last,
                              stop_reason="all_decisive" if done else "page_budget" if last else None, metrics=state)
