"""The serving side of a sequential study's accuracy pass (``serve_variant(batches=...)``): each batch's new
records scored, the looks replayed (``quantgate.judge.replay``), and the next look's pages named. The
baseline's pass is the whole page budget as one batch."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from quantgate.errors import InputError
from quantgate.io.pageset import PageSet
from quantgate.judge.replay import Plan, replay, stop_record
from quantgate.schema.run import RequestRecord, SequentialStop
from quantgate.schema.scores import ScoreRow
from quantgate.schema.sequential import SequentialDecision
from quantgate.schema.study import Study
from quantgate.study.plan import study_settings
from quantgate.study.verdicts import empty_output_scores

if TYPE_CHECKING:
    from quantgate.scoring import Output

Rows = dict[str, ScoreRow]


class SequentialPass:
    """A candidate's accuracy pass for ``serve_variant(batches=...)``: after each batch the candidate's new
    records are scored, the looks replayed, and the next look's pages named (None once it stops). Each look judges
    the baseline's fitness against what an empty output scores on its pages (``study.verdicts.empty_output_scores``,
    the rows the score stage writes to ``scores/empty-output.jsonl``), so the pass stops where the study's verdicts
    and the gate's remake, which read that file, say it stopped."""

    def __init__(self, st: Study, plan: Plan, ps: PageSet, run_dir: Path, level: int, base: Rows, noise: Rows | None,
                 on_look: Callable[[SequentialDecision], None] | None = None):
        from quantgate.scoring import parse_metric_list

        self.st, self.plan, self.ps, self.run_dir, self.level = st, plan, ps, Path(run_dir), level
        self.base, self.noise, self.on_look = base, noise, on_look
        if st.sequential is None:
            raise InputError("the study has no sequential block")
        self.spending = st.sequential.spending
        self.settings = study_settings(st)  # validated once for the pass, not again at every look
        self.metrics = parse_metric_list(st.metrics)
        self.empty = {r.page_id: r for r in empty_output_scores(ps, self.metrics, st.split, plan.order)}
        self.record: SequentialStop | None = None
        self.decision: SequentialDecision | None = None
        self._rows: dict[tuple[str, Output], ScoreRow] = {}
        # failures recorded before this run: not counted until re-sent once (a transient timeout must not decide a
        # look, as the fixed design re-sends failures on resume); a failure of this run is not re-sent in a loop: its page
        # is left out of the looks, unscored (not the model's output)
        self._stale = {(r.page_id, r.end) for r in _latest(self.run_dir, level) if r.error is not None}

    def _cand(self) -> Rows:
        from quantgate.scoring import Output, score_pages

        preds = {r.page_id: Output.of(r) for r in _latest(self.run_dir, self.level) if (r.page_id, r.end) not in self._stale}
        new = {p: t for p, t in preds.items() if (p, t) not in self._rows}
        if new:
            for row in score_pages(self.ps, new, self.metrics, self.st.split, only=set(new)):
                self._rows[(row.page_id, new[row.page_id])] = row
        return {p: self._rows[(p, t)] for p, t in preds.items() if (p, t) in self._rows}

    def next(self) -> list[str] | None:
        dec, nxt = replay(self.settings, self.spending, self.plan, (self.base, self._cand(), self.noise), self.empty)
        if dec is not None and (self.decision is None or dec.look != self.decision.look) and self.on_look:
            self.on_look(dec)
        self.decision = dec
        self.record = None if dec is None else stop_record(dec, self.level)
        return nxt


def _latest(run_dir: Path, level: int) -> list[RequestRecord]:
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


def level_rows(st: Study, ps: PageSet, run_dir: Path, level: int) -> Rows:
    """A run's score rows at one level, for the pages it has records of (as the score stage writes them)."""
    from quantgate.scoring import load_predictions, parse_metric_list, score_pages

    preds = load_predictions(run_dir, ps, st.split, level)
    rows = score_pages(ps, preds, parse_metric_list(st.metrics), st.split, only=set(preds))
    return {r.page_id: r for r in rows}


def accuracy_pass(st: Study, plan: Plan, ps: PageSet, out: Path, variant: str, log: Callable[[str], None]
                  ) -> SequentialPass | FixedPass:
    """The batches of a sequential study's accuracy pass (the first concurrency level) for ``variant``: the
    baseline's whole page budget, or a candidate's looks against the baseline's (and its noise run's) scores."""
    c0, run_dir, noise_level = st.compare_level, Path(out) / "runs" / variant, st.noise_level
    if variant == st.baseline:
        return FixedPass(plan.order, run_dir, c0)
    brun = Path(out) / "runs" / st.baseline
    return SequentialPass(st, plan, ps, run_dir, c0, level_rows(st, ps, brun, c0),
                          level_rows(st, ps, brun, noise_level) if noise_level else None,
                          on_look=lambda d: log(f"{variant}: {d.stop_line()}"))
