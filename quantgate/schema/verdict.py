"""A verdict: the words (verdict and reason, defined here once), the record itself (:class:`Verdict`) and the
one constructor every verdict is built by (:func:`new_verdict`: orientation, rounding residue and the sentence a
reader sees). The settings a verdict is made with are ``quantgate.schema.settings``; the statistics that fill it
are ``quantgate.judge``; docs/statistics.md says why."""

from __future__ import annotations

import math
from typing import Any, Literal, get_args

from pydantic import Field, model_validator

from quantgate.schema.base import Record
from quantgate.schema.metrics import MarginSource
from quantgate.schema.settings import MIN_LABELED_DOCUMENTS, MIN_LABELED_PAGES, TestName, VerdictSettings

VerdictName = Literal["within_noise", "regression", "inconclusive", "not_equivalent"]
ReasonName = Literal["ci_inside_margin", "ci_beyond_margin", "ci_straddles_margin", "noise_exceeds_margin",
                     "too_few_pages", "too_few_documents", "rare_failures_not_ruled_out", "identical_outputs",
                     "identical_scores", "baseline_unfit", "outputs_differ", "baseline_unchecked",
                     "bound_exceeds_margin"]
# cluster_hall_t: documents resampled, each end the outer of the Hall bootstrap and Student-t (judge.clustered);
# studentized_hall/bca/percentile: the page-level intervals of schema-2 verdicts, kept so old summaries read
IntervalName = Literal["cluster_hall_t", "studentized_hall", "bca", "percentile", "degenerate"]
DamageSource = Literal["metric default", "declared", "exceeded"]  # exceeded: a page (document) was damaged more
FlipSource = Literal["output_sha256", "scores", "texts"]
# labeled: today's verdict on pages with truth; bound: the truth-free bound alone; rectified: the bound less what it
# overstates on pages labeled at random (quantgate.judge.truth_free)
MethodName = Literal["labeled", "bound", "rectified"]
VERDICTS: tuple[VerdictName, ...] = get_args(VerdictName)
REASONS: tuple[ReasonName, ...] = get_args(ReasonName)
INTERVALS: tuple[IntervalName, ...] = get_args(IntervalName)
DECISIVE: tuple[VerdictName, ...] = ("within_noise", "regression", "not_equivalent")

POWER_METHOD = ("at the planning shift (not the observed one), documents like the study's, spread at its 80% upper "
                "bound; never below the rare-failure counts")


def no_better_than_empty(score, empty: float | None, higher_is_better: bool):
    """Whether the baseline reads no better than nothing: its mean score is not strictly on the better side of
    the mean an empty output scores on the same pages (False when that is not known). Vectorised over ``score``.
    A fixed floor cannot say this alone: on pages whose checks are mostly "absent" rules, reading nothing passes
    many of them, and garbage scores above the floor."""
    if empty is None:
        return False
    return score <= empty if higher_is_better else score >= empty


class _Head(Record):
    """What every verdict has said since its first schema: the verdict, its interval, settings and page counts
    (the first fields of :class:`Verdict`)."""

    # 3: documents as the unit: the document-level fields below; 2 is read (they are then None)
    # 4: pages without truth: the method and truth-free fields at the end; 3 and 2 are read (they are then None)
    # 5: ``empty_output_mean``, what an empty output scores on the judged pages; 4, 3 and 2 are read (it is None)
    schema_version: Literal[5] = 5
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


class Findings(Record):
    """What the statistics found beyond the interval: documents, rare failures, the baseline, flips (None in
    schema-2 verdicts and under exact) and pages without truth (None in schema-3 ones). The last fields of
    :class:`Verdict`, and part of the :class:`Outcome` a verdict is made from."""

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
    # the mean an empty output scores on the same pages; a baseline no better than it is baseline_unfit whatever
    # its floor (None: not scored, e.g. a study folder written before empty outputs were scored)
    empty_output_mean: float | None = None
    documents_needed: int | None = None  # beside pages_needed, at planning_shift
    planning_shift: float | None = None  # the planning alternative: worse by this much (metric units, >= 0)
    lower_bound_from: Literal["studentized_hall", "student_t", "unbounded", "bounded_test"] | None = None
    bounded_log_wealth: float | None = None  # the bounded test: >= ln(1/alpha) rules out damage within D_doc
    flips: int | None = None  # pages whose output changed (Dutta et al. 2024)
    flips_source: FlipSource | None = None  # output_sha256, or (rows without hashes) pages whose score changed
    worse_threshold: float | None = None
    pages_worse: int | None = None  # pages worse than the baseline by more than worse_threshold
    pages_worse_ids: list[str] = Field(default_factory=list)  # the worst first, at most PAGES_WORSE_LISTED
    # --- pages without truth (quantgate.judge.truth_free; None in schema-3 verdicts) ------------------------
    # A truth-free verdict's interval is one-sided: the end on the worse side is the damage's upper bound, the
    # other the metric's range; delta is the damage's estimate (the mean bound less the random sample's mean
    # excess), and baseline_mean/candidate_mean are the labeled pages' (0 without any).
    method: MethodName | None = None  # which path decided
    mean_bound: float | None = None  # the mean truth-free bound over every compared page
    bound_upper: float | None = None  # its one-sided upper bound (at the bound's share of alpha)
    excess_lower: float | None = None  # rectified: the lower bound of the bound's mean excess on the random sample
    pages_with_truth: int | None = None
    pages_without_truth: int | None = None
    documents_with_truth: int | None = None
    documents_without_truth: int | None = None
    pages_at_random: int | None = None  # labeled pages in the recorded random draw (the rectified estimate's)
    noise_mean_bound: float | None = None  # the baseline re-run's mean bound against the baseline
    noise_flips: int | None = None  # pages whose re-run output differs from the baseline's


