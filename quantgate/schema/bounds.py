"""One line of ``bounds.jsonl``, the file a study writes beside a variant's ``scores.jsonl``: per page, how much
worse the candidate can be than the baseline on each metric whatever the page's truth is (the truth-free bound,
``quantgate.scoring.bounds``), with the hashes of the two outputs it was computed from, so the gate can check the
file against the runs it binds. Read and written by ``quantgate.io.bounds``."""

from __future__ import annotations

import math
import re
from typing import Final, Literal

from pydantic import Field, field_validator

from quantgate.schema.base import Record
from quantgate.schema.metrics import METRICS

BOUNDS_SCHEMA_VERSION: Final = 1
_HEX64 = re.compile(r"^[0-9a-f]{64}$")


class BoundRow(Record):
    """A page's truth-free damage bound per metric, in the metric's units and orientation-free (damage: how much
    worse the candidate is, so ``0`` means it cannot be worse). ``None``: the metric has no truth-free bound
    (``checks``). Identical outputs (equal hashes) bound every metric with a bound at 0."""

    schema_version: Literal[1] = BOUNDS_SCHEMA_VERSION
    page_id: str = Field(min_length=1)
    document: str | None = None  # the document the page belongs to; None: the page is its own document
    baseline_sha256: str  # sha256 of the baseline's output text (UTF-8), as the run recorded it
    candidate_sha256: str
    bounds: dict[str, float | None]

    @field_validator("baseline_sha256", "candidate_sha256")
    @classmethod
    def _hex(cls, v: str) -> str:
        if not _HEX64.match(v):
            raise ValueError(f"{v!r} is not a sha256 hex digest")
        return v

    @field_validator("bounds")
    @classmethod
    def _in_range(cls, v: dict[str, float | None]) -> dict[str, float | None]:
        for name, b in v.items():
            if name not in METRICS:
                raise ValueError(f"unknown metric {name!r}; known: {', '.join(METRICS)}")
            if b is None:
                continue
            ceiling = METRICS[name].margin_ceiling
            if isinstance(b, bool) or not math.isfinite(b) or not 0 <= b <= ceiling:
                raise ValueError(f"{name} = {b!r} is not a damage bound: a number from 0 to {ceiling:g}")
        return v

    @property
    def identical(self) -> bool:
        """The two outputs are byte-identical (every bound is then 0)."""
        return self.baseline_sha256 == self.candidate_sha256
