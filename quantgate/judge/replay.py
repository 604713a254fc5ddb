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

from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from quantgate.errors import InputError
from quantgate.io.fileio import read_jsonl
from quantgate.judge.clustered import page_order, plan_looks, rare_failure_count
from quantgate.judge.compare import compare_scores, pages_changed
from quantgate.judge.sequential import FIRST_LOOK, sequential_decide
from quantgate.schema.metrics import METRICS
from quantgate.schema.run import SequentialStop
from quantgate.schema.scores import ScoreRow
from quantgate.schema.sequential import SequentialDecision
from quantgate.schema.study import Study
from quantgate.schema.summary import VariantVerdict
from quantgate.schema.verdict import DOCUMENT_FIELDS, Comparison, new_verdict

__all__ = ["Plan", "judged_documents", "judged_ids", "make_plan", "replay", "study_plan", "stop_record", "verdict_rows"]
Rows = dict[str, ScoreRow]


@dataclass(frozen=True)
class Plan:
    order: list[str]  # the page budget, in serving order (whole documents, a document's pages together)
    looks: list[int]  # pages at each look (each at a document boundary)
    n_max: int
    documents: list[str]  # each page's document, in ``order``


def judged_ids(pages_file: Path, split: str, limit: int | None) -> list[str]:
    """The judged pages' ids in file order (the split, then ``limit``), read from pages.jsonl — the same
    way by the study and by the gate."""
    return list(judged_documents(pages_file, split, limit))


def judged_documents(pages_file: Path, split: str, limit: int | None) -> dict[str, str]:
    """The judged pages' ids in file order, each with its document (the page record's ``document``; a page
    without one is its own)."""
    pages = [(str(obj.get("id")), obj.get("document")) for _, obj in read_jsonl(Path(pages_file))
             if isinstance(obj, dict) and (split == "all" or obj.get("split") == split)]
    return {i: str(doc) if doc else i for i, doc in pages[: limit or None]}


def rare_failure_first_look(st: Study) -> int:
    """No look before the effective pages the strictest metric's rare-failure rule needs (issue 27 item 6): a
    look that cannot pass is a look spent."""
    margins = st.margins_used()
    return max(rare_failure_count(margins[m], st.worst_page_damage.get(m, METRICS[m].damage)) for m in st.metrics)


def make_plan(st: Study, ids: list[str], documents: dict[str, str] | None = None) -> Plan:
    """The serving order and the looks: documents in ``clustered.document_order`` (pages of one together), the
    page budget cut at a document boundary, looks at document boundaries, none before ``first_look`` (default
    FIRST_LOOK), ``min_pages``, the rare-failure page count and ``min_documents``."""
    sq = st.sequential
    if sq is None:
        raise InputError("the study has no sequential block")
    budget = sq.page_budget or len(ids)
    if budget > len(ids):
        raise InputError(f"sequential.page_budget {budget}: the study judges only {len(ids)} pages (split "
                         f"{st.split!r}" + (f", limit {st.limit}" if st.limit else "") + "); lower it or leave it out "
                         "(default: every judged page)")
    docs = {i: (documents or {}).get(i) or i for i in ids}
    size = Counter(docs.values())
    order: list[str] = []
    sizes: list[int] = []  # pages per document, in serving order
    for page in page_order(docs, st.seed if sq.order_seed is None else sq.order_seed):  # documents contiguous
        if order and docs[page] == docs[order[-1]]:
            order.append(page)
            sizes[-1] += 1
            continue
        if order and len(order) + size[docs[page]] > budget:
            break  # the budget ends before this document: it and the rest are not served
        order.append(page)
        sizes.append(1)
    first = max(FIRST_LOOK if sq.first_look is None else sq.first_look, st.min_pages, rare_failure_first_look(st))
    n_looks = sq.looks if sq.step is None else max(1, round(len(order) / sq.step))
    at = plan_looks(sizes, n_looks=n_looks or 1, first_pages=first, first_documents=st.min_documents)
    cum = np.cumsum(sizes)
    return Plan(order, [int(cum[g - 1]) for g in at], len(order), [docs[p] for p in order])


