"""Pages without truth in a study: how many of the judged pages have truth (``summary.json``'s ``truth``, the
console, the report), and the truth-free bound files written beside the score files.

A study serves every page of its split to every variant, with truth or without: a page without truth has no
score, but the baseline's and the candidate's outputs still bound how much worse the candidate can be on it
(``quantgate.scoring.bounds``). Those bounds are written per page and metric to ``scores/<variant>-c<level>.bounds.jsonl``
(``study.verdicts.bounds_file``) — each candidate's outputs at the compare level against the baseline's there, and
the baseline's noise run against the same, so the report can put "differs from BF16 no more than BF16 differs from
itself" side by side — and bound by the gate like the score files (``verdicts.bound_files``). The verdicts on
pages without truth are ``study.judged``'s."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import NamedTuple

from quantgate.io.bounds import write_bounds
from quantgate.io.pageset import PageSet
from quantgate.schema.summary import BoundPage, TruthCounts, TruthFreeEvidence
from quantgate.study.judged import judged_pages
from quantgate.study.spec import Study
from quantgate.study.verdicts import bounds_file

Texts = Mapping[str, str | None]  # page id → the model's output (None: the request failed, not the model's output)


def truth_counts(st: Study, ps: PageSet) -> TruthCounts:
    """The judged pages with and without truth, and the labeling draw's standing (``heldout.label``)."""
    from quantgate.heldout.label import sample_status

    pages = judged_pages(st, ps)
    with_t = [p for p in pages if p.truth is not None]
    without = [p for p in pages if p.truth is None]
    sample = sample_status(ps)
    return TruthCounts(
        pages=len(pages), documents=len({p.document for p in pages}),
        with_truth=len(with_t), documents_with_truth=len({p.document for p in with_t}),
        without_truth=len(without), documents_without_truth=len({p.document for p in without}),
        label_sample=None if sample.draw is None else len(sample.draw.page_ids),
        labeled_at_random=sample.at_random, sample_note=None if sample.draw is None else sample.problem)


def bound_pairs(st: Study) -> list[tuple[str, int]]:
    """(variant, level) of every run bounded against the baseline at the compare level."""
    c0 = st.compare_level
    pairs = [(v.name, c0) for v in st.variants if v.name != st.baseline]
    return pairs + ([(st.baseline, st.noise_level)] if st.noise_level else [])


def write_bound_files(st: Study, out: Path, texts: Mapping[tuple[str, int], Texts], metrics: list[str],
                      documents: Mapping[str, str]) -> None:
    """Each run of :func:`bound_pairs` bounded against the baseline's outputs at the compare level, on the pages
    both answered (a failed request is no output of the model's, and pairs with nothing), written whole."""
    from quantgate.scoring.bounds import bound_rows

    base = texts[(st.baseline, st.compare_level)]
    for name, level in bound_pairs(st):
        cand = texts[(name, level)]
        both = [p for p, t in base.items() if t is not None and cand.get(p) is not None]
        rows = bound_rows(metrics, {p: base[p] or "" for p in both}, {p: cand[p] or "" for p in both},
                          {p: documents.get(p) for p in both})
        write_bounds(Path(out) / bounds_file(name, level), rows)


def truth_free_evidence(st: Study, ps: PageSet, out: Path, k: int = 3
                        ) -> tuple[list[TruthFreeEvidence], dict[str, list[BoundPage]]]:
    """From the bound files just written: per candidate × metric (then the noise run's rows) the pages changed and
    the mean bound against the margin; per candidate its ``k`` largest bounds on the first metric that has one,
    with both outputs and the page image (``study.worst``'s image rule)."""
    from quantgate.io.bounds import read_bounds
    from quantgate.serve import load_records
    from quantgate.study.worst import image_for

    out = Path(out)
    margins = st.margins_used()
    rows, largest = [], {}
    pages = ps.by_id()
    for name, level in bound_pairs(st):
        bounds = read_bounds(out / bounds_file(name, level))
        changed = sum(not b.identical for b in bounds.values())
        for m in st.metrics:
            vals = [b.bounds.get(m) for b in bounds.values()]
            known = [v for v in vals if v is not None]
            rows.append(TruthFreeEvidence(variant=name, metric=m, pages=len(bounds), changed=changed,
                                          mean_bound=sum(known) / len(known) if known else None, margin=margins[m]))
        if name == st.baseline:
            continue
        metric = next((m for m in st.metrics if any(b.bounds.get(m) for b in bounds.values())), None)
        if metric is None:
            continue
        top = sorted((b for b in bounds.values() if b.bounds.get(metric)),
                     key=lambda b: (-(b.bounds[metric] or 0.0), b.page_id))[:k]
        outputs = {v: {r.page_id: r.output for r in load_records(out / "runs" / v) if r.concurrency == st.compare_level}
                   for v in (st.baseline, name)}
        largest[name] = [BoundPage(page_id=b.page_id, metric=metric, bound=b.bounds[metric] or 0.0,
                                   has_truth=b.page_id in pages and pages[b.page_id].truth is not None,
                                   baseline_output=outputs[st.baseline].get(b.page_id),
                                   variant_output=outputs[name].get(b.page_id),
                                   image=image_for(ps, pages.get(b.page_id), out)) for b in top]
    return rows, largest


class TruthClaims(NamedTuple):
    """``build_summary``'s ``truth`` and ``truth_free`` (pass ``**claims._asdict()``)."""

    truth: TruthCounts
    truth_free: tuple[list[TruthFreeEvidence], dict[str, list[BoundPage]]]


def truth_claims(st: Study, ps: PageSet, out: Path) -> TruthClaims:
    """What the report says of pages with and without truth, as the study makes it and the gate makes it again."""
    return TruthClaims(truth_counts(st, ps), truth_free_evidence(st, ps, out))
