"""A verdict: the words (verdict and reason, defined here once), the settings a paired comparison is made
with (:class:`Comparison`, checked once when it is made), the record itself (:class:`Verdict`) and the one
constructor every verdict is built by (:func:`new_verdict`: orientation, rounding residue and the
sentence a reader sees). The statistics that fill it are ``quantgate.judge``; docs/statistics.md says why."""

from __future__ import annotations

import math
from typing import Any, Literal, get_args

from pydantic import Field, model_validator

from quantgate.errors import InputError
from quantgate.schema.base import Record
from quantgate.schema.metrics import METRICS, MarginSource, check_setting, declared_margin, metric_spec

VerdictName = Literal["within_noise", "regression", "inconclusive", "not_equivalent"]
ReasonName = Literal["ci_inside_margin", "ci_beyond_margin", "ci_straddles_margin", "noise_exceeds_margin",
                     "too_few_pages", "too_few_documents", "rare_failures_not_ruled_out", "identical_outputs",
                     "identical_scores", "baseline_unfit", "outputs_differ"]
# cluster_hall_t: documents resampled, each end the outer of the Hall bootstrap and Student-t (judge.clustered);
# studentized_hall/bca/percentile: the page-level intervals of schema-2 verdicts, kept so old summaries read
IntervalName = Literal["cluster_hall_t", "studentized_hall", "bca", "percentile", "degenerate"]
DamageSource = Literal["metric default", "declared", "exceeded"]  # exceeded: a page (document) was damaged more
FlipSource = Literal["output_sha256", "scores"]
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
# below 30 documents the interval alone falsely passed > 6% of clustered studies (judge.clustered says where)
MIN_DOCUMENTS = 30
WORSE_THRESHOLD_MARGINS = 10  # default threshold of pages_worse: ten margins (0.1 ned: ten characters in a hundred)
POWER_METHOD = ("at the planning shift (not the observed one), documents like the study's, spread at its 80% upper "
                "bound; never below the rare-failure counts")


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
    # the document-level verdict's settings (None: the metric registry's default)
    min_documents: int = MIN_DOCUMENTS
    worst_page_damage: float | None = None
    worst_document_damage: float | None = None
    baseline_floor: float | None = None
    expected_shift: float = 0.0  # planning alternative: how much worse (metric units, >= 0) the candidate may be
    worse_threshold: float | None = None  # pages_worse counts pages worse by more (default ten margins)

    @property
    def alpha(self) -> float:
        """Each end of the interval is a one-sided test at this level."""
        return (1 - self.confidence) / 2

    @classmethod
    def make(cls, metric: str, *, margin: float | None = None, higher_is_better: bool | None = None,
             test: TestName = "non_inferiority", seed: int = 0, n_resamples: int = DEFAULT_RESAMPLES,
             confidence: float = DEFAULT_CONFIDENCE, min_pages: int = MIN_PAGES,
             power: float = DEFAULT_POWER, min_documents: int = MIN_DOCUMENTS, worst_page_damage: float | None = None,
             worst_document_damage: float | None = None, baseline_floor: float | None = None,
             expected_shift: float = 0.0, worse_threshold: float | None = None) -> Comparison:
        """``margin=None``: the registry's declared margin; ``higher_is_better`` (and a margin) for metrics
        outside the registry, e.g. lm-eval's. ``baseline_floor=None``: the registry's floor (metrics outside it
        have none); ``worst_page_damage=None``: the metric's default (its range)."""
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
        if isinstance(min_documents, bool) or not isinstance(min_documents, int) or min_documents < 2:
            raise InputError(f"min_documents {min_documents!r}: must be an integer >= 2")
        D = check_setting(metric, "worst_page_damage", worst_page_damage, value)
        Dd = check_setting(metric, "worst_document_damage", worst_document_damage, value)
        if D is not None and Dd is not None and Dd > D:
            raise InputError(f"worst_document_damage for {metric}: {Dd:g} is above worst_page_damage {D:g}; a "
                             "document's mean damage cannot exceed its worst page's")
        floor = check_setting(metric, "baseline_floor", baseline_floor, value)
        if floor is None and metric in METRICS:
            floor = METRICS[metric].baseline_floor
        if not (isinstance(expected_shift, (int, float)) and not isinstance(expected_shift, bool)
                and 0 <= expected_shift < value):
            raise InputError(f"expected_shift for {metric}: {expected_shift!r} must be >= 0 (how much worse the "
                             f"candidate may truly be) and below the margin {value:g} (no study passes a candidate "
                             "a whole margin worse)")
        if worse_threshold is not None and not (isinstance(worse_threshold, (int, float)) and worse_threshold > 0):
            raise InputError(f"worse_threshold for {metric}: {worse_threshold!r} must be a number > 0")
        hib = metric_spec(metric).higher_is_better if higher_is_better is None else higher_is_better
        return cls(metric=metric, higher_is_better=hib, margin=value, margin_source=source, test=test, seed=seed,
                   n_resamples=n_resamples, confidence=confidence, min_pages=min_pages, power=power,
                   min_documents=min_documents, worst_page_damage=D, worst_document_damage=Dd, baseline_floor=floor,
                   expected_shift=float(expected_shift),
                   worse_threshold=WORSE_THRESHOLD_MARGINS * value if worse_threshold is None else worse_threshold)


