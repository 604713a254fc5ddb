"""What every record shares: unknown fields refused (``extra="forbid"``), so a typo in a hand-edited file is
caught, not ignored; one way to validate a record (:func:`parse_record`) and to read a manifest file
(:func:`read_record_file`), each failing with one error naming the file and the field."""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from quantgate.errors import InputError, one_line
from quantgate.schema.load import load_json

SCHEMA_VERSION = 1


class Record(BaseModel):
    model_config = ConfigDict(extra="forbid")


R = TypeVar("R", bound=BaseModel)


class FieldError(ValueError):
    """A check across fields, raised by a model validator, that names the field it is about (``loc``,
    relative to the model it validates), so the one line a user reads points at that field."""

    def __init__(self, loc: tuple[str | int, ...], message: str):
        super().__init__(message)
        self.loc = loc


def parse_record(cls: type[R], obj: Any, *, where: str) -> R:
    """Validate ``obj`` as ``cls``; on failure raise one InputError naming ``where`` and the field."""
    try:
        return cls.model_validate(obj)
    except ValidationError as e:
        err = e.errors()[0]
        loc, msg = tuple(err["loc"]), err["msg"]
        cause = (err.get("ctx") or {}).get("error")
        if isinstance(cause, FieldError):
            loc, msg = loc + cause.loc, str(cause)
        field = ".".join(str(p) for p in loc) or "(record)"
        raise InputError(f"{where}: field {field!r}: {one_line(msg)}") from None


def check_schema_version(obj: dict, supported: int, *, where: str, oldest: int | None = None) -> None:
    ver = obj.get("schema_version")
    if not isinstance(ver, int) or isinstance(ver, bool):
        raise InputError(f"{where}: field 'schema_version' is {ver!r}; expected the integer {supported}")
    if ver > supported:
        raise InputError(f"{where}: schema_version {ver} was written by a newer quantgate; this quantgate reads "
                         f"schema_version {supported}: upgrade quantgate, or rerun the stage that wrote it with this one")
    if ver < (supported if oldest is None else oldest):
        raise InputError(f"{where}: schema_version {ver} was written by an older quantgate; this quantgate reads "
                         f"schema_version {supported}: rerun the stage that wrote it")


def read_record_file(cls: type[R], path: Path, *, missing: str = "") -> R:
    """Read one JSON manifest as ``cls`` (which declares ``kind`` and ``schema_version`` defaults).

    Checked in the order a user can act on: the file exists and is JSON, it is the right kind of
    file, its schema version is one this quantgate reads, then every field (``extra="forbid"``)."""
    path = Path(path)
    if not path.exists():
        raise InputError(f"{path}: no such file" + (f"; {missing}" if missing else ""))
    obj = load_json(path)  # a regular file, under the loader's limits: else one DataError naming file and line
    kind = cls.model_fields["kind"].default
    if not isinstance(obj, dict) or obj.get("kind") != kind:
        got = obj.get("kind") if isinstance(obj, dict) else type(obj).__name__
        raise InputError(f"{path}: field 'kind' is {got!r}, not {kind!r}: this is not a {kind} file")
    supported = cls.model_fields["schema_version"].default
    # a model that upgrades older layouts as it validates says from which version (READS_SCHEMA_FROM)
    check_schema_version(obj, supported, where=str(path), oldest=getattr(cls, "READS_SCHEMA_FROM", supported))
    return parse_record(cls, obj, where=str(path))
