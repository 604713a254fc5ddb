"""A verdict: the words (verdict and reason, defined here once), the settings a paired comparison is made
with (:class:`Comparison`, checked once when it is made), the record itself (:class:`Verdict`) and the one
constructor every verdict is built by (:func:`new_verdict`: orientation, rounding residue and the
sentence a reader sees). The statistics that fill it are ``quantgate.judge``; docs/statistics.md says why."""

from __future__ import annotations

import math
from typing import Literal, get_args

from pydantic import Field

from quantgate.errors import InputError
from quantgate.schema.base import Record
from quantgate.schema.metrics import MarginSource, declared_margin, metric_spec

VerdictName = Literal["within_noise", "regression", "inconclusive", "not_equivalent"]
ReasonName = Literal["ci_inside_margin", "ci_beyond_margin", "ci_straddles_margin", "noise_exceeds_margin",
                     "too_few_pages", "identical_outputs", "outputs_differ"]
IntervalName = Literal["studentized_hall", "bca", "percentile", "degenerate"]
TestName = Literal["non_inferiority", "equivalence", "exact"]
VERDICTS: tuple[VerdictName, ...] = get_args(VerdictName)
REASONS: tuple[ReasonName, ...] = get_args(ReasonName)
INTERVALS: tuple[IntervalName, ...] = get_args(IntervalName)
DECISIVE: tuple[VerdictName, ...] = ("within_noise", "regression", "not_equivalent")

DEFAULT_RESAMPLES = 10_000
MIN_RESAMPLES = 1_000  # a 5% tail from fewer resamples rests on a few dozen values
DEFAULT_CONFIDENCE = 0.90  # coverage of [ci_low, ci_high]; each end is a one-sided 95% bound
DEFAULT_POWER = 0.80
MIN_PAGES = 30  # below it the skewed page model of the calibration benchmark falsely passes > 6%
POWER_METHOD = "normal approximation at the observed mean; spread from the interval, at least the pages' sd"


class Comparison(Record):
    """How one paired comparison is made: the metric, its direction and declared margin, the test and the
    resampling. Made by :meth:`make`, which checks every number once, before any page is resampled."""

    metric: str
    higher_is_better: bool
    margin: float
    margin_source: MarginSource
    test: TestName = "non_inferiority"
    seed: int = 0
    n_resamples: int = DEFAULT_RESAMPLES
    confidence: float = DEFAULT_CONFIDENCE
    min_pages: int = MIN_PAGES
    power: float = DEFAULT_POWER

    @property
    def alpha(self) -> float:
        """Each end of the interval is a one-sided test at this level."""
        return (1 - self.confidence) / 2

    @classmethod
    def make(cls, metric: str, *, margin: float | None = None, higher_is_better: bool | None = None,
             test: TestName = "non_inferiority", seed: int = 0, n_resamples: int = DEFAULT_RESAMPLES,
             confidence: float = DEFAULT_CONFIDENCE, min_pages: int = MIN_PAGES,
             power: float = DEFAULT_POWER) -> Comparison:
        """``margin=None``: the registry's declared margin; ``higher_is_better`` (and a margin) for metrics
        outside the registry, e.g. lm-eval's."""
        value, source = declared_margin(metric, margin)
        if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
            raise InputError(f"seed {seed!r}: must be an integer >= 0")
        if isinstance(n_resamples, bool) or not isinstance(n_resamples, int) or n_resamples < MIN_RESAMPLES:
            raise InputError(f"resamples {n_resamples!r}: must be an integer >= {MIN_RESAMPLES} (a 5% tail needs at "
                             f"least ~1,000 resamples; the default is {DEFAULT_RESAMPLES})")
        if not (isinstance(confidence, float) and 0.5 <= confidence < 1):
            raise InputError(f"confidence {confidence!r}: must be in [0.5, 1)")
        if isinstance(min_pages, bool) or not isinstance(min_pages, int) or min_pages < 2:
            raise InputError(f"min_pages {min_pages!r}: must be an integer >= 2")
        hib = metric_spec(metric).higher_is_better if higher_is_better is None else higher_is_better
        return cls(metric=metric, higher_is_better=hib, margin=value, margin_source=source, test=test, seed=seed,
                   n_resamples=n_resamples, confidence=confidence, min_pages=min_pages, power=power)


class Verdict(Record):
    """One paired comparison (docs/statistics.md). Interval, delta and noise are in the metric's own
    units and direction; the tests themselves run on differences oriented so that higher is better."""

    schema_version: Literal[2] = 2
    metric: str
    higher_is_better: bool
    verdict: VerdictName
    reason: ReasonName
    test: TestName
    message: str  # what the verdict means and, when it does not decide, what to do
    n: int
    baseline_mean: float
    candidate_mean: float
    delta: float  # mean(candidate - baseline), metric's own units
    ci_low: float
    ci_high: float
    confidence: float  # coverage of [ci_low, ci_high]; each end is a one-sided test at level alpha
    alpha: float
    interval: IntervalName
    margin: float  # the declared margin: never widened by data
    requested_margin: float  # kept for schema-1 readers; equals margin
    margin_source: MarginSource
    noise_floor: float | None  # one-sided (1 - alpha) upper bound on |baseline' - baseline| mean shift
    noise_delta: float | None = None  # mean(baseline' - baseline), metric's own units
    seed: int
    n_resamples: int
    min_pages: int
    power: float
    pages_needed: int | None = None
    pages_needed_method: str
    p_regression: float  # one-sided p of H0 "shift no worse than -margin", from the same interval
    p_noninferiority: float  # one-sided p of H0 "shift at least margin worse" (1 - p_regression)
    p_regression_holm: float | None = None  # set by quantgate.judge.family.adjust_family
    pages_changed: int | None = None  # pages whose output text differs (score rows with output_sha256)
    pages_compared: int | None = None
    missing_pages: list[str] = Field(default_factory=list)