class Verdict(Record):
    """One paired comparison (docs/statistics.md). Interval, delta and noise are in the metric's own
    units and direction; the tests themselves run on differences oriented so that higher is better."""

    # 3: documents as the unit: the document-level fields below; 2 is read (they are then None)
    schema_version: Literal[3] = 3
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
    # --- documents, rare failures, the baseline, flips (None in schema-2 verdicts and under exact) ----
    documents: int | None = None  # documents compared (a page without a document is its own)
    largest_document: int | None = None  # pages of the largest
    design_effect: float | None = None  # Kish: the document-level variance over the page-level one
    effective_n: float | None = None  # pages / max(1, design_effect)
    min_documents: int | None = None
    worst_page_damage: float | None = None  # D: no page damaged by more, the assumption a pass states
    worst_page_damage_source: DamageSource | None = None
    worst_document_damage: float | None = None  # D_doc: no document's mean damaged by more
    worst_document_damage_source: DamageSource | None = None
    rare_failure_pages: int | None = None  # effective pages a pass needs: ceil(ln alpha / ln(1 - margin/D))
    rare_failure_documents: int | None = None  # documents a pass needs (whole-document failures)
    baseline_score: float | None = None  # the baseline's own mean score on the judged pages (clipped for cer/wer)
    baseline_floor: float | None = None  # past it: baseline_unfit
    documents_needed: int | None = None  # beside pages_needed, at planning_shift
    planning_shift: float | None = None  # the planning alternative: worse by this much (metric units, >= 0)
    lower_bound_from: Literal["studentized_hall", "student_t", "unbounded"] | None = None
    bounded_log_wealth: float | None = None  # the bounded test: >= ln(1/alpha) rules out damage within D_doc
    flips: int | None = None  # pages whose output changed (Dutta et al. 2024)
    flips_source: FlipSource | None = None  # output_sha256, or (rows without hashes) pages whose score changed
    worse_threshold: float | None = None
    pages_worse: int | None = None  # pages worse than the baseline by more than worse_threshold
    pages_worse_ids: list[str] = Field(default_factory=list)  # the worst first, at most PAGES_WORSE_LISTED

    @model_validator(mode="before")
    @classmethod
    def _from_schema_2(cls, obj: Any) -> Any:
        if isinstance(obj, dict) and obj.get("schema_version") == 2:
            return {**obj, "schema_version": 3}
        return obj


PAGES_WORSE_LISTED = 50
# the issue-27 fields, which a sequential study's verdict rows copy from the document-level verdict of their look
DOCUMENT_FIELDS = tuple(list(Verdict.model_fields)[list(Verdict.model_fields).index("documents"):])


def clean(x: float) -> float:
    """No "-0.0000" in reports: rounding residue of the resampling (or an undefined mean) is not a shift."""
    return 0.0 if abs(x) < 1e-13 or not math.isfinite(x) else x + 0.0


def new_verdict(c: Comparison, *, verdict: VerdictName, reason: ReasonName, n: int, baseline_mean: float,
                candidate_mean: float, delta: float, lo: float, hi: float, interval: IntervalName, p_regression: float,
                noise_floor: float | None, noise_delta: float | None = None, pages_needed: int | None = None,
                pages_changed: int | None = None, pages_compared: int | None = None,
                missing_pages: list[str] | None = None, confidence: float | None = None,
                alpha: float | None = None, p_noninferiority: float | None = None, **documents: Any) -> Verdict:
    """The verdict record. ``lo``/``hi`` are the bounds oriented so that higher is better, as the tests
    make them; the record holds them in the metric's own direction. ``confidence``/``alpha``: the interval's
    own level when it is not the comparison's (a sequential look's nominal level). ``p_noninferiority``: when
    not 1 − p_regression (the document-level verdict's includes the bounded test). ``documents``: the issue-27
    fields of :class:`Verdict` (documents, design_effect, …)."""
    ulo, uhi = (lo, hi) if c.higher_is_better else (-hi, -lo)
    v = Verdict(metric=c.metric, higher_is_better=c.higher_is_better, verdict=verdict, reason=reason, test=c.test,
                message="", n=n, baseline_mean=baseline_mean, candidate_mean=candidate_mean, delta=clean(delta),
                ci_low=clean(ulo), ci_high=clean(uhi), confidence=c.confidence if confidence is None else confidence,
                alpha=c.alpha if alpha is None else alpha, interval=interval, margin=c.margin,
                requested_margin=c.margin, margin_source=c.margin_source, noise_floor=noise_floor,
                noise_delta=None if noise_delta is None else clean(noise_delta), seed=c.seed,
                n_resamples=c.n_resamples, min_pages=c.min_pages, power=c.power, pages_needed=pages_needed,
                pages_needed_method=POWER_METHOD, p_regression=p_regression,
                p_noninferiority=1 - p_regression if p_noninferiority is None else p_noninferiority,
                pages_changed=pages_changed, pages_compared=pages_compared, missing_pages=list(missing_pages or []),
                **documents)
    return v.model_copy(update={"message": explain(v, lo, hi)})


