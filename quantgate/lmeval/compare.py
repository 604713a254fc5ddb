"""lm-eval results of a variant against the baseline's: score ± lm-eval's stderr, a recovery ratio,
and a paired verdict from the per-sample logs.

The recovery ratio is oriented so that 1.0 is parity and above 1 is better whatever the metric's
direction (candidate/baseline when higher is better, baseline/candidate when lower is better); it is
shown beside the verdict, never instead of it: a ratio is a point estimate, the verdict carries the
paired confidence interval and the margin."""

from __future__ import annotations

from pathlib import Path

from quantgate.errors import InputError
from quantgate.judge.compare import Names, compare_scores
from quantgate.lmeval.run import load_lmeval
from quantgate.schema.lmeval import LmEvalResult, LmEvalSample
from quantgate.schema.scores import ScoreRow
from quantgate.schema.settings import DEFAULT_RESAMPLES, MIN_DOCUMENTS, MIN_PAGES, VerdictSettings


def recovery(base: float, cand: float, higher_is_better: bool) -> float | None:
    num, den = (cand, base) if higher_is_better else (base, cand)
    return num / den if den else None


def compare_lmeval(baseline_dir: Path, candidate_dir: Path, *, margins: dict[str, float] | None = None,
                   default_margin: float | None = None, seed: int = 0, n_resamples: int = DEFAULT_RESAMPLES,
                   min_pages: int = MIN_PAGES, equivalence: bool = False,
                   names: tuple[str, str] = ("baseline", "candidate"), min_documents: int = MIN_DOCUMENTS,
                   worst_sample_damage: float | None = None) -> list[LmEvalResult]:
    """One row per task × metric (``metric,filter`` as lm-eval names it): lm-eval's scores, the
    recovery ratio and every field of the paired ``Verdict`` over the logged samples (a sample is a
    page here: ``min_pages`` applies to them). lm-eval's metrics are outside quantgate's registry, so
    each needs a margin: ``margins["task/metric"]``, ``margins["metric"]`` or ``default_margin``. Each sample is
    its own document (``min_documents`` of them); ``worst_sample_damage``: the rare-failure rule's declared D."""
    margins = margins or {}
    brun, bs = load_lmeval(baseline_dir)
    crun, cs = load_lmeval(candidate_dir)
    rows = []
    for task, bmetrics in brun.results.items():
        if task not in crun.results:
            raise InputError(f"{candidate_dir}: no lm-eval results for task {task!r} (baseline has them); rerun lmeval")
        _same_documents(task, bs.get(task, {}), cs.get(task, {}), baseline_dir, candidate_dir)
        for key, b in bmetrics.items():
            c = crun.results[task].get(key)
            if c is None:
                continue
            name = key.split(",")[0]
            margin = margins.get(f"{task}/{name}", margins.get(name, default_margin))
            if margin is None:
                raise InputError(f"lm-eval {task} {name}: no margin declared; give one in the metric's units "
                                 "(lmeval-compare --margin, or a study's lm_eval.margin / lm_eval.margins)")
            # a logged sample is a page here: one row per document, its value of this metric
            base_rows = {d: ScoreRow(page_id=d, **{key: r.metrics.get(key)}) for d, r in bs.get(task, {}).items()}
            cand_rows = {d: ScoreRow(page_id=d, **{key: r.metrics.get(key)}) for d, r in cs.get(task, {}).items()}
            settings = VerdictSettings(metric=key, margin=margin, higher_is_better=b.higher_is_better, seed=seed,
                                       n_resamples=n_resamples, min_pages=min_pages, min_documents=min_documents,
                                       test="equivalence" if equivalence else "non_inferiority",
                                       worst_page_damage=worst_sample_damage)
            v = compare_scores(base_rows, cand_rows, settings, names=Names(f"{names[0]}:{task}", f"{names[1]}:{task}"))
            rows.append(LmEvalResult(task=task, **v.model_dump(), baseline=b.value, baseline_stderr=b.stderr,
                                     candidate=c.value, candidate_stderr=c.stderr,
                                     recovery=recovery(b.value, c.value, b.higher_is_better)))
    return rows


def _same_documents(task: str, base: dict[str, LmEvalSample], cand: dict[str, LmEvalSample], bdir: Path,
                    cdir: Path) -> None:
    """Pairs are made by document id: two runs whose data differ under the same id (another version
    of the task's data, a reshuffled file) must not be paired."""
    differ = [d for d in base if d in cand and None not in (base[d].doc_hash, cand[d].doc_hash)
              and base[d].doc_hash != cand[d].doc_hash]
    if differ:
        raise InputError(f"lm-eval task {task}: {len(differ)} document(s) differ between {bdir} and {cdir} under the "
                         f"same id (doc_hash), first {differ[0]!r}: the runs evaluated different data; rerun both "
                         "with the same task files")
