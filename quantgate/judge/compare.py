"""Pair two sets of score rows by page and give the verdict for one metric (a family of them is adjusted in
``quantgate.judge.family``); a fixed design's whole family from one call (``judge_family``)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from quantgate.errors import DataError, InputError
from quantgate.io.scores import read_scores
from quantgate.judge.clustered import Evidence, decide
from quantgate.judge.documents import check_documents
from quantgate.judge.family import adjust_family
from quantgate.judge.truth_free import OutputPages, truth_free_verdict
from quantgate.schema.metrics import METRICS
from quantgate.schema.scores import ScoreRow
from quantgate.schema.settings import VerdictSettings
from quantgate.schema.summary import VariantVerdict
from quantgate.schema.verdict import PAGES_WORSE_LISTED, DamageSource, Outcome, ReasonName, Verdict, new_verdict

Rows = dict[str, ScoreRow]


@dataclass(frozen=True)
class Names:
    """How the error messages name the baseline, the candidate and the noise run (file paths, run names)."""

    baseline: str = "baseline"
    candidate: str = "candidate"
    noise: str = "noise run"

    @property
    def pair(self) -> tuple[str, str]:
        return self.baseline, self.candidate


@dataclass(frozen=True)
class Look:
    """Judge only ``ids`` (a sequential look's pages, in serving order) with the interval at the one-sided level
    ``alpha``; ``order_seed``: the documents' order for the bounded test."""

    ids: list[str]
    alpha: float | None = None
    order_seed: int = 0


LISTED = 10  # page ids one message names; the rest are counted


def listing(ids: Iterable[str]) -> str:
    """Page ids as a reader wants them in a message: sorted, comma-separated, the first ``LISTED`` and a count of
    the rest (not a Python list's repr)."""
    shown = sorted(ids)
    more = f" and {len(shown) - LISTED} more" if len(shown) > LISTED else ""
    return ", ".join(shown[:LISTED]) + more


def _differ(a: set, b: set, names: tuple[str, str], hint: str) -> str:
    sides = [f"{len(x)} only in {which} ({listing(x)})" for x, which in ((a - b, "the first"), (b - a, "the second"))
             if x]
    return f"pages differ between {names[0]} and {names[1]}: {'; '.join(sides)}; {hint}"


def _has_metric(rows: Rows, metric: str, name: str) -> None:
    """InputError when no page of ``name`` has a value for ``metric``, naming the metrics that do have one (a key
    whose every value is None, e.g. ned scored on pages without truth, is no metric the file can be judged on) and,
    for a metric scored against a truth text, that the file's pages have none."""
    if any(r.value(metric) is not None for r in rows.values()):
        return
    have = sorted({k for r in rows.values() for k, v in r.metrics.items() if k in METRICS and v is not None})
    spec = METRICS.get(metric)
    if not any(metric in r.metrics for r in rows.values()):
        why = "the file was not scored with it"
    elif spec is not None:  # scored, but a page without what it scores against gets no value
        against = "checks" if spec.bound == "none" else "truth"  # bound "none": the page's checks (schema.metrics)
        why = f"{metric} needs {against} and no page of this file has {against}"
    else:
        why = "every page's value is empty"
    raise InputError(f"{name}: no page has a value for {metric!r} ({why}; metrics with values: "
                     f"{', '.join(have) or 'none'}); score it on pages that have what it scores against, or pick a "
                     "metric with values")


def _pair(baseline: Rows, candidate: Rows, noise: Rows | None, metric: str, allow_missing: bool,
          names: tuple[str, str], noise_name: str) -> tuple[list[str], list[str], list[str]]:
    hint = "pass --allow-missing to compare the common pages"
    if set(baseline) != set(candidate) and not allow_missing:
        raise InputError(_differ(set(baseline), set(candidate), names, hint))
    common = set(baseline) & set(candidate)
    if noise is not None:
        if set(noise) != set(baseline) and not allow_missing:
            raise InputError(_differ(set(noise), set(baseline), (noise_name, names[0]),
                                     "the noise run must be scored on the pages being judged"))
        common &= set(noise)
    missing = sorted((set(baseline) | set(candidate)) - common)
    ids = sorted(i for i in common if baseline[i].value(metric) is not None and candidate[i].value(metric) is not None)
    if noise is not None:
        gaps = [i for i in ids if noise[i].value(metric) is None]
        if gaps:
            raise InputError(f"{noise_name}: no {metric} for {len(gaps)} page(s) the comparison has: {listing(gaps)}; "
                             "the noise run must be scored with the same metrics on the same pages")
    return sorted(common), ids, missing


def pages_changed(baseline: Rows, candidate: Rows, pages: list[str], names: tuple[str, str],
                  required: bool) -> int | None:
    """Pages whose output text differs, by the score rows' output_sha256 (a page without output
    counts as changed). None when a file predates output hashes (an error if ``required``)."""
    for rows, name in ((baseline, names[0]), (candidate, names[1])):
        if not any(rows[i].has_output_hash for i in pages):
            if required:
                raise InputError(f"{name}: no output_sha256 in its rows (scored before quantgate recorded output "
                                 "hashes); re-score it with `quantgate score` to use --exact")
            return None
    return sum(1 for i in pages if baseline[i].output_sha256 is None
               or baseline[i].output_sha256 != candidate[i].output_sha256)


def flips(baseline: Rows, candidate: Rows, pages: list[str], metric: str) -> tuple[int, str]:
    """Pages whose output changed (Dutta et al. 2024, "Accuracy is not all you need"): by output_sha256 where
    both files record it; else pages whose ``metric`` changed — a lower bound, since an output can change
    and score the same."""
    changed = pages_changed(baseline, candidate, pages, ("", ""), required=False)
    if changed is not None:
        return changed, "output_sha256"
    return sum(1 for i in pages if baseline[i].value(metric) != candidate[i].value(metric)), "scores"


def page_documents(baseline: Rows, candidate: Rows, ids: list[str], names: tuple[str, str] = ("baseline", "candidate"),
                   noise: Rows | None = None, noise_name: str = "noise run") -> list[str]:
    """Each judged page's document (``judge.documents.check_documents``: the files must agree on it; a file
    scored before documents were recorded has each page its own)."""
    documents = check_documents(baseline, candidate, names, noise_rows=noise, noise_name=noise_name)
    return [documents[i] for i in ids]


def within_range(lo: float, hi: float, ceiling: float) -> tuple[float, float]:
    """An end the bootstrap cannot bound is infinite (``lower_bound_from: unbounded``); the record holds the
    metric's whole range there instead — a true bound, since no page's difference exceeds it — so no reader
    meets an infinity (and ``clean`` never turns one into 0)."""
    return max(float(lo), -ceiling), min(float(hi), ceiling)


def _source(s: str) -> DamageSource:
    return "exceeded" if "exceeded" in s else "declared" if s == "declared" else "metric default"


def compare_scores(baseline: Rows, candidate: Rows, settings: VerdictSettings, *, noise: Rows | None = None,
                   allow_missing: bool = False, names: Names = Names(), look: Look | None = None,
                   empty: Rows | None = None) -> Verdict:
    """The verdict on ``settings.metric`` (its margin, test and rules in ``settings``). ``noise``: the baseline's
    scores from a second run on the same pages. ``empty``: what an empty output scores on the pages (the
    baseline must do better than reading nothing; ``empty_output_mean``). Non-inferiority by default; ``test: equivalence`` is two-sided;
    ``test: exact`` passes only when every page's output text is identical. Documents are the statistical unit
    (``judge.clustered``; docs/statistics.md). ``look``: judge only a sequential look's pages at its level."""
    c = settings
    metric, exact = c.metric, c.test == "exact"
    noise_name, ids = names.noise, None if look is None else look.ids
    look_alpha, order_seed = (None, 0) if look is None else (look.alpha, look.order_seed)
    pair = names.pair
    _has_metric(baseline, metric, pair[0])
    _has_metric(candidate, metric, pair[1])
    if noise is not None:
        _has_metric(noise, metric, noise_name)
    if ids is None:
        pages, ids, missing = _pair(baseline, candidate, noise, metric, allow_missing, pair, noise_name)
    else:  # a look: its pages, every one with a row on each side (replay checks that)
        pages, missing = list(ids), []
        ids = [i for i in ids if baseline[i].value(metric) is not None and candidate[i].value(metric) is not None]
    if len(ids) < 2:
        raise InputError(f"metric {metric!r}: only {len(ids)} page(s) scored on both sides; need at least 2")
    spec = METRICS.get(metric)
    clip = spec is not None and spec.clipped  # cer/wer: judged on min(score, 1) (MetricSpec.clipped says why)

    def values(rows: Rows) -> np.ndarray:
        v = np.array([rows[i].value(metric) for i in ids], dtype=float)
        return np.clip(v, 0.0, 1.0) if clip else v

    b, cand = values(baseline), values(candidate)
    sign = 1.0 if c.higher_is_better else -1.0
    d = sign * (cand - b)
    e = None if noise is None else sign * (values(noise) - b)
    ceiling = spec.margin_ceiling if spec else max(1.0, float(np.abs(d).max()))
    damage = c.worst_page_damage
    if damage is None and spec is not None and spec.damage < ceiling:
        damage = spec.damage  # a registry default below the range: passed on as a bound, labelled its default
    changed = pages_changed(baseline, candidate, pages, pair, required=exact)
    judged_changed = pages_changed(baseline, candidate, ids, pair, required=False)
    empty_mean = empty_output_mean(empty, ids, metric, clip)
    evidence = Evidence(outputs_identical=judged_changed == 0, baseline_score=float(b.mean()),
                        empty_output_mean=empty_mean, noise=e,
                        damage_ceiling=ceiling, look_alpha=look_alpha, order_seed=order_seed)
    try:
        dec = decide(d, page_documents(baseline, candidate, ids, pair, noise, noise_name),
                     c.model_copy(update={"worst_page_damage": damage}), evidence)
    except ValueError as err:
        raise InputError(f"metric {metric!r}: {err}") from None
    verdict, reason, need, docs_need = dec.verdict, dec.reason, dec.pages_needed, dec.documents_needed
    if exact:  # the scores above are context; the verdict is the texts'
        verdict, reason = ("within_noise", "identical_outputs") if changed == 0 else ("not_equivalent", "outputs_differ")
        need = docs_need = None
    n_flips, flip_source = flips(baseline, candidate, pages, metric)
    assert c.worse_threshold is not None  # VerdictSettings sets it
    worse = sorted((float(x), i) for x, i in zip(d, ids, strict=True) if x < -c.worse_threshold)
    level = None if look_alpha is None else dict(confidence=1 - 2 * look_alpha, alpha=look_alpha)
    lo, hi = within_range(dec.ci_low, dec.ci_high, ceiling)
    return new_verdict(c, Outcome(
        verdict=verdict, reason=reason, n=len(ids), baseline_mean=float(b.mean()),
        candidate_mean=float(cand.mean()), delta=float((cand - b).mean()), lo=lo, hi=hi,
        interval=dec.interval, p_regression=dec.p_regression, noise_floor=dec.noise_floor,
        noise_delta=None if dec.noise_mean is None else sign * dec.noise_mean,
        pages_needed=need, pages_changed=changed, pages_compared=None if changed is None else len(pages),
        missing_pages=missing, p_noninferiority=dec.p_noninferiority, **(level or {}),
        documents=dec.documents, largest_document=dec.largest_document,
        design_effect=dec.design_effect, effective_n=dec.effective_n, min_documents=c.min_documents,
        worst_page_damage=dec.worst_page_damage,
        worst_page_damage_source=_source(dec.worst_page_damage_source)
        if c.worst_page_damage is not None or "exceeded" in dec.worst_page_damage_source
        else "metric default",
        worst_document_damage=dec.worst_document_damage,
        worst_document_damage_source=_source(dec.worst_document_damage_source),
        rare_failure_pages=dec.rare_failure_pages, rare_failure_documents=dec.rare_failure_documents,
        baseline_score=dec.baseline_score, baseline_floor=dec.baseline_floor, empty_output_mean=empty_mean,
        documents_needed=docs_need,
        planning_shift=c.expected_shift, lower_bound_from=dec.lower_bound_from,
        bounded_log_wealth=dec.bounded_log_wealth, flips=n_flips, flips_source=flip_source,
        worse_threshold=c.worse_threshold, pages_worse=len(worse),
        pages_worse_ids=[i for _, i in worse[:PAGES_WORSE_LISTED]]))


def empty_output_mean(empty: Rows | None, ids: list[str], metric: str, clip: bool) -> float | None:
    """The mean an empty output scores on exactly the judged pages ``ids`` (clipped as the verdict clips the
    scores); None without the rows or when one of those pages has no such score (then it is not the same pages)."""
    if empty is None or any(i not in empty or empty[i].value(metric) is None for i in ids):
        return None
    v = np.array([empty[i].value(metric) for i in ids], dtype=float)
    return float((np.clip(v, 0.0, 1.0) if clip else v).mean())


def too_few_to_judge(baseline: Rows, candidate: Rows, settings: VerdictSettings) -> Verdict | None:
    """The inconclusive verdict of a subset too small for ``compare_scores`` (fewer than 2 pages or 2 documents
    scored on both sides, e.g. one tag value's pages): ``too_few_pages`` / ``too_few_documents``, nothing
    bounded (the metric's whole range, p 1 both ways). None when the subset is large enough to judge, or has no
    page scored on both sides (nothing to report)."""
    c = settings
    metric, min_pages, min_documents = c.metric, c.min_pages, c.min_documents
    ids = sorted(i for i in set(baseline) & set(candidate)
                 if baseline[i].value(metric) is not None and candidate[i].value(metric) is not None)
    docs = set(page_documents(baseline, candidate, ids)) if ids else set()
    if not ids or (len(ids) >= 2 and len(docs) >= 2):
        return None
    spec = METRICS[metric]
    b = float(np.mean([baseline[i].value(metric) for i in ids]))
    cand = float(np.mean([candidate[i].value(metric) for i in ids]))
    few_pages = len(ids) < min_pages
    reason: ReasonName = "too_few_pages" if few_pages else "too_few_documents"
    return new_verdict(c, Outcome(
        verdict="inconclusive", reason=reason, n=len(ids), baseline_mean=b, candidate_mean=cand,
        delta=cand - b, lo=-spec.margin_ceiling, hi=spec.margin_ceiling, interval="degenerate",
        p_regression=1.0, p_noninferiority=1.0, noise_floor=None,
        pages_needed=min_pages if few_pages else None, documents=len(docs),
        min_documents=min_documents, documents_needed=min_documents))


def compare_files(baseline: Path, candidate: Path, settings: VerdictSettings, noise: Path | None = None,
                  allow_missing: bool = False) -> Verdict:
    return compare_scores(read_scores(baseline), read_scores(candidate), settings,
                          noise=read_scores(noise) if noise else None, allow_missing=allow_missing,
                          names=Names(str(baseline), str(candidate), str(noise) if noise else "noise run"))


@dataclass(frozen=True)
class TruthFree:
    """What a verdict on every judged page, with truth or without, is made from (``judge.truth_free``): the pages'
    bounds and the scores of those with truth, and the score rows (baseline's, candidate's) of the pages with truth
    when they are at least 2 pages of 2 documents (the labeled verdict beside the bound), else None. Made by the
    caller, which holds the outputs and the scorers (``study.outputs.output_pages``)."""

    pages: OutputPages
    labeled: tuple[Rows, Rows] | None


def truth_free_outputs(tf: TruthFree, settings: VerdictSettings, empty: Rows | None = None) -> Verdict:
    """The truth-free verdict on ``settings.metric`` from :class:`TruthFree`'s pages. ``empty``: what an empty output
    scores on the pages with truth, the mark the baseline must beat there (as in ``compare_scores``)."""
    labeled = None if tf.labeled is None else compare_scores(*tf.labeled, settings, names=Names("baseline", "candidate"),
                                                             empty=empty)
    try:
        return truth_free_verdict(tf.pages, settings, labeled)
    except ValueError as err:
        raise DataError(f"metric {settings.metric!r}: {err}") from None


@dataclass(frozen=True)
class Pairing:
    """One row of a fixed design's family: ``variant`` against the baseline on ``settings.metric``. ``sides``: the
    baseline's rows, the candidate's, the noise run's (or None); ``empty``: what an empty output scores
    (``empty_output_mean``); ``tag``: a tag value's row, judged on that value's pages (inconclusive when too few,
    ``too_few_to_judge``); ``layout``: the (``noise_layout``, sentence) its row is marked with
    (``VariantVerdict.marked``); ``truth_free``: the verdict on every judged page stands for the scored one."""

    variant: str
    settings: VerdictSettings
    sides: tuple[Rows, Rows, Rows | None]
    names: Names
    empty: Rows | None = None
    tag: str | None = None
    layout: tuple[str | None, str | None] = (None, None)
    truth_free: TruthFree | None = None


def _pairing_row(p: Pairing) -> VariantVerdict:
    base, cand, noise = p.sides
    verdict = too_few_to_judge(base, cand, p.settings) if p.tag is not None else None
    if verdict is None:
        # made even where the truth-free verdict stands: it checks the score files against each other
        verdict = compare_scores(base, cand, p.settings, noise=noise, names=p.names, empty=p.empty)
    if p.truth_free is not None:
        verdict = truth_free_outputs(p.truth_free, p.settings, p.empty)
    tag = {} if p.tag is None else {"tag": p.tag}
    return VariantVerdict(variant=p.variant, **tag, **verdict.model_dump()).marked(*p.layout)


def judge_family(pairings: Sequence[Pairing], others: Sequence[Verdict]) -> list[Verdict]:
    """A fixed design's whole family from one call: each pairing's row, in order, then ``others`` (the lm-eval
    verdicts), Holm-adjusted as one family (``judge.family``) — so the study and the gate's remake hand the judge
    everything once, rather than coming back to ``study/`` between the rows, the truth-free ones and the adjustment."""
    return adjust_family([*[_pairing_row(p) for p in pairings], *others])


__all__ = ["Look", "Names", "Pairing", "TruthFree", "compare_files", "compare_scores", "flips", "judge_family",
           "listing", "page_documents", "pages_changed", "too_few_to_judge", "truth_free_outputs", "within_range"]