def explain(v: Verdict, lo: float, hi: float) -> str:
    """One sentence: what the verdict rests on and, when it does not decide, what to do. ``lo``/``hi``
    are the oriented bounds (higher is better)."""
    one = f"one-sided {(1 - v.alpha) * 100:.4g}%"  # 95%; a sequential look's nominal level, e.g. 99.99%
    m = v.margin
    if v.reason == "outputs_differ":
        return f"{v.pages_changed} of {v.pages_compared} pages' outputs differ; --exact passes only identical outputs"
    if v.reason == "baseline_unfit":
        side = "above" if not v.higher_is_better else "below"
        return (f"the baseline itself scores {v.baseline_score:.4f} {v.metric}, {side} the floor {v.baseline_floor:g}: "
                "it cannot read these pages, so a candidate as good as it says nothing; fix the baseline (model, "
                "prompt, max_tokens) or the pages, or declare a baseline_floor if this score is fit")
    if v.reason == "identical_outputs":
        return ("every page's output is byte-identical" if v.test == "exact"
                else f"every page's output is byte-identical, {_assumed(v)}")
    if v.reason == "identical_scores":
        return (f"every page scored exactly the same on both sides ({v.flips} of {v.pages_compared} outputs "
                f"changed), {_assumed(v)}" if v.flips else f"every page scored exactly the same on both sides, "
                f"{_assumed(v)}")
    if v.reason == "too_few_pages":
        return (f"{v.n} paired pages, below the minimum of {v.min_pages} for a calibrated interval: "
                f"score at least {v.pages_needed} pages")
    if v.reason == "too_few_documents":
        return (f"{v.documents} documents, below the minimum of {v.min_documents}: pages of one document are not "
                f"independent, so score at least {v.documents_needed or v.min_documents} documents")
    if v.reason == "rare_failures_not_ruled_out":
        return (f"{_rare(v)}; score about {v.pages_needed} pages in {v.documents_needed} documents, or declare a "
                "smaller worst_page_damage if no page can be damaged that much" if v.pages_needed else _rare(v))
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
            return f"{worse} and at most {max(0.0, hi):.4f} better: both inside ±{m:.4f}, {_assumed(v)}"
        return f"{worse}, inside the margin {m:.4f}, {_assumed(v)}"
    if v.reason == "ci_beyond_margin":
        if v.verdict == "not_equivalent":
            return (f"at least {lo:.4f} better than the baseline ({one} bound), beyond the margin {m:.4f}: "
                    "the equivalence test fails a candidate that differs in either direction")
        return f"at least {-hi:.4f} worse than the baseline ({one} bound), beyond the margin {m:.4f}"
    need = (f"about {v.pages_needed} pages" + (f" in {v.documents_needed} documents" if v.documents_needed else "")
            + f" would pass a candidate {v.planning_shift or 0:g} worse at {v.power:.0%} power"
            if v.pages_needed else "the observed shift sits on the margin: no number of pages decides it")
    return f"the {v.confidence:.0%} interval crosses the margin {m:.4f}; {need}"


def _assumed(v: Verdict) -> str:
    """What a pass assumes: no page damaged by more than D (nor a document by more than D_doc)."""
    if v.worst_page_damage is None:
        return "on pages taken as independent"
    doc = ("" if v.worst_document_damage is None or v.worst_document_damage >= v.worst_page_damage else
           f" and no document by more than {v.worst_document_damage:g} on average")
    how = "declared" if v.worst_page_damage_source == "declared" else f"{v.metric}'s range"
    return f"assuming no page is damaged by more than {v.worst_page_damage:g} ({how}){doc}"


def _rare(v: Verdict) -> str:
    damage = v.worst_page_damage
    assert damage is not None, "a rare-failure verdict records the damage it assumed"
    return (f"a failure that damages one page in {damage / v.margin:.0f} by {damage:g} "
            f"would go unseen more than {v.alpha:.0%} of the time: a pass needs {v.rare_failure_pages} effective pages "
            f"(here {v.effective_n:.1f}) and {v.rare_failure_documents} documents (here {v.documents}), and the "
            "bounded test to clear the margin")
