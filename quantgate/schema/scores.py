"""One line of ``scores.jsonl``: a page's scores (:class:`ScoreRow`). Read and written by
``quantgate.io.scores``; made by ``quantgate.scoring``; judged by ``quantgate.judge``."""

from __future__ import annotations

import math
import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from quantgate.schema.base import FieldError, Record

RESERVED = ("page_id", "empty", "error", "output_sha256", "document", "truncated", "repeats", "units")
_HEX64 = re.compile(r"^[0-9a-f]{64}$")
# family (``MetricSpec.family``) → whole-set headline (as ``quantgate score`` names it) → (the page's sum over its
# units, how many units): what a benchmark's headline averages over units other than pages needs from each page
# (OmniDocBench's table TEDS: the page's TEDS sum and its tables; a ParseBench rule type's pass rate: the page's
# mean over its rules of the type, one unit). The headline over a set is Σ sum / Σ units (``pooled``).
Units = dict[str, dict[str, tuple[float, float]]]


def _units_problem(units: object) -> str | None:
    """Why ``units`` is not a :data:`Units` mapping, or None."""
    if not isinstance(units, dict):
        return f"units = {units!r} is not a mapping of family -> headline -> [sum, units]"
    for family, heads in units.items():
        if not isinstance(family, str) or not family or not isinstance(heads, dict):
            return f"units[{family!r}] is not a mapping of headline -> [sum, units]"
        for name, pair in heads.items():
            ok = isinstance(name, str) and name and isinstance(pair, (list, tuple)) and len(pair) == 2 and all(
                isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) for x in pair)
            if not ok or pair[1] <= 0 or pair[0] < 0:
                return (f"units[{family!r}][{name!r}] = {pair!r} is not [sum, units] (two finite numbers, the sum "
                        ">= 0, the units > 0)")
    return None


class ScoreRow(BaseModel):
    """One page's scores. The metric keys are an open set (the scoring registry names them in a score file;
    lm-eval's ``metric,filter`` names in its paired samples), so this is the one record that allows extra keys;
    each must be a finite number or null (the metric does not apply). Rows carry no ``schema_version``: a line
    is a plain table row, read by pandas too."""

    model_config = ConfigDict(extra="allow")

    page_id: str = Field(min_length=1)
    empty: bool = False
    error: Literal["missing", "request failed"] | None = None
    # sha256 of the output text (None: no output), what `compare --exact` compares; absent in older files
    output_sha256: str | None = None
    document: str | None = None  # the document (PDF) the page belongs to; None: the page is its own document
    # the output was cut at max_tokens (finish_reason "length", often a repetition loop): the model's own failure,
    # scored as given and flagged; absent (false) in files scored before quantgate recorded it
    truncated: bool = False
    # outputs of the page scored, each metric their mean (several runs of one system, olmOCR-bench's
    # <pdf>_pg<N>_repeat<K>.md); absent (1) in files scored before quantgate kept repeats
    repeats: int = Field(1, ge=1)
    # the per-unit numbers of the whole-set headlines that are not means over pages (:data:`Units`); absent (empty)
    # in files scored before quantgate kept them, which the report says it can only approximate
    units: Units = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _fields(cls, obj: Any) -> Any:
        # messages that read as the file's own line: "s.jsonl:2: ned = '0.1' is not a number"
        if not isinstance(obj, dict):
            return obj
        pid = obj.get("page_id")
        if not isinstance(pid, str) or not pid:
            raise FieldError((), "missing or non-string 'page_id'")
        doc = obj.get("document")
        if doc is not None and not (isinstance(doc, str) and doc):
            raise FieldError((), f"document = {doc!r} is not a non-empty string (the document the page belongs to)")
        h = obj.get("output_sha256")
        if h is not None and not (isinstance(h, str) and _HEX64.match(h)):
            raise FieldError((), f"output_sha256 = {h!r} is not a sha256 hex digest")
        rep = obj.get("repeats", 1)
        if isinstance(rep, bool) or not isinstance(rep, int) or rep < 1:
            raise FieldError((), f"repeats = {rep!r} is not a whole number >= 1 (the outputs scored for the page)")
        if not isinstance(obj.get("truncated", False), bool):
            raise FieldError((), f"truncated = {obj['truncated']!r} is not true or false")
        if (why := _units_problem(obj.get("units", {}))) is not None:
            raise FieldError((), why)
        for k, v in obj.items():
            if k in RESERVED or v is None:
                continue
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                raise FieldError((), f"{k} = {v!r} is not a number")
            if not math.isfinite(v):
                raise FieldError((), f"{k} is {v} (not finite)")
        return obj

    @property
    def metrics(self) -> dict[str, float | None]:
        return dict(self.model_extra or {})

    def value(self, metric: str) -> float | None:
        """The page's value of ``metric``; None where it does not apply or the row lacks it."""
        return (self.model_extra or {}).get(metric)

    @property
    def has_output_hash(self) -> bool:
        """Whether the row records its output's hash at all (files scored before quantgate did have none)."""
        return "output_sha256" in self.model_fields_set

    def line(self) -> dict[str, Any]:
        """The row as its line holds it: ``document``, ``truncated``, ``error`` and ``units`` only when set, the
        metrics last (a row without units is the line older versions wrote)."""
        head: dict[str, Any] = {"page_id": self.page_id, "empty": self.empty}
        if self.has_output_hash:
            head["output_sha256"] = self.output_sha256
        if self.error is not None:
            head["error"] = self.error
        if self.document is not None:
            head["document"] = self.document
        if self.truncated:
            head["truncated"] = True
        if self.repeats > 1:
            head["repeats"] = self.repeats
        if self.units:
            head["units"] = {f: {k: list(v) for k, v in heads.items()} for f, heads in self.units.items()}
        return head | self.metrics


class MetricSummary(Record):
    """A metric's mean over the pages it applies to, with a 95% bootstrap interval (``quantgate score``)."""

    metric: str
    direction: Literal["higher", "lower"]
    n: int
    mean: float | None
    ci95: tuple[float, float] | None
