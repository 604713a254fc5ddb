"""Sequential verdicts in a study (``sequential:`` in the YAML; docs/statistics.md, "Sequential verdicts in
a study"): each candidate's accuracy pass (the first concurrency level) is served in the seeded order of
``judge.sequential.page_order``, in batches up to the looks of ``plan_looks``; after each batch its
verdicts against the baseline are made (``sequential_decide``) and the pass stops once every one is
decisive or the page budget ends (the serving side: ``quantgate.study.passes``). The baseline is served
first, to the whole budget, so every page a candidate is judged on has a baseline (and noise-run) score.

One function makes the decision from score rows — ``replay`` — used by the study while it serves (rows
scored from the records so far), by the study's verdicts and by the gate (rows read from the score
files): the report and the gate cannot disagree. Every look is replayed from look 1, so a killed study
resumes at the look its records reach."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from quantgate.errors import InputError
from quantgate.io.fileio import read_jsonl
from quantgate.judge.compare import pages_changed
from quantgate.judge.sequential import page_order, plan_looks, sequential_decide
from quantgate.schema.metrics import METRICS
from quantgate.schema.run import SequentialStop
from quantgate.schema.scores import ScoreRow
from quantgate.schema.sequential import SequentialDecision
from quantgate.schema.study import Study
from quantgate.schema.summary import VariantVerdict
from quantgate.schema.verdict import Comparison, new_verdict

__all__ = ["Plan", "judged_ids", "make_plan", "replay", "stop_record", "verdict_rows"]
Rows = dict[str, ScoreRow]


@dataclass(frozen=True)
class Plan:
    order: list[str]  # the page budget, in serving order
    looks: list[int]  # pages at each look
    n_max: int


def judged_ids(pages_file: Path, split: str, limit: int | None) -> list[str]:
    """The judged pages' ids in file order (the split, then ``limit``), read from pages.jsonl — the same
    way by the study and by the gate."""
    ids = [str(obj.get("id")) for _, obj in read_jsonl(Path(pages_file))
           if isinstance(obj, dict) and (split == "all" or obj.get("split") == split)]
    return ids[: limit or None]


def make_plan(st: Study, ids: list[str]) -> Plan:
    sq = st.sequential
    if sq is None:
        raise InputError("the study has no sequential block")
    budget = sq.page_budget or len(ids)
    if budget > len(ids):
        raise InputError(f"sequential.page_budget {budget}: the study judges only {len(ids)} pages (split "
                         f"{st.split!r}" + (f", limit {st.limit}" if st.limit else "") + "); lower it or leave it out "
                         "(default: every judged page)")
    order = page_order(ids, st.seed if sq.order_seed is None else sq.order_seed)[:budget]
    looks = plan_looks(budget, first=sq.first_look, step=sq.step, n_looks=None if sq.step else sq.looks,
                       min_pages=st.min_pages)
    return Plan(order, looks, budget)


def _values(rows: Rows, ids: list[str], metric: str) -> np.ndarray:
    """``metric`` on each page, NaN where the page has no value (a page without a table) or no row."""
    vals = [rows[i].value(metric) if i in rows else None for i in ids]
    return np.array([np.nan if v is None else v for v in vals], dtype=np.float64)


def _oriented(st: Study, ids: list[str], base: Rows, cand: Rows, noise: Rows | None
              ) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray] | None]:
    d: dict[str, np.ndarray] = {}
    e: dict[str, np.ndarray] | None = {} if noise is not None else None
    for m in st.metrics:
        sign = 1.0 if METRICS[m].higher_is_better else -1.0
        b = _values(base, ids, m)
        d[m] = sign * (_values(cand, ids, m) - b)
        if e is not None and noise is not None:
            e[m] = sign * (_values(noise, ids, m) - b)
    return d, e


def replay(st: Study, plan: Plan, base: Rows, cand: Rows, noise: Rows | None
           ) -> tuple[SequentialDecision | None, list[str] | None]:
    """(the decision at the last look whose pages the candidate has, or None before the first; the pages to
    have served for the next look, or None when the pass has stopped). Rows: page id -> score row."""
    lacking = [i for i in plan.order if i not in base]
    if lacking:
        raise InputError(f"the baseline has no score for {len(lacking)} page(s) of the sequential page budget "
                         f"({lacking[:5]}); the baseline must be served on every page first")
    if noise is not None:
        lacking = [i for i in plan.order if i not in noise]
        if lacking:
            raise InputError(f"the baseline's noise run has no score for {len(lacking)} page(s) of the page budget "
                             f"({lacking[:5]})")
    sq = st.sequential
    if sq is None:
        raise InputError("the study has no sequential block")
    dec = None
    for k, n in enumerate(plan.looks, 1):
        ids = plan.order[:n]
        if any(i not in cand for i in ids):
            return dec, ids
        d, e = _oriented(st, ids, base, cand, noise)
        dec = sequential_decide(k, plan.looks, d, st.margins_used(), noise_by_metric=e, previous=dec, n_max=plan.n_max,
                                spending=sq.spending, n_resamples=st.resamples, seed=st.seed,
                                equivalence=st.test == "equivalence", min_pages=st.min_pages)
        if dec.stop:
            return dec, None
    raise AssertionError("the last look always stops")  # pragma: no cover


def stop_record(dec: SequentialDecision, level: int) -> SequentialStop:
    return SequentialStop(concurrency=level, look=dec.look, n_looks=len(dec.looks), looks=dec.looks,
                          pages_used=dec.pages_used, n_max=dec.n_max, stop=dec.stop, stop_reason=dec.stop_reason,
                          decisions={m: s.verdict for m, s in dec.metrics.items()},
                          decided_at_look={m: s.decided_at_look for m, s in dec.metrics.items()})


def verdict_rows(st: Study, plan: Plan, dec: SequentialDecision, variant: str, base: Rows, cand: Rows,
                 noise: Rows | None) -> list[VariantVerdict]:
    """One verdict per metric, from each metric's decision at the look it was decided at (the pass's last
    look when undecided): the pages of that look, the interval at its nominal level."""
    rows = []
    for m in st.metrics:
        s = dec.metrics[m]
        look = s.decided_at_look or dec.look
        pages = plan.order[: plan.looks[look - 1]]
        ids = [i for i in pages if base[i].value(m) is not None and cand[i].value(m) is not None]
        b, c = _values(base, ids, m), _values(cand, ids, m)
        lo, hi = (s.ci_low, s.ci_high) if s.ci_low is not None and s.ci_high is not None else (0.0, 0.0)
        nd = float(np.mean(_values(noise, ids, m) - b)) if noise is not None and ids else None
        changed = pages_changed(base, cand, pages, ("baseline", variant), required=False)
        settings = Comparison(metric=m, higher_is_better=METRICS[m].higher_is_better, margin=s.margin,
                              margin_source="given" if m in st.margins else "registry", test=dec.test, seed=st.seed,
                              n_resamples=st.resamples, min_pages=st.min_pages)
        v = new_verdict(settings, verdict=s.verdict, reason=s.reason, n=len(ids),
                        baseline_mean=float(b.mean()) if ids else 0.0, candidate_mean=float(c.mean()) if ids else 0.0,
                        delta=float((c - b).mean()) if ids else 0.0, lo=lo, hi=hi, interval=s.interval or "degenerate",
                        p_regression=s.p_regression, noise_floor=s.noise_floor, noise_delta=nd,
                        pages_needed=st.min_pages if s.reason == "too_few_pages" else None, pages_changed=changed,
                        pages_compared=None if changed is None else len(pages), confidence=1 - 2 * s.nominal_alpha,
                        alpha=s.nominal_alpha)
        where = f"look {look} of {len(plan.looks)} ({len(pages)} pages, nominal one-sided level {s.nominal_alpha:.2g})"
        msg = v.message
        if s.reason == "ci_straddles_margin":
            msg = (f"the {v.confidence:.1%} interval crosses the margin {s.margin:.4f} at the last look of the page "
                   "budget; a larger sequential.page_budget may decide it")
        # the regression call is Holm-adjusted on the repeated p-value, at the design's overall level
        rows.append(VariantVerdict(variant=variant, **v.model_copy(update={"message": f"{where}: {msg}",
                                                                           "alpha": dec.alpha}).model_dump()))
    return rows
