"""Sequential verdicts in a study (``sequential:`` in the YAML; docs/statistics.md, "Sequential verdicts in
a study"): each candidate's accuracy pass (the first concurrency level) is served in the seeded order of
``scoring.sequential.page_order``, in batches up to the looks of ``plan_looks``; after each batch its
verdicts against the baseline are made (``sequential_decide``) and the pass stops once every one is
decisive or the page budget ends. The baseline is served first, to the whole budget, so every page a
candidate is judged on has a baseline (and noise-run) score.

One function makes the decision from score rows — ``replay`` — used by the study while it serves (rows
scored from the records so far), by the study's verdicts and by the gate (rows read from the score
files): the report and the gate cannot disagree. Every look is replayed from look 1, so a killed study
resumes at the look its records reach."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from quantgate.errors import InputError
from quantgate.io.fileio import read_jsonl
from quantgate.judge.sequential import SequentialDecision, page_order, plan_looks, sequential_decide, stop_line
from quantgate.schema.run import SequentialStop
from quantgate.study.spec import Study, effective_margins

__all__ = ["FixedPass", "Plan", "SequentialPass", "accuracy_pass", "judged_ids", "level_rows", "make_plan", "replay",
           "stop_line", "stop_record", "verdict_rows"]


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


def _oriented(st: Study, ids: list[str], base: dict, cand: dict, noise: dict | None):
    from quantgate.score import get_metric

    d, e = {}, ({} if noise is not None else None)
    for m in st.metrics:
        sign = 1.0 if get_metric(m).higher_is_better else -1.0
        b = np.array([np.nan if base[i].get(m) is None else base[i][m] for i in ids], dtype=np.float64)
        c = np.array([np.nan if cand[i].get(m) is None else cand[i][m] for i in ids], dtype=np.float64)
        d[m] = sign * (c - b)
        if noise is not None:
            x = np.array([np.nan if noise.get(i, {}).get(m) is None else noise[i][m] for i in ids], dtype=np.float64)
            e[m] = sign * (x - b)
    return d, e


def replay(st: Study, plan: Plan, base: dict[str, dict], cand: dict[str, dict], noise: dict[str, dict] | None
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
    dec = None
    for k, n in enumerate(plan.looks, 1):
        ids = plan.order[:n]
        if any(i not in cand for i in ids):
            return dec, ids
        d, e = _oriented(st, ids, base, cand, noise)
        dec = sequential_decide(k, plan.looks, d, effective_margins(st), noise_by_metric=e, previous=dec, n_max=plan.n_max,
                                spending=st.sequential.spending, n_resamples=st.resamples, seed=st.seed,
                                equivalence=st.test == "equivalence", min_pages=st.min_pages)
        if dec.stop:
            return dec, None
    raise AssertionError("the last look always stops")  # pragma: no cover


def stop_record(dec: SequentialDecision, level: int) -> SequentialStop:
    return SequentialStop(concurrency=level, look=dec.look, n_looks=len(dec.looks), looks=dec.looks,
                          pages_used=dec.pages_used, n_max=dec.n_max, stop=dec.stop, stop_reason=dec.stop_reason,
                          decisions={m: s.verdict for m, s in dec.metrics.items()},
                          decided_at_look={m: s.decided_at_look for m, s in dec.metrics.items()})


def verdict_rows(st: Study, plan: Plan, dec: SequentialDecision, variant: str, base: dict, cand: dict,
                 noise: dict | None) -> list[dict]:
    """One ``Verdict`` row per metric (variant first), from each metric's decision at the look it was decided
    at (the pass's last look when undecided): the pages of that look, the interval at its nominal level."""
    from quantgate.judge.compare import POWER_METHOD, _changed, explain
    from quantgate.judge.stats import DEFAULT_POWER
    from quantgate.schema.run import Verdict
    from quantgate.score import get_metric

    rows = []
    for m in st.metrics:
        s = dec.metrics[m]
        look = s.decided_at_look or dec.look
        pages = plan.order[: plan.looks[look - 1]]
        ids = [i for i in pages if base[i].get(m) is not None and cand[i].get(m) is not None]
        hib = get_metric(m).higher_is_better
        b = np.array([base[i][m] for i in ids], dtype=np.float64)
        c = np.array([cand[i][m] for i in ids], dtype=np.float64)
        delta = float((c - b).mean()) if ids else 0.0
        lo, hi = (s.ci_low, s.ci_high) if s.ci_low is not None else (0.0, 0.0)
        ulo, uhi = (lo, hi) if hib else (-hi, -lo)
        nd = None
        if noise is not None and ids:
            nd = float(np.mean([noise[i][m] - base[i][m] for i in ids]))
        changed = _changed(base, cand, pages, ("baseline", variant), required=False)
        v = Verdict(metric=m, higher_is_better=hib, verdict=s.verdict, reason=s.reason, test=dec.test, message="",
                    n=len(ids), baseline_mean=float(b.mean()) if ids else 0.0,
                    candidate_mean=float(c.mean()) if ids else 0.0, delta=_clean(delta), ci_low=_clean(ulo),
                    ci_high=_clean(uhi), confidence=1 - 2 * s.nominal_alpha, alpha=s.nominal_alpha,
                    interval=s.interval or "degenerate", margin=s.margin, requested_margin=s.margin,
                    margin_source="given" if m in st.margins else "registry", noise_floor=s.noise_floor,
                    noise_delta=None if nd is None else _clean(nd), seed=st.seed, n_resamples=st.resamples,
                    min_pages=st.min_pages, power=DEFAULT_POWER,
                    pages_needed=st.min_pages if s.reason == "too_few_pages" else None,
                    pages_needed_method=POWER_METHOD, p_regression=s.p_regression,
                    p_noninferiority=1 - s.p_regression, pages_changed=changed,
                    pages_compared=None if changed is None else len(pages))
        where = f"look {look} of {len(plan.looks)} ({len(pages)} pages, nominal one-sided level {s.nominal_alpha:.2g})"
        if s.reason == "ci_straddles_margin":
            msg = (f"the {v.confidence:.1%} interval crosses the margin {s.margin:.4f} at the last look of the page "
                   "budget; a larger sequential.page_budget may decide it")
        else:
            msg = explain(v, lo, hi)
        # the regression call is Holm-adjusted on the repeated p-value, at the design's overall level
        rows.append({"variant": variant, **v.model_copy(update={"message": f"{where}: {msg}",
                                                                "alpha": dec.alpha}).model_dump()})
    return rows


def _clean(x: float) -> float:
    return 0.0 if abs(x) < 1e-13 or not math.isfinite(x) else x + 0.0


class SequentialPass:
    """A candidate's accuracy pass for ``serve_variant(batches=...)``: after each batch the candidate's new
    records are scored, the looks replayed, and the next look's pages named (None once it stops)."""

    def __init__(self, st: Study, plan: Plan, ps, run_dir: Path, level: int, base: dict, noise: dict | None,
                 on_look=None):
        from quantgate.score import parse_metric_list

        self.st, self.plan, self.ps, self.run_dir, self.level = st, plan, ps, Path(run_dir), level
        self.base, self.noise, self.on_look = base, noise, on_look
        self.metrics = parse_metric_list(st.metrics)
        self.record: SequentialStop | None = None
        self.decision: SequentialDecision | None = None
        self._rows: dict[tuple[str, str | None], dict] = {}
        # failures recorded before this run: not counted until re-sent once (a transient timeout must not decide a
        # look, as the fixed design re-sends failures on resume); a failure of this run counts (no endless retry)
        self._stale = {(r.page_id, r.end) for r in _latest(self.run_dir, level) if r.error is not None}

    def _cand(self) -> dict[str, dict]:
        from quantgate.score import score_pages

        preds = {r.page_id: (r.output if r.error is None else None)
                 for r in _latest(self.run_dir, self.level) if (r.page_id, r.end) not in self._stale}
        new = {p: t for p, t in preds.items() if (p, t) not in self._rows}
        if new:
            for row in score_pages(self.ps, new, self.metrics, self.st.split, only=set(new)):
                self._rows[(row["page_id"], new[row["page_id"]])] = row
        return {p: self._rows[(p, t)] for p, t in preds.items() if (p, t) in self._rows}

    def next(self) -> list[str] | None:
        dec, nxt = replay(self.st, self.plan, self.base, self._cand(), self.noise)
        if dec is not None and (self.decision is None or dec.look != self.decision.look) and self.on_look:
            self.on_look(dec)
        self.decision = dec
        self.record = None if dec is None else stop_record(dec, self.level)
        return nxt


def _latest(run_dir: Path, level: int):
    from quantgate.serve import load_records

    return [r for r in load_records(run_dir) if r.concurrency == level]


class FixedPass:
    """The baseline's accuracy pass: the whole page budget, in the same order, as one batch — sent once per run
    of the study, as the fixed design sends it (a page that fails is re-sent on the next run, not in a loop)."""

    record = None

    def __init__(self, ids: list[str], run_dir: Path, level: int):
        self.ids, self.run_dir, self.level = ids, Path(run_dir), level
        self._sent = False

    def next(self) -> list[str] | None:
        have = {r.page_id for r in _latest(self.run_dir, self.level) if r.error is None}
        if self._sent or all(i in have for i in self.ids):
            return None
        self._sent = True
        return self.ids


def level_rows(st: Study, ps, run_dir: Path, level: int) -> dict[str, dict]:
    """A run's score rows at one level, for the pages it has records of (as the score stage writes them)."""
    from quantgate.score import load_predictions, parse_metric_list, score_pages

    preds = load_predictions(run_dir, ps, st.split, level)
    rows = score_pages(ps, preds, parse_metric_list(st.metrics), st.split, only=set(preds))
    return {r["page_id"]: r for r in rows}


def accuracy_pass(st: Study, plan: Plan, ps, out: Path, variant: str, noise_level: int | None, log):
    """The batches of a sequential study's accuracy pass (the first concurrency level) for ``variant``: the
    baseline's whole page budget, or a candidate's looks against the baseline's (and its noise run's) scores."""
    c0, run_dir = st.concurrency[0], Path(out) / "runs" / variant
    if variant == st.baseline:
        return FixedPass(plan.order, run_dir, c0)
    brun = Path(out) / "runs" / st.baseline
    return SequentialPass(st, plan, ps, run_dir, c0, level_rows(st, ps, brun, c0),
                          level_rows(st, ps, brun, noise_level) if noise_level else None,
                          on_look=lambda d: log(f"{variant}: {stop_line(d)}"))
