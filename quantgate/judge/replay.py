"""Sequential verdicts in a study (``sequential:`` in the YAML; docs/statistics.md, "Sequential verdicts in
a study"): each candidate's accuracy pass (the first concurrency level) is served in the seeded order of
``judge.sequential.page_order``, in batches up to the looks of ``plan_looks``; after each batch its
verdicts against the baseline are made (``sequential_decide``) and the pass stops once every one is
decisive or the page budget ends (the serving side: ``quantgate.study.passes``). The baseline is served
first, to the whole budget, so every page a candidate is judged on has a baseline (and noise-run) score.

One function makes the decision from score rows — ``replay`` — used by the study while it serves (rows
scored from the records so far), by the study's verdicts and by the gate (rows read from the score
files): the report and the gate cannot disagree. Every look is replayed from look 1, so a killed study
resumes at the look its records reach. ``empty``: what an empty output scores on each page (the study's
``scores/empty-output.jsonl``): at every look, as in the fixed design, a baseline no better than it on the look's
pages is ``baseline_unfit`` (``judge.clustered.baseline_fit``), never decisive, so the pass runs to its budget."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from quantgate.errors import InputError
from quantgate.judge.compare import Look, compare_scores, pages_changed
from quantgate.judge.family import adjust_family
from quantgate.judge.sequential import LookPages, sequential_decide
from quantgate.schema.metrics import METRICS
from quantgate.schema.run import SequentialStop
from quantgate.schema.scores import ScoreRow
from quantgate.schema.sequential import SequentialDecision, Spending
from quantgate.schema.settings import VerdictSettings
from quantgate.schema.summary import VariantVerdict
from quantgate.schema.verdict import DOCUMENT_FIELDS, Outcome, Verdict, new_verdict

__all__ = ["Candidate", "Plan", "Sides", "replay", "replay_family", "stop_record", "verdict_rows"]
Rows = dict[str, ScoreRow]
Sides = tuple[Rows, Rows, "Rows | None"]  # the baseline's rows, the candidate's, the noise run's (or None)


@dataclass(frozen=True)
class Plan:
    order: list[str]  # the page budget, in serving order (whole documents, a document's pages together)
    looks: list[int]  # pages at each look (each at a document boundary)
    n_max: int
    documents: list[str]  # each page's document, in ``order``


def _values(rows: Rows, ids: list[str], metric: str) -> np.ndarray:
    """``metric`` on each page, NaN where the page has no value (a page without a table) or no row; cer/wer
    clipped to [0, 1] as ``compare_scores`` judges them."""
    vals = [rows[i].value(metric) if i in rows else None for i in ids]
    out = np.array([np.nan if v is None else v for v in vals], dtype=np.float64)
    return np.clip(out, 0.0, 1.0) if metric in METRICS and METRICS[metric].clipped else out


def _look_pages(settings: dict[str, VerdictSettings], ids: list[str], sides: Sides, empty: Rows | None
                ) -> LookPages:
    """The look's pages for ``sequential_decide``: per metric the oriented differences (and the noise run's),
    the baseline's own scores and the empty output's (clipped as the baseline's), and per page whether both
    outputs hash the same."""
    base, cand, noise = sides
    d: dict[str, np.ndarray] = {}
    e: dict[str, np.ndarray] = {}
    baseline: dict[str, np.ndarray] = {}
    for m, s in settings.items():
        sign = 1.0 if s.higher_is_better else -1.0
        b = baseline[m] = _values(base, ids, m)
        d[m] = sign * (_values(cand, ids, m) - b)
        if noise is not None:
            e[m] = sign * (_values(noise, ids, m) - b)
    same = np.array([base[i].output_sha256 is not None and base[i].output_sha256 == cand[i].output_sha256
                     for i in ids], dtype=bool)
    nothing = None if empty is None else {m: _values(empty, ids, m) for m in settings}
    return LookPages(d, e if noise is not None else None, None, baseline, same, nothing)


def replay(settings: dict[str, VerdictSettings], spending: Spending, plan: Plan, sides: Sides,
           empty: Rows | None = None) -> tuple[SequentialDecision | None, list[str] | None]:
    """(the decision at the last look whose pages the candidate has, or None before the first; the pages to
    have served for the next look, or None when the pass has stopped). ``settings``: per metric; ``empty``: what
    an empty output scores on the pages (None: fitness by the floor alone)."""
    base, cand, noise = sides
    lacking = [i for i in plan.order if i not in base]
    if lacking:
        raise InputError(f"the baseline has no score for {len(lacking)} page(s) of the sequential page budget "
                         f"({lacking[:5]}); the baseline must be served on every page first")
    if noise is not None:
        lacking = [i for i in plan.order if i not in noise]
        if lacking:
            raise InputError(f"the baseline's noise run has no score for {len(lacking)} page(s) of the page budget "
                             f"({lacking[:5]})")
    dec = None
    for k, n in enumerate(plan.looks, 1):
        ids = plan.order[:n]
        if any(i not in cand for i in ids):
            return dec, ids
        pages = replace(_look_pages(settings, ids, sides, empty), documents=plan.documents[:n])
        dec = sequential_decide(k, plan.looks, pages, settings, previous=dec, n_max=plan.n_max, spending=spending)
        if dec.stop:
            return dec, None
    raise AssertionError("the last look always stops")  # pragma: no cover


@dataclass(frozen=True)
class Candidate:
    name: str
    sides: Sides
    # (``noise_layout``, the sentence its rows' message gains): what the study knows of the candidate's parallel
    # layout (``study.noise_layout.layout_note``), handed in so the rows come back whole (``VariantVerdict.marked``)
    layout: tuple[str | None, str | None] = (None, None)


def replay_family(settings: dict[str, VerdictSettings], spending: Spending, plan: Plan, candidates: Sequence[Candidate],
                  others: Sequence[Verdict], empty: Rows | None = None
                  ) -> tuple[dict[str, tuple[SequentialDecision | None, list[str] | None]], list[Verdict] | None]:
    """Each candidate's (decision, next pages) from ``replay``; once every pass has stopped, the study's whole family
    of verdicts: each candidate's rows (``verdict_rows``, marked with its layout), then ``others`` (the lm-eval
    verdicts), Holm-adjusted (``judge.family``); else None. One call gives the study and the gate's remake
    everything, so control does not go back to ``study/`` between a decision, its rows and their adjustment.
    ``empty``: what an empty output scores on the pages, for every candidate's baseline fitness."""
    state = {c.name: replay(settings, spending, plan, c.sides, empty) for c in candidates}
    if any(nxt is not None or dec is None for dec, nxt in state.values()):
        return state, None
    rows: list[Verdict] = []
    for c in candidates:
        dec = state[c.name][0]
        assert dec is not None  # every pass has stopped (checked above)
        rows += [r.marked(*c.layout) for r in verdict_rows(settings, plan, dec, c.name, c.sides, empty)]
    return state, adjust_family([*rows, *others])


