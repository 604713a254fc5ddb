"""A study's lm-eval step: each variant through its own server (the one its page runs use), skipped
when a finished run matches the weights; then paired verdicts against the baseline."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from quantgate.errors import InputError
from quantgate.io.fileio import safe_join
from quantgate.io.fingerprint import weights_fingerprint
from quantgate.schema.base import read_record_file
from quantgate.schema.lmeval import LmEvalRun
from quantgate.schema.summary import LmEvalVerdict
from quantgate.study.spec import Study, resolve_path


@dataclass
class LmEvalPlan:
    """What a study's lm-eval step runs for every variant: the tasks and the include folder."""

    tasks: list[str]
    include: Path | None
    limit: int | None
    concurrent: int

    def done(self, variant_dir: Path, out: Path) -> bool:
        """A finished run of the same weights, tasks and limit is there: nothing to run."""
        from quantgate.lmeval.run import RESULT

        f = Path(out) / RESULT
        if not f.is_file():
            return False
        old = read_record_file(LmEvalRun, f)
        return (old.variant_fingerprint, old.tasks, old.limit) == (weights_fingerprint(variant_dir), self.tasks,
                                                                   self.limit)


def plan_lmeval(st: Study, base: Path, out: Path, pages_dir: Path) -> LmEvalPlan:
    """The tasks (the page task written from the study's pages, when asked) for every variant."""
    from quantgate.lmeval import PAGE_TASK, write_page_task

    spec = st.lm_eval
    # like every other path in a study, include_path is relative to the study file
    tasks, include = list(spec.tasks), (resolve_path(base, spec.include_path) if spec.include_path else None)
    if spec.page_task:
        if include:
            raise InputError("lm_eval: page_task and include_path cannot be combined (lm-eval takes one include "
                             "path); set page_task: false or put your tasks beside the page task")
        include = write_page_task(pages_dir, out / "lmeval" / "task", prompt=st.prompt, split=st.split,
                                  limit=spec.limit, max_tokens=min(st.max_tokens, 64), root=out)
        tasks.append(PAGE_TASK)
    return LmEvalPlan(tasks, include, spec.limit, spec.concurrent)


def run_variant_lmeval(plan: LmEvalPlan, variant_dir: Path, backend, out: Path, *, server=None, on_response=None,
                       record_root: Path | None = None, log=print) -> None:
    """lm-eval for one variant, through ``server`` (its shared server) when given."""
    from quantgate.lmeval import run_lmeval

    run_lmeval(variant_dir, backend, out, tasks=plan.tasks, include_path=plan.include, limit=plan.limit,
               concurrent=plan.concurrent, server=server, on_response=on_response, record_root=record_root, log=log)


def lmeval_verdicts(st: Study, out: Path) -> list[LmEvalVerdict]:
    """Each candidate's paired verdicts against the baseline over lm-eval's logged samples, with the
    study's seed, resamples, min_pages and test (``exact`` compares texts, which lm-eval's samples do
    not carry: lm-eval verdicts are non-inferiority then)."""
    from quantgate.lmeval import compare_lmeval

    spec = st.lm_eval
    if spec is None:
        return []
    rows = []
    for v in st.variants:
        if v.name != st.baseline:
            rows += [LmEvalVerdict(variant=v.name, **r.model_dump()) for r in compare_lmeval(
                out / "lmeval" / st.baseline, out / "lmeval" / v.name, margins=spec.margins,
                default_margin=spec.margin, seed=st.seed, n_resamples=st.resamples, min_pages=st.min_pages,
                equivalence=st.test == "equivalence", names=(st.baseline, v.name), min_documents=st.min_documents,
                worst_sample_damage=spec.worst_sample_damage)]
    return rows


def lmeval_files(st: Study, out: Path) -> list[Path]:
    """The files lm-eval verdicts rest on: each variant's lmeval.json and its samples files."""
    from quantgate.lmeval.run import RESULT, load_lmeval

    files = []
    for v in st.variants:
        d = out / "lmeval" / v.name
        run, _ = load_lmeval(d)
        files += [d / RESULT] + [safe_join(d, name, what=f"{d / RESULT}: samples") for name in
                                 sorted(run.samples.values())]
    return files


def lmeval_runs(st: Study, out: Path) -> dict[str, LmEvalRun]:
    from quantgate.lmeval.run import load_lmeval

    return {v.name: load_lmeval(out / "lmeval" / v.name)[0] for v in st.variants}
