"""``scores.jsonl``, read and written: one :class:`~quantgate.schema.scores.ScoreRow` a line, each checked as
it is read (one error naming the file and the line), page ids unique, metric names the registry's."""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import ValidationError

from quantgate.errors import InputError
from quantgate.io.fileio import atomic_write_text, read_jsonl
from quantgate.schema.base import FieldError
from quantgate.schema.metrics import METRICS
from quantgate.schema.scores import RESERVED, ScoreRow


def write_scores(path: Path, rows: list[ScoreRow]) -> None:
    atomic_write_text(path, "".join(json.dumps(r.line(), ensure_ascii=False, allow_nan=False) + "\n" for r in rows))


def score_row(obj: object, *, where: str) -> ScoreRow:
    """One row, or InputError naming ``where`` (the file and line) and what is wrong."""
    try:
        return ScoreRow.model_validate(obj)
    except ValidationError as e:
        err = e.errors()[0]
        cause = (err.get("ctx") or {}).get("error")
        what = str(cause) if isinstance(cause, FieldError) else f"{'.'.join(map(str, err['loc'])) or 'row'}: {err['msg']}"
        raise InputError(f"{where}: {what}") from None


def read_scores(path: Path) -> dict[str, ScoreRow]:
    """page id → row, validated: numeric (or null) metric values, no NaN, unique ids, known metrics."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"{path}: no such score file")
    rows: dict[str, ScoreRow] = {}
    for no, obj in read_jsonl(path):
        row = score_row(obj, where=f"{path}:{no}")
        if row.page_id in rows:
            raise InputError(f"{path}:{no}: duplicate page_id {row.page_id!r}")
        unknown = [k for k in row.metrics if k not in METRICS and k not in RESERVED]
        if unknown:
            raise InputError(f"{path}:{no}: unknown metric {unknown[0]!r}; known: {', '.join(METRICS)}")
        rows[row.page_id] = row
    if not rows:
        raise InputError(f"{path}: no score rows")
    return rows
