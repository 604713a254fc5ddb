"""A study's sequential design made from its spec: the serving order and the looks (``make_plan``, the same
for the study and the gate), and the spec's verdict settings (``study_settings``), made once by each caller and
handed whole to ``quantgate.judge.replay`` — the judge takes the settings record, never the study."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np

from quantgate.errors import InputError
from quantgate.io.fileio import read_jsonl
from quantgate.judge.clustered import page_order, plan_looks, rare_failure_count
from quantgate.judge.replay import Plan
from quantgate.judge.sequential import FIRST_LOOK
from quantgate.schema.metrics import METRICS
from quantgate.schema.settings import VerdictSettings
from quantgate.study.spec import Study

__all__ = ["judged_documents", "judged_ids", "make_plan", "study_plan", "study_settings"]


def study_settings(st: Study) -> dict[str, VerdictSettings]:
    """Each metric's verdict settings, as the study declares them (``Study.verdict_settings``). Each record is
    validated where it is made, so a caller makes the dict once (per pass, per remake of the verdicts) and hands it
    on whole rather than asking the study again for every look, candidate or metric."""
    return {m: st.verdict_settings(m) for m in st.metrics}


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
    """No look before the effective pages the strictest metric's rare-failure rule needs: a
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
