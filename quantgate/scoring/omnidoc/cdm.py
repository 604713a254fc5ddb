"""OmniDocBench v1.5's formula CDM end to end (upstream's ``metrics/cal_metric.py`` ``call_CDM`` and
``metrics/cdm_metric.py`` at 523fd1d, re-implemented): each display formula the v1.5 match scores as a formula
(:func:`quantgate.scoring.omnidoc.v15.formula_pairs`) is stripped of ``$``/``$$`` and a ```` ```latex ```` fence as
upstream strips it, tokenized (:mod:`.cdm_tokenize`), coloured (:mod:`.cdm_latex`), rendered (:mod:`.cdm_render`)
and matched (:mod:`.cdm_match`); its CDM is the F1 of matched tokens.

Aggregation as upstream's: the set value is the mean over formulas (not pages); a page's value, which upstream
does not write, is the mean over its formulas. A formula that fails to render scores 0 with its reason in the
notes, as upstream scores it 0. Overall = ((1 − text edit)·100 + table TEDS·100 + formula CDM·100) / 3.

Needs the toolchain of :mod:`.cdm_render` (``make setup-cdm``): :func:`set_cdm` raises
:class:`~quantgate.scoring.omnidoc.cdm_render.CdmToolchainMissing` naming what is missing, never falls back."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

from quantgate.schema.metrics import omnidoc15_overall
from quantgate.scoring.omnidoc import cdm_latex, cdm_render, cdm_tokenize


def cdm_inputs(gt: str, pred: str) -> tuple[str, str]:
    """The truth and prediction as upstream hands them to CDM: ``$``/``$$`` delimiters off both, and of the
    prediction only what a ```` ```latex ```` fence holds."""
    gt = gt.lstrip("$").rstrip("$").strip().lstrip("$").rstrip("$").strip()
    pred = pred.split("```latex")[-1].split("```")[0]
    pred = pred.lstrip("$").rstrip("$").strip().lstrip("$").rstrip("$").strip()
    return gt, pred


def ready(latex: str) -> str:
    """A formula as the colouring takes it: tokenized, or as written where the tokenizer fails (upstream's
    fallback)."""
    if not latex:
        return latex
    return cdm_latex.after_tokenizer(cdm_tokenize.tokenize(cdm_latex.before_tokenizer(latex)), latex)


def formula_cdm(gt: str, pred: str) -> tuple[float, str | None]:
    """CDM of one matched formula pair (as the match wrote them), and why it is 0 where rendering failed."""
    gt, pred = cdm_inputs(gt, pred)
    return cdm_render.score_ready(ready(gt), ready(pred), workers=1)


def page_cdm(pairs: list[tuple[str, str]], workers: int | None = None) -> tuple[list[float], list[str]]:
    """Each formula pair's CDM, in order, and a note for each scored 0 because it did not render: one page's
    formulas rendered in parallel (what the per-page metric and the score rows' units keep)."""
    cdm_render.require_toolchain()
    with ThreadPoolExecutor(max_workers=workers or min(8, os.cpu_count() or 1)) as pool:
        scored = list(pool.map(lambda p: formula_cdm(*p), pairs))
    return ([v for v, _ in scored],
            [f"display formula {k + 1} scored CDM 0, it did not render ({why})" for k, (_, why) in enumerate(scored)
             if why])


def set_cdm(pages: dict[str, list[tuple[str, str]]], workers: int | None = None) \
        -> tuple[dict[str, float | None], float | None, list[str]]:
    """Per page (mean of its formulas; None without one), the set value (mean over all formulas) and notes for
    each formula scored 0 because it did not render."""
    cdm_render.require_toolchain()
    jobs = [(pid, k, gt, pred) for pid, pairs in pages.items() for k, (gt, pred) in enumerate(pairs)]
    with ThreadPoolExecutor(max_workers=workers or min(8, os.cpu_count() or 1)) as pool:
        scored = list(pool.map(lambda j: formula_cdm(j[2], j[3]), jobs))
    per_page: dict[str, list[float]] = {pid: [] for pid in pages}
    notes = []
    for (pid, k, _, _), (value, why) in zip(jobs, scored, strict=True):
        per_page[pid].append(value)
        if why:
            notes.append(f"{pid}: display formula {k + 1} scored CDM 0, it did not render ({why})")
    values = [v for vs in per_page.values() for v in vs]
    return ({pid: sum(vs) / len(vs) if vs else None for pid, vs in per_page.items()},
            sum(values) / len(values) if values else None, notes)


# OmniDocBench v1.5's headline, on its 0-100 scale; None where a part has no value on the set (one rule, in the
# schema, which the report reads too)
overall = omnidoc15_overall