class Verdict(Findings, _Head):
    """One paired comparison (docs/statistics.md). Interval, delta and noise are in the metric's own
    units and direction; the tests themselves run on differences oriented so that higher is better."""

    # The bases in this order: pydantic lists a model's fields from its most basic base up, so the head's come
    # first and the findings' after them, the order every verdict file has.
    @model_validator(mode="before")
    @classmethod
    def _from_schema_2(cls, obj: Any) -> Any:
        if isinstance(obj, dict) and obj.get("schema_version") in (2, 3, 4):
            return {**obj, "schema_version": 5}
        return obj


PAGES_WORSE_LISTED = 50
# the issue-27 fields, which a sequential study's verdict rows copy from the document-level verdict of their look
DOCUMENT_FIELDS = tuple(list(Verdict.model_fields)[list(Verdict.model_fields).index("documents"):
                                                    list(Verdict.model_fields).index("method")])


def clean(x: float) -> float:
    """No "-0.0000" in reports: rounding residue of the resampling (or an undefined mean) is not a shift."""
    return 0.0 if abs(x) < 1e-13 or not math.isfinite(x) else x + 0.0


class Outcome(Findings):
    """What the statistics computed for one verdict: every field of :class:`Verdict` that its settings do not
    give. ``lo``/``hi`` are the interval's ends oriented so that higher is better, as the tests make them (the
    verdict holds them in the metric's own direction). ``confidence``/``alpha``: the interval's own level when it
    is not the settings' (a sequential look's nominal level); ``p_noninferiority``: when not 1 − p_regression
    (the document-level verdict's includes the bounded test)."""

    verdict: VerdictName
    reason: ReasonName
    n: int
    baseline_mean: float
    candidate_mean: float
    delta: float
    lo: float
    hi: float
    interval: IntervalName
    p_regression: float
    noise_floor: float | None
    noise_delta: float | None = None
    pages_needed: int | None = None
    pages_changed: int | None = None
    pages_compared: int | None = None
    missing_pages: list[str] = Field(default_factory=list)
    confidence: float | None = None
    alpha: float | None = None
    p_noninferiority: float | None = None


def new_verdict(c: VerdictSettings, o: Outcome) -> Verdict:
    """The verdict record, from its settings and what the statistics computed: the interval in the metric's own
    direction, rounding residue cleaned, and the sentence a reader sees."""
    ulo, uhi = (o.lo, o.hi) if c.higher_is_better else (-o.hi, -o.lo)
    found = {k: getattr(o, k) for k in Findings.model_fields}
    v = Verdict(metric=c.metric, higher_is_better=c.higher_is_better, verdict=o.verdict, reason=o.reason, test=c.test,
                message="", n=o.n, baseline_mean=o.baseline_mean, candidate_mean=o.candidate_mean,
                delta=clean(o.delta), ci_low=clean(ulo), ci_high=clean(uhi),
                confidence=c.confidence if o.confidence is None else o.confidence,
                alpha=c.alpha if o.alpha is None else o.alpha, interval=o.interval, margin=c.margin,
                requested_margin=c.margin, margin_source=c.margin_source, noise_floor=o.noise_floor,
                noise_delta=None if o.noise_delta is None else clean(o.noise_delta), seed=c.seed,
                n_resamples=c.n_resamples, min_pages=c.min_pages, power=c.power, pages_needed=o.pages_needed,
                pages_needed_method=POWER_METHOD, p_regression=o.p_regression,
                p_noninferiority=1 - o.p_regression if o.p_noninferiority is None else o.p_noninferiority,
                pages_changed=o.pages_changed, pages_compared=o.pages_compared, missing_pages=list(o.missing_pages),
                **found)
    return v.model_copy(update={"message": explain(v, o.lo, o.hi)})