def clean(x: float) -> float:
    """No "-0.0000" in reports: rounding residue of the resampling (or an undefined mean) is not a shift."""
    return 0.0 if abs(x) < 1e-13 or not math.isfinite(x) else x + 0.0


def new_verdict(c: Comparison, *, verdict: VerdictName, reason: ReasonName, n: int, baseline_mean: float,
                candidate_mean: float, delta: float, lo: float, hi: float, interval: IntervalName, p_regression: float,
                noise_floor: float | None, noise_delta: float | None = None, pages_needed: int | None = None,
                pages_changed: int | None = None, pages_compared: int | None = None,
                missing_pages: list[str] | None = None, confidence: float | None = None,
                alpha: float | None = None) -> Verdict:
    """The verdict record. ``lo``/``hi`` are the bounds oriented so that higher is better, as the tests
    make them; the record holds them in the metric's own direction. ``confidence``/``alpha``: the interval's
    own level when it is not the comparison's (a sequential look's nominal level)."""
    ulo, uhi = (lo, hi) if c.higher_is_better else (-hi, -lo)
    v = Verdict(metric=c.metric, higher_is_better=c.higher_is_better, verdict=verdict, reason=reason, test=c.test,
                message="", n=n, baseline_mean=baseline_mean, candidate_mean=candidate_mean, delta=clean(delta),
                ci_low=clean(ulo), ci_high=clean(uhi), confidence=c.confidence if confidence is None else confidence,
                alpha=c.alpha if alpha is None else alpha, interval=interval, margin=c.margin,
                requested_margin=c.margin, margin_source=c.margin_source, noise_floor=noise_floor,
                noise_delta=None if noise_delta is None else clean(noise_delta), seed=c.seed,
                n_resamples=c.n_resamples, min_pages=c.min_pages, power=c.power, pages_needed=pages_needed,
                pages_needed_method=POWER_METHOD, p_regression=p_regression, p_noninferiority=1 - p_regression,
                pages_changed=pages_changed, pages_compared=pages_compared, missing_pages=list(missing_pages or []))
    return v.model_copy(update={"message": explain(v, lo, hi)})


def explain(v: Verdict, lo: float, hi: float) -> str:
    """One sentence: what the verdict rests on and, when it does not decide, what to do. ``lo``/``hi``
    are the oriented bounds (higher is better)."""
    one = f"one-sided {(1 - v.alpha) * 100:.4g}%"  # 95%; a sequential look's nominal level, e.g. 99.99%
    m = v.margin
    if v.reason == "outputs_differ":
        return f"{v.pages_changed} of {v.pages_compared} pages' outputs differ; --exact passes only identical outputs"
    if v.reason == "identical_outputs":
        return ("every page's output is byte-identical" if v.test == "exact"
                else "every page scored exactly the same on both sides")
    if v.reason == "too_few_pages":
        return (f"{v.n} paired pages, below the minimum of {v.min_pages} for a calibrated interval: "
                f"score at least {v.pages_needed} pages")
    if v.reason == "noise_exceeds_margin":
        fix = (f"score more pages (about {v.pages_needed} would bring the floor under the margin at "
               f"{v.power:.0%} power)" if v.pages_needed else
               f"more pages will not help: the baseline's own mean shift, {abs(v.noise_delta or 0.0):.4f}, reaches "
               "the margin")
        return (f"the baseline moves up to {v.noise_floor:.4f} against itself (noise floor, {one} bound), more than "
                f"the margin {m:.4f}, so a pass would not mean the candidate is as good: declare a larger margin, "
                f"{fix}, or serve batch-invariantly so that re-runs agree")
    if v.reason == "ci_inside_margin":
        worse = f"at worst {max(0.0, -lo):.4f} worse than the baseline ({one} bound)"
        if v.test == "equivalence":
            return f"{worse} and at most {max(0.0, hi):.4f} better: both inside ±{m:.4f}"
        return f"{worse}, inside the margin {m:.4f}"
    if v.reason == "ci_beyond_margin":
        if v.verdict == "not_equivalent":
            return (f"at least {lo:.4f} better than the baseline ({one} bound), beyond the margin {m:.4f}: "
                    "the equivalence test fails a candidate that differs in either direction")
        return f"at least {-hi:.4f} worse than the baseline ({one} bound), beyond the margin {m:.4f}"
    need = (f"about {v.pages_needed} pages would decide it at {v.power:.0%} power ({v.pages_needed_method})"
            if v.pages_needed else "the observed shift sits on the margin: no number of pages decides it")
    return f"the {v.confidence:.0%} interval crosses the margin {m:.4f}; {need}"