def stop_record(dec: SequentialDecision, level: int) -> SequentialStop:
    return SequentialStop(concurrency=level, look=dec.look, n_looks=len(dec.looks), looks=dec.looks,
                          pages_used=dec.pages_used, n_max=dec.n_max, stop=dec.stop, stop_reason=dec.stop_reason,
                          decisions={m: s.verdict for m, s in dec.metrics.items()},
                          decided_at_look={m: s.decided_at_look for m, s in dec.metrics.items()})


def verdict_rows(settings: dict[str, VerdictSettings], plan: Plan, dec: SequentialDecision, variant: str,
                 sides: Sides, empty: Rows | None = None) -> list[VariantVerdict]:
    """One verdict per metric, from each metric's decision at the look it was decided at (the pass's last
    look when undecided): the pages of that look, the interval at its nominal level; the baseline's score and the
    empty output's on those pages (``empty``) beside it, as the decision judged them."""
    base, cand, noise = sides
    rows = []
    for m, given in settings.items():
        s = dec.metrics[m]
        look = s.decided_at_look or dec.look
        pages = plan.order[: plan.looks[look - 1]]
        ids = [i for i in pages if base[i].value(m) is not None and cand[i].value(m) is not None]
        b, c = _values(base, ids, m), _values(cand, ids, m)
        lo, hi = (s.ci_low, s.ci_high) if s.ci_low is not None and s.ci_high is not None else (0.0, 0.0)
        nd = float(np.mean(_values(noise, ids, m) - b)) if noise is not None and ids else None
        changed = pages_changed(base, cand, pages, ("baseline", variant), required=False)
        settings_m = given.model_copy(update={"margin": s.margin, "test": dec.test})
        # the document-level fields, from the same verdict code on the same pages at the look's level
        full = compare_scores(base, cand, settings_m, noise=noise, look=Look(pages, s.nominal_alpha), empty=empty
                              ) if len(ids) >= 2 else None
        extra = {} if full is None else {k: getattr(full, k) for k in DOCUMENT_FIELDS}
        v = new_verdict(settings_m, Outcome(verdict=s.verdict, reason=s.reason, n=len(ids),
                        baseline_mean=float(b.mean()) if ids else 0.0, candidate_mean=float(c.mean()) if ids else 0.0,
                        delta=float((c - b).mean()) if ids else 0.0, lo=lo, hi=hi, interval=s.interval or "degenerate",
                        p_regression=s.p_regression, noise_floor=s.noise_floor, noise_delta=nd,
                        pages_needed=given.min_pages if s.reason == "too_few_pages" else None, pages_changed=changed,
                        pages_compared=None if changed is None else len(pages), confidence=1 - 2 * s.nominal_alpha,
                        alpha=s.nominal_alpha, **extra))
        where = f"look {look} of {len(plan.looks)} ({len(pages)} pages, nominal one-sided level {s.nominal_alpha:.2g})"
        msg = v.message
        if s.reason == "ci_straddles_margin":
            msg = (f"the {v.confidence:.1%} interval crosses the margin {s.margin:.4f} at the last look of the page "
                   "budget; a larger sequential.page_budget may decide it")
        # the regression call is Holm-adjusted on the repeated p-value, at the design's overall level
        rows.append(VariantVerdict(variant=variant, **v.model_copy(update={"message": f"{where}: {msg}",
                                                                           "alpha": dec.alpha}).model_dump()))
    return rows
