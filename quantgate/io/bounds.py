"""A bounds file, read and written: one :class:`~quantgate.schema.bounds.BoundRow` a line — a page's truth-free
damage bound per metric (``quantgate.scoring.bounds``) — beside the score file of the same run (a study names it
``scores/<variant>-c<level>.bounds.jsonl``, ``study.verdicts.bounds_file``). Each line is checked as it is read
(one error naming the file and the line), page ids unique."""

from __future__ import annotations

import json
from pathlib import Path

from quantgate.errors import DataError, InputError
from quantgate.io.fileio import atomic_write_text, read_jsonl
from quantgate.schema.base import check_schema_version, parse_record
from quantgate.schema.bounds import BOUNDS_SCHEMA_VERSION, BoundRow


def write_bounds(path: str | Path, rows: list[BoundRow]) -> None:
    """Write the whole file at once (atomic): a reader never sees half of it."""
    atomic_write_text(path, "".join(json.dumps(r.model_dump(mode="json"), ensure_ascii=False, allow_nan=False) + "\n"
                                    for r in rows))


def read_bounds(path: str | Path) -> dict[str, BoundRow]:
    """page id → row, validated: a schema version this quantgate reads, registry metrics, bounds within each
    metric's range, unique page ids. A malformed file is a DataError naming the file and line."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: no such bounds file; it is written beside scores.jsonl when the variant is scored")
    rows: dict[str, BoundRow] = {}
    try:
        for no, obj in read_jsonl(path):
            where = f"{path}:{no}"
            check_schema_version(obj, BOUNDS_SCHEMA_VERSION, where=where)
            row = parse_record(BoundRow, obj, where=where)
            if row.page_id in rows:
                raise DataError(f"{where}: duplicate page_id {row.page_id!r}")
            rows[row.page_id] = row
    except DataError:
        raise
    except InputError as e:  # a file that exists but is malformed: bad data, not a bad command line
        raise DataError(str(e)) from None
    if not rows:
        raise DataError(f"{path}: no bound rows")
    return rows
