"""Per-page scores: predictions (a run's records, or a folder of files) scored against a page set, one
:class:`~quantgate.schema.scores.ScoreRow` per page (written and read by ``quantgate.io.scores``)."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from quantgate.errors import InputError
from quantgate.io.fileio import read_jsonl
from quantgate.io.pageset import PageSet
from quantgate.schema.base import parse_record
from quantgate.schema.run import RequestRecord
from quantgate.schema.scores import ScoreRow
from quantgate.scoring.metrics import Metric, score_one
from quantgate.scoring.predictions import Repeats, prediction_files, read_prediction
from quantgate.scoring.units import page_units, repeats_units


@dataclass(frozen=True)
class Output:
    """What a run gave for one page: the model's text (``truncated``: cut at max_tokens, the model's own failure)
    or, for a request that failed (``failed``: its error), no text — a failure of the server's side or of the
    page's image, which says nothing about the model."""

    text: str | None
    truncated: bool = False
    failed: str | None = None

    @classmethod
    def of(cls, r: RequestRecord) -> Output:
        if r.error is not None:
            return cls(None, failed=f"{r.error_kind or 'unclassified'}: {r.error}")
        # no error but no text: the model answered with nothing, its own empty output
        return cls(r.output or "", truncated=r.truncated)


# a plain text (a parser's file); several outputs of one page (olmOCR-bench's repeats); None: a request that failed,
# unclassified
Prediction = str | Repeats | Output | None


def _output(pred: str | Output | None) -> Output:
    if isinstance(pred, Output):
        return pred
    return Output(None, failed="request failed") if pred is None else Output(pred)


def load_predictions(path: Path, ps: PageSet, split: str | None = None,
                     concurrency: int | None = None) -> dict[str, Prediction]:
    """page id → its :class:`Output` (a run folder: its ``requests.jsonl``; ``concurrency`` picks one level,
    default the lowest) or its text (a folder of any system's output files, named by the rules of
    :mod:`quantgate.scoring.predictions`; several repeats of a page as :class:`Repeats`)."""
    path = Path(path)
    wanted = {p.id for p in ps.split(split)}
    if (path / "requests.jsonl").is_file():
        by_level: dict[int, dict[str, Prediction]] = {}
        for no, obj in read_jsonl(path / "requests.jsonl", repair_torn_tail=False):
            r = parse_record(RequestRecord, obj, where=f"{path / 'requests.jsonl'}:{no}")
            by_level.setdefault(r.concurrency, {})[r.page_id] = Output.of(r)
        if not by_level:
            raise InputError(f"{path / 'requests.jsonl'}: no requests recorded yet")
        level = concurrency if concurrency is not None else min(by_level)
        if level not in by_level:
            raise InputError(f"{path}: no requests at concurrency {level}; recorded levels: {sorted(by_level)}")
        preds = {k: v for k, v in by_level[level].items() if k in wanted}
    elif path.is_dir():
        preds = {}
        for pid, files in prediction_files(path, {p.id for p in ps.pages}).items():
            if pid in wanted:  # a page of another split is named correctly, and not scored here
                texts = tuple(read_prediction(f) for f in files)
                preds[pid] = Repeats(texts) if len(texts) > 1 else texts[0]
    else:
        raise InputError(f"{path}: neither a run folder (requests.jsonl) nor a folder of <page_id>.md/.txt files")
    if not preds:
        raise InputError(f"{path}: no predictions for the pages of {ps.root} in split {split or 'all'}; the files "
                         "name pages of another split, or none")
    return preds


def model_texts(preds: Mapping[str, Prediction]) -> dict[str, str]:
    """page id → the model's text, for the pages whose request did not fail (what a whole-set value averages).
    Of a page's repeats, the first: OmniDocBench's whole-set values have no notion of repeats."""
    first = {k: v.texts[0] if isinstance(v, Repeats) else v for k, v in preds.items()}
    return {pid: out.text or "" for pid, out in ((k, _output(v)) for k, v in first.items()) if out.failed is None}


def _repeats_row(p, reps: Repeats, metrics: list[Metric], truth, omnidoc) -> ScoreRow:
    """One row for several outputs of a page: each metric the mean over the repeats (None where it applies to
    none), the hash over the repeats' hashes in order (what ``compare --exact`` compares)."""
    values = {}
    for m in metrics:
        vals = [v for v in (score_one(m, t, truth, p.checks, omnidoc, p.parsebench) for t in reps.texts) if v is not None]
        values[m.name] = sum(vals) / len(vals) if vals else None
    digest = hashlib.sha256("".join(hashlib.sha256(t.encode("utf-8")).hexdigest() for t in reps.texts).encode())
    units = repeats_units(page_units(metrics, t, omnidoc, p.parsebench) for t in reps.texts)
    return ScoreRow(page_id=p.id, document=p.document, empty=not any(t.strip() for t in reps.texts),
                    output_sha256=digest.hexdigest(), repeats=len(reps.texts), units=units, **values)


def score_pages(ps: PageSet, preds: Mapping[str, Prediction], metrics: list[Metric], split: str | None = None,
                progress: Callable[[str], None] | None = None, only: set[str] | None = None) -> list[ScoreRow]:
    """One row per page of the split (``only``: of these pages of it), with its ``document``. A page with no
    prediction is scored as empty (worst value) and flagged ``missing``: a parser that wrote nothing failed. A
    page whose request failed is not scored at all — its row has ``error: "request failed"`` and no metric
    values, so no verdict pairs it (:func:`not_scored` lists them) — since an HTTP error or a dead server is not
    the model's output. An output cut at max_tokens is scored as given and flagged ``truncated``."""
    rows = []
    for p in ps.split(split):
        if only is not None and p.id not in only:
            continue
        truth = ps.truth_text(p)
        omnidoc = ps.omnidoc_truth_text(p) if any(m.needs == "omnidoc" for m in metrics) else None
        if p.id not in preds:
            row = ScoreRow(page_id=p.id, document=p.document, empty=True, error="missing", output_sha256=None,
                           units=page_units(metrics, None, omnidoc, p.parsebench),
                           **{m.name: score_one(m, None, truth, p.checks, omnidoc, p.parsebench) for m in metrics})
        elif isinstance(pred := preds[p.id], Repeats):
            row = _repeats_row(p, pred, metrics, truth, omnidoc)
        else:
            out = _output(pred)
            error: Literal["request failed"] | None = None if out.failed is None else "request failed"
            text = out.text
            row = ScoreRow(page_id=p.id, document=p.document, empty=error is None and not (text or "").strip(),
                           error=error, truncated=out.truncated,
                           # a failed request is not the model's output: no metric values, no units
                           units={} if error else page_units(metrics, text, omnidoc, p.parsebench),
                           # what compare --exact compares: the text itself, not its score
                           output_sha256=None if text is None else hashlib.sha256(text.encode("utf-8")).hexdigest(),
                           **{m.name: None if error else score_one(m, text, truth, p.checks, omnidoc, p.parsebench) for m in metrics})
        rows.append(row)
        if progress:
            progress(p.id)
    return rows


def not_scored(rows: list[ScoreRow]) -> list[str]:
    """The pages left out of every verdict because their request failed (not the model's output)."""
    return [r.page_id for r in rows if r.error == "request failed"]
