"""The verdict on pages without truth (docs/statistics.md, "Pages without truth").

For a page without truth the candidate's damage (how much worse it scores than the baseline, whatever the truth)
is at most a bound B computed from the two outputs alone (``quantgate.scoring.bounds``: the proofs, and an empty
output's bound is the metric's range). So the mean damage over the pages is at most the mean bound, and a
one-sided upper bound on the mean bound is a non-inferiority test that needs no truth ("bound"): it is
``judge.clustered.decide`` run on −B per page — documents resampled, the rare-failure count rules and the
bounded test applied to the bound, since an unseen page may carry a large bound.

With pages labeled at random (whole documents drawn by quantgate: ``pages label-sample``), the bound's excess
X = B − damage ≥ 0 is seen on them; its mean is how much the bound overstates. The rectified verdict
(prediction-powered inference, Angelopoulos et al. 2023) passes when UCB(mean B) − LCB(mean X) < margin: it runs
the bound's test at the margin raised by LCB(mean X). A union bound splits alpha: the excess's lower bound at
``rectify_share``·α, the bound's upper bound at the rest. The lower bound is the bounded betting test on the
labeled documents' excess (``clustered.bounded_lower``), valid for any distribution of X ≥ 0; a rare large
excess the sample misses only lowers it. Hand-picked truth never enters it: labelers who choose easy pages, or
draft truth from a model's output, make the excess look larger than it is and the verdict pass too easily.

Which path decides is fixed by the design, before the data: every page with truth → today's verdict on the
labeled pages ("labeled", unchanged); at least ``min_rectify_documents`` whole documents labeled at random →
"rectified"; else → "bound" (a few random documents give too loose a lower bound to pay for the alpha it takes:
the bound's bounded test gains at most about (margin − mean bound) nats per document, so it needs its whole
alpha). Only that path can
pass, so false passes stay at α. The labeled verdict (on the pages with truth) can still call a regression, and
a truth-free pass needs the baseline shown to read the pages on labeled pages (``min_labeled_pages`` in
``min_labeled_documents``; else ``baseline_unchecked``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from quantgate.judge import clustered as C
from quantgate.schema.metrics import METRICS
from quantgate.schema.settings import VerdictSettings
from quantgate.schema.verdict import MethodName, Outcome, ReasonName, Verdict, VerdictName, new_verdict

__all__ = ["OutputPages", "excess_lower", "truth_free_verdict"]


@dataclass(frozen=True)
class OutputPages:
    """One metric's compared pages, aligned arrays. ``bound``: B per page (≥ 0, the metric's units). ``damage``:
    the true damage where the page has truth (oriented: worse > 0), NaN elsewhere. ``at_random``: the page is in
    the recorded random labeling draw and has truth. ``baseline_score``: the baseline's own score where the page
    has truth, NaN elsewhere. ``changed``: the outputs differ. ``noise_bound``: the baseline re-run's bound
    against the baseline per page (None: no re-run)."""

    ids: list[str]
    documents: list[str]
    bound: np.ndarray
    damage: np.ndarray
    at_random: np.ndarray
    baseline_score: np.ndarray
    changed: np.ndarray
    noise_bound: np.ndarray | None = None


def excess_lower(pages: OutputPages, alpha: float, seed: int) -> float:
    """Lower (1 − alpha) confidence bound of the mean excess B − damage over the pages labeled at random,
    documents as the unit, by the bounded betting test (documents in the seeded order of ``document_order``). 0
    with fewer than two documents in the draw."""
    sel = pages.at_random & ~np.isnan(pages.damage)
    if not sel.any():
        return 0.0
    x = pages.bound[sel] - pages.damage[sel]
    if (x < -1e-9).any():
        page = str(np.asarray(pages.ids)[sel][int(np.argmin(x))])
        raise ValueError(f"page {page!r}: the truth-free bound is below the page's damage; the bound is wrong")
    docs, ids = C.documents_of(np.maximum(x, 0.0), [d for d, s in zip(pages.documents, sel, strict=True) if s])
    if len(ids) < 2:
        return 0.0
    pos = {x: i for i, x in enumerate(ids)}
    order = [pos[x] for x in C.document_order(ids, seed)]
    docs = C.Documents(*(a[:, order] for a in (docs.pages, docs.total, docs.sumsq, docs.worst)))
    low = C.bounded_lower(docs, 0.0, alpha)
    return low if low > 1e-9 else 0.0


def _bound_decision(pages: OutputPages, s: VerdictSettings, lcb: float, rectified: bool) -> C.Decision:
    """The bound's test: the mean of −B clears −(margin + lcb) at the bound's share of alpha, the count rules
    and the bounded test on the bound (its worst is the metric's range: a declared worst damage is about the
    damage, not about B)."""
    ceiling = METRICS[s.metric].margin_ceiling if s.metric in METRICS else 1.0
    alpha = s.alpha * (1 - s.rectify_share) if rectified else s.alpha
    margin = min(s.margin + lcb, ceiling * (1 - 1e-9))
    on_bound = s.model_copy(update={"confidence": 1 - 2 * alpha, "margin": margin, "worst_page_damage": None,
                                    "worst_document_damage": None, "expected_shift": 0.0})
    evidence = C.Evidence(outputs_identical=not bool(pages.changed.any()), damage_ceiling=ceiling)
    dec = C.decide(-pages.bound, pages.documents, on_bound, evidence)
    # B lies in [0, range] on every page, so the bounded betting test is by itself an exact level-alpha test of
    # mean B >= margin (Ville's inequality), whatever B's distribution; the bootstrap's end is an approximation
    # that cannot even be formed when few documents changed (a lone changed page leaves that side without
    # spread: "unbounded"). On the bound, the bounded test and the rare-failure counts decide.
    counts_ok = dec.effective_n >= dec.rare_failure_pages and dec.documents >= dec.rare_failure_documents
    if (dec.verdict == "inconclusive" and dec.reason == "ci_straddles_margin" and counts_ok
            and dec.bounded_log_wealth >= math.log(1 / on_bound.alpha)):
        dec = replace(dec, verdict="within_noise", reason="ci_inside_margin", ci_low=dec.bounded_low,
                      lower_bound_from="bounded_test", p_noninferiority=min(1.0, math.exp(-dec.bounded_log_wealth)),
                      pages_needed=None, documents_needed=None)
    return dec


def _reason(dec: C.Decision) -> tuple[VerdictName, ReasonName]:
    if dec.verdict == "within_noise":
        return "within_noise", dec.reason
    if dec.verdict == "regression":  # the mean bound is surely above the margin: the outputs alone cannot say
        return "inconclusive", "bound_exceeds_margin"
    return "inconclusive", dec.reason


def truth_free_verdict(pages: OutputPages, settings: VerdictSettings, labeled: Verdict | None) -> Verdict:
    """The one verdict of ``settings.metric`` over ``pages``. ``labeled``: today's verdict on the pages with
    truth (``judge.compare.compare_scores``), None when fewer than two pages (or documents) have truth. Every
    page with truth: ``labeled`` itself, its method recorded."""
    s = settings
    truth = ~np.isnan(pages.damage)
    docs = np.asarray(pages.documents, dtype=object)
    n_truth, d_truth = int(truth.sum()), len(set(docs[truth]))
    mean_bound = float(pages.bound.mean())
    counts: dict[str, Any] = dict(pages_with_truth=n_truth, pages_without_truth=int((~truth).sum()), documents_with_truth=d_truth,
                  documents_without_truth=len(set(docs[~truth])), mean_bound=mean_bound,
                  noise_mean_bound=None if pages.noise_bound is None else float(pages.noise_bound.mean()),
                  noise_flips=None if pages.noise_bound is None else int((pages.noise_bound > 0).sum()))
    if truth.all() and labeled is not None:
        return labeled.model_copy(update={"method": "labeled", **counts})
    if s.test != "non_inferiority":
        raise ValueError(f"test {s.test!r}: pages without truth are judged by non-inferiority only (a bound says how "
                         "much worse a candidate can be, not how much better); write truth for every page")
    if labeled is not None and labeled.verdict == "regression":  # truth shows it worse: no bound can pass it
        return labeled.model_copy(update={"method": "labeled", **counts})
    drawn = pages.at_random & truth
    rectified = len(set(docs[drawn])) >= s.min_rectify_documents
    lcb = excess_lower(pages, s.alpha * s.rectify_share, s.seed) if rectified else 0.0
    dec = _bound_decision(pages, s, lcb, rectified)
    verdict, reason = _reason(dec)
    method: MethodName = "rectified" if rectified else "bound"
    base_score = float(np.nanmean(pages.baseline_score)) if n_truth else None
    empty = labeled.empty_output_mean if labeled else None  # what an empty output scores on the labeled pages
    fit = base_score is None or bool(C.baseline_fit(base_score, s.baseline_floor, s.higher_is_better, empty))
    if not fit:
        verdict, reason = "inconclusive", "baseline_unfit"
    elif verdict == "within_noise" and (n_truth < s.min_labeled_pages or d_truth < s.min_labeled_documents):
        verdict, reason = "inconclusive", "baseline_unchecked"
    ceiling = METRICS[s.metric].margin_ceiling if s.metric in METRICS else 1.0
    upper = max(0.0, -dec.ci_low) if np.isfinite(dec.ci_low) else ceiling  # the mean bound's upper end
    damage_upper = min(ceiling, max(0.0, upper - lcb))
    sel = drawn if rectified else np.zeros_like(drawn)
    estimate = mean_bound - (float((pages.bound[sel] - pages.damage[sel]).mean()) if sel.any() else 0.0)
    sign = -1.0 if s.higher_is_better else 1.0  # damage in the metric's own direction
    flips = int(pages.changed.sum())
    return new_verdict(s, Outcome(
        verdict=verdict, reason=reason, n=len(pages.ids),
        baseline_mean=labeled.baseline_mean if labeled else 0.0, candidate_mean=labeled.candidate_mean if labeled
        else 0.0, delta=sign * estimate, lo=-damage_upper, hi=ceiling, interval=dec.interval,
        p_regression=labeled.p_regression if labeled else 1.0, p_noninferiority=dec.p_noninferiority,
        noise_floor=None, pages_changed=flips, pages_compared=len(pages.ids), documents=dec.documents,
        largest_document=dec.largest_document, design_effect=dec.design_effect, effective_n=dec.effective_n,
        min_documents=s.min_documents, worst_page_damage=dec.worst_page_damage,
        worst_page_damage_source="metric default", worst_document_damage=dec.worst_document_damage,
        worst_document_damage_source="metric default", rare_failure_pages=dec.rare_failure_pages,
        rare_failure_documents=dec.rare_failure_documents, baseline_score=base_score, baseline_floor=s.baseline_floor,
        empty_output_mean=empty,
        pages_needed=dec.pages_needed, documents_needed=dec.documents_needed, planning_shift=0.0,
        lower_bound_from=dec.lower_bound_from, bounded_log_wealth=dec.bounded_log_wealth, flips=flips,
        flips_source="texts", method=method, bound_upper=upper, excess_lower=lcb if rectified else None,
        pages_at_random=int(sel.sum()), **counts))
