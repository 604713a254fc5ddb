"""The pages a study judges, and what its verdicts on them are made from when some have no truth
(``truth_free_inputs``, which ``study.verdicts.study_verdicts`` calls for the study and the gate alike). Apart from ``study.truthfree`` (the
bounds files and the report's counts), which imports ``study.verdicts``: this module must not, as that one calls it."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from quantgate.io.pageset import PageSet
from quantgate.judge.compare import TruthFree
from quantgate.schema.pages import PageRecord
from quantgate.schema.settings import VerdictSettings
from quantgate.study.spec import Study


def judged_pages(st: Study, ps: PageSet) -> list[PageRecord]:
    """The pages every variant is sent: the study's split, cut at ``limit``."""
    return ps.split(st.split)[: st.limit or None]


def judges_without_truth(st: Study, ps: PageSet) -> bool:
    """Whether the study's verdicts judge pages without truth (and so read the labeling draw): a fixed study with a
    judged page that has none. A sequential study judges scored pages only."""
    return st.sequential is None and any(p.truth is None for p in judged_pages(st, ps))


def run_texts(preds: Mapping[str, object], fill: list[str] | None = None) -> dict[str, str | None]:
    """A run's predictions (``scoring.load_predictions``) as texts; ``fill``: the pages a missing prediction counts
    as an empty output for (the fixed design scores such a page as empty; a sequential pass judges what it sent)."""
    from quantgate.scoring import Output

    texts: dict[str, str | None] = {}
    for pid, pred in preds.items():
        if isinstance(pred, Output):
            texts[pid] = None if pred.failed is not None else (pred.text or "")
        else:
            texts[pid] = pred if isinstance(pred, str) else None
    return texts | {pid: "" for pid in fill or [] if pid not in texts}


def truth_free_inputs(st: Study, settings: dict[str, VerdictSettings], out: Path, pages_file: Path | None
                      ) -> dict[tuple[str, str], TruthFree]:
    """Per (candidate, metric), what its verdict on every judged page is made from when some judged page has no
    truth (``study.outputs.output_pages``; the judge makes the verdict, ``judge.compare.judge_family``): the runs'
    outputs at the compare level, the truth of the pages that have it, the documents, the recorded random draw when
    its pages stand as one (``heldout.label.checked_sample_status``: an edited or stale draw is a DataError), the
    baseline's re-run as the noise. Empty when every judged page has truth, for a sequential study, and for a
    metric with no truth-free bound (``checks``): those keep their scored verdicts, as do a tag's rows.
    ``settings``: each metric's, as ``study_verdicts`` made them once. The study and the gate both call this
    (``verdicts.study_verdicts``)."""
    from quantgate.heldout.label import checked_sample_status
    from quantgate.io.pageset import load_pageset
    from quantgate.schema.metrics import METRICS
    from quantgate.scoring import load_predictions
    from quantgate.study.noise_layout import layout_twin
    from quantgate.study.outputs import OutputTexts, output_pages

    out = Path(out)
    pages_file = Path(pages_file) if pages_file is not None else out / "pages" / "pages.jsonl"
    if pages_file.name != "pages.jsonl" or not pages_file.is_file():
        return {}  # (a page set outside an older study folder: its truths were never bound, see gate.check)
    ps = load_pageset(pages_file.parent)
    if not judges_without_truth(st, ps):
        return {}
    judged = judged_pages(st, ps)
    c0, fill = st.compare_level, None if st.limit else [p.id for p in judged]

    def texts(name: str, level: int) -> dict[str, str | None]:
        return run_texts(load_predictions(out / "runs" / name, ps, st.split, level), fill)

    base = texts(st.baseline, c0)
    noise = texts(st.baseline, st.noise_level) if st.noise_level else None
    status = checked_sample_status(ps)  # an edited or stale draw stops the verdict, as in `compare --pages`
    made: dict[tuple[str, str], TruthFree] = {}
    for v in st.variants:
        if v.name == st.baseline:
            continue
        twin = layout_twin(st, v)
        cand, v_noise = texts(v.name, c0), texts(twin.name, c0) if twin else noise
        ids = [p.id for p in judged if base.get(p.id) is not None and cand.get(p.id) is not None
               and (v_noise is None or v_noise.get(p.id) is not None)]
        outputs = OutputTexts(_only(base, ids), _only(cand, ids), None if v_noise is None else _only(v_noise, ids))
        truth = {p.id: ps.truth_text(p) or "" for p in judged if p.truth is not None and p.id in set(ids)}
        at_random = set(status.labeled) & set(ids) if status.at_random else set()
        documents = {p.id: p.document for p in judged}
        for m in st.metrics:
            if METRICS[m].bound == "none":
                continue
            made[(v.name, m)] = output_pages(outputs, truth, documents, at_random, settings[m].metric)
    return made


def _only(texts: Mapping[str, str | None], ids: list[str]) -> dict[str, str]:
    return {i: texts[i] or "" for i in ids}
