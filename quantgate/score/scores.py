"""Per-page scores: predictions (a run's records, or a folder of files) scored against a page set, one
:class:`~quantgate.schema.scores.ScoreRow` per page (written and read by ``quantgate.io.scores``)."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path
from typing import Literal

from quantgate.errors import InputError
from quantgate.io.fileio import read_jsonl
from quantgate.io.pageset import PageSet
from quantgate.schema.base import parse_record
from quantgate.schema.run import RequestRecord
from quantgate.schema.scores import ScoreRow
from quantgate.score.metrics import Metric, score_one


def load_predictions(path: Path, ps: PageSet, split: str | None = None, concurrency: int | None = None) -> dict[str, str | None]:
    """page id → predicted text (None for a failed request). ``path`` is a run folder (its
    ``requests.jsonl``; ``concurrency`` picks one level, default the lowest) or a folder of
    ``<page_id>.md``/``.txt`` files from any parser."""
    path = Path(path)
    wanted = {p.id for p in ps.split(split)}
    if (path / "requests.jsonl").is_file():
        by_level: dict[int, dict[str, str | None]] = {}
        for no, obj in read_jsonl(path / "requests.jsonl", repair_torn_tail=False):
            r = parse_record(RequestRecord, obj, where=f"{path / 'requests.jsonl'}:{no}")
            by_level.setdefault(r.concurrency, {})[r.page_id] = r.output if r.error is None else None
        if not by_level:
            raise InputError(f"{path / 'requests.jsonl'}: no requests recorded yet")
        level = concurrency if concurrency is not None else min(by_level)
        if level not in by_level:
            raise InputError(f"{path}: no requests at concurrency {level}; recorded levels: {sorted(by_level)}")
        preds = {k: v for k, v in by_level[level].items() if k in wanted}
    elif path.is_dir():
        preds = {}
        for f in sorted(path.iterdir()):
            if f.suffix in (".md", ".txt") and f.stem in wanted:
                try:
                    preds[f.stem] = f.read_bytes().decode("utf-8")
                except UnicodeDecodeError:
                    raise InputError(f"{f}: prediction is not UTF-8") from None
    else:
        raise InputError(f"{path}: neither a run folder (requests.jsonl) nor a folder of <page_id>.md/.txt files")
    if not preds:
        raise InputError(f"{path}: no predictions match the pages of {ps.root} (split {split or 'all'}); "
                         "are the file names the page ids?")
    return preds


def score_pages(ps: PageSet, preds: dict[str, str | None], metrics: list[Metric], split: str | None = None,
                progress: Callable[[str], None] | None = None, only: set[str] | None = None) -> list[ScoreRow]:
    """One row per page of the split (``only``: of these pages of it). A page with no prediction is
    scored as empty (worst value) and flagged ``missing``; nothing is dropped."""
    rows = []
    for p in ps.split(split):
        if only is not None and p.id not in only:
            continue
        pred = preds.get(p.id)
        truth = ps.truth_text(p)
        omnidoc = ps.omnidoc_truth_text(p) if any(m.needs == "omnidoc" for m in metrics) else None
        error: Literal["missing", "request failed"] | None = (
            "missing" if p.id not in preds else "request failed" if pred is None else None)
        rows.append(ScoreRow(page_id=p.id, empty=pred is None or not pred.strip(), error=error,
                             # what compare --exact compares: the text itself, not its score
                             output_sha256=None if pred is None else hashlib.sha256(pred.encode("utf-8")).hexdigest(),
                             **{m.name: score_one(m, pred, truth, p.checks, omnidoc) for m in metrics}))
        if progress:
            progress(p.id)
    return rows