def explain(v: Verdict, lo: float, hi: float) -> str:
    """One sentence: what the verdict rests on and, when it does not decide, what to do. ``lo``/``hi``
    are the oriented bounds (higher is better)."""
    one = f"one-sided {(1 - v.alpha) * 100:.4g}%"  # 95%; a sequential look's nominal level, e.g. 99.99%
    m = v.margin
    if v.reason == "outputs_differ":
        return f"{v.pages_changed} of {v.pages_compared} pages' outputs differ; --exact passes only identical outputs"
    if v.reason == "baseline_unfit" and v.baseline_score is not None and no_better_than_empty(
            v.baseline_score, v.empty_output_mean, v.higher_is_better):
        return (f"the baseline scores {v.baseline_score:.4f} on {v.metric}, no better than an empty output's "
                f"{v.empty_output_mean:.4f} on the same pages: it cannot read these pages, so a candidate as good as it "
                "says nothing; fix the baseline (model, prompt, max_tokens) or the pages")
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
    if v.method in ("bound", "rectified"):
        said = _truth_free(v, one)
        if said:
            return said
    if v.reason == "too_few_pages":
        return (f"{v.n} paired pages, below the minimum of {v.min_pages} for a calibrated interval: "
                f"score at least {v.pages_needed} pages{_why_count(v)}")
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


def _why_count(v: Verdict) -> str:
    """Where a page count comes from: the plan at the study's power, never below the rare-failure rule."""
    D = v.worst_page_damage
    if D is None or v.rare_failure_pages is None or not D > v.margin:
        return ""
    k = D / v.margin
    return (f" (planned at {v.power:.0%} power, never below the rare-failure rule: a failure that damages one page "
            f"in {k:.0f} by {D:g} goes unseen in n pages with probability (1 - 1/{k:.0f})^n; ruling it out at "
            f"{1 - v.alpha:.0%} takes {v.rare_failure_pages} pages)")


def _truth_free(v: Verdict, one: str) -> str | None:
    """The sentence of a verdict decided without truth on some pages (None: the general sentence fits)."""
    m, mb, up = v.margin, v.mean_bound or 0.0, v.bound_upper or 0.0
    pages = (f"{v.pages_without_truth} pages judged without truth, {v.pages_with_truth} with"
             + (f" ({v.pages_at_random} labeled at random)" if v.pages_at_random else ""))
    less = (f" less {v.excess_lower:.4f}, the least the bound overstates on the pages labeled at random"
            if v.method == "rectified" else "")
    if v.reason == "ci_inside_margin":
        return (f"the outputs alone bound the damage: at most {max(0.0, up - (v.excess_lower or 0.0)):.4f} worse "
                f"(the mean bound {mb:.4f}, its upper bound {up:.4f}{less}; together a {one} bound), inside the "
                f"margin {m:.4f}; {pages}")
    if v.reason == "baseline_unchecked":
        return (f"the outputs bound the damage inside the margin {m:.4f}, but the baseline's own fitness is shown on "
                f"{v.pages_with_truth} labeled pages in {v.documents_with_truth} documents: write truth for at least "
                f"{MIN_LABELED_PAGES} pages in {MIN_LABELED_DOCUMENTS} documents (`quantgate pages label-sample`) so "
                "that a pass cannot rest on a baseline that cannot read the pages")
    if v.reason == "bound_exceeds_margin":
        return (f"the outputs differ too much for their bound alone: the mean bound {mb:.4f} is surely above the "
                f"margin {m:.4f}; label pages at random (`quantgate pages label-sample`) so the verdict can subtract "
                f"what the bound overstates, or write truth for every page; {pages}")
    need = (f"; about {v.pages_needed} pages in {v.documents_needed} documents (unlabeled ones count) would "
            f"decide it at {v.power:.0%} power" if v.pages_needed else "")
    if v.reason == "rare_failures_not_ruled_out":
        return (f"the outputs bound the damage inside the margin {m:.4f} so far, but not yet a rare failure the pages "
                f"have not shown: a pass needs {v.rare_failure_pages} effective pages and {v.rare_failure_documents} "
                f"documents (here {v.effective_n:.0f} and {v.documents}) and the bounded test to clear the margin{need}; "
                f"{pages}")
    if v.reason == "ci_straddles_margin":
        return (f"the damage's {one} upper bound, {max(0.0, up - (v.excess_lower or 0.0)):.4f} (mean bound "
                f"{mb:.4f}{less}), crosses the margin {m:.4f}{need}; pages labeled at random sharpen it; {pages}")
    return None


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