def study_plan(st: Study, pages_file: Path) -> Plan:
    """The plan of a sequential study from its judged pages.jsonl (ids and documents), the same for the study and
    the gate."""
    docs = judged_documents(pages_file, st.split, st.limit)
    return make_plan(st, list(docs), docs)


def _values(rows: Rows, ids: list[str], metric: str) -> np.ndarray:
    """``metric`` on each page, NaN where the page has no value (a page without a table) or no row; cer/wer
    clipped to [0, 1] as ``compare_scores`` judges them."""
    vals = [rows[i].value(metric) if i in rows else None for i in ids]
    out = np.array([np.nan if v is None else v for v in vals], dtype=np.float64)
    return np.clip(out, 0.0, 1.0) if metric in METRICS and METRICS[metric].clipped else out


def _rules(st: Study, base: Rows, ids: list[str], cand: Rows) -> dict[str, dict]:
    """Per metric, the document-level settings ``clustered.decide`` takes (as ``compare_scores`` derives them);
    ``same_output``: per page whether both outputs hash the same (identical_outputs needs every one)."""
    same = np.array([base[i].output_sha256 is not None and base[i].output_sha256 == cand[i].output_sha256
                     for i in ids], dtype=bool)
    out = {}
    for m in st.metrics:
        spec, given = METRICS[m], st.verdict_settings(m)
        out[m] = {"worst_page_damage": given["worst_page_damage"],
                  "worst_document_damage": given["worst_document_damage"], "damage_ceiling": spec.margin_ceiling,
                  "min_documents": st.min_documents, "baseline_higher_is_better": spec.higher_is_better,
                  "baseline_floor": spec.baseline_floor if given["baseline_floor"] is None else given["baseline_floor"],
                  "baseline": _values(base, ids, m), "same_output": same}
    return out


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
                                equivalence=st.test == "equivalence", min_pages=st.min_pages,
                                documents=plan.documents[:n], rules=_rules(st, base, ids, cand))
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
        # the document-level fields, from the same verdict code on the same pages at the look's level
        full = compare_scores(base, cand, m, noise=noise, ids=pages, look_alpha=s.nominal_alpha, margin=s.margin,
                              seed=st.seed, n_resamples=st.resamples, min_pages=st.min_pages,
                              equivalence=dec.test == "equivalence", **st.verdict_settings(m)) if len(ids) >= 2 else None
        extra = {} if full is None else {k: getattr(full, k) for k in DOCUMENT_FIELDS}
        v = new_verdict(settings, verdict=s.verdict, reason=s.reason, n=len(ids),
                        baseline_mean=float(b.mean()) if ids else 0.0, candidate_mean=float(c.mean()) if ids else 0.0,
                        delta=float((c - b).mean()) if ids else 0.0, lo=lo, hi=hi, interval=s.interval or "degenerate",
                        p_regression=s.p_regression, noise_floor=s.noise_floor, noise_delta=nd,
                        pages_needed=st.min_pages if s.reason == "too_few_pages" else None, pages_changed=changed,
                        pages_compared=None if changed is None else len(pages), confidence=1 - 2 * s.nominal_alpha,
                        alpha=s.nominal_alpha, **extra)
        where = f"look {look} of {len(plan.looks)} ({len(pages)} pages, nominal one-sided level {s.nominal_alpha:.2g})"
        msg = v.message
        if s.reason == "ci_straddles_margin":
            msg = (f"the {v.confidence:.1%} interval crosses the margin {s.margin:.4f} at the last look of the page "
                   "budget; a larger sequential.page_budget may decide it")
        # the regression call is Holm-adjusted on the repeated p-value, at the design's overall level
        rows.append(VariantVerdict(variant=variant, **v.model_copy(update={"message": f"{where}: {msg}",
                                                                           "alpha": dec.alpha}).model_dump()))
    return rows
