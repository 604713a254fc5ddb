"""lm-eval beside the pages: ``lmeval.json`` (:class:`LmEvalRun`: lm-eval's scores with its stderr, where the
per-sample logs are) and one paired verdict of a candidate on one task × metric (:class:`LmEvalResult`)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_serializer

from quantgate.schema.base import Record
from quantgate.schema.verdict import Verdict


class MetricResult(Record):
    value: float
    stderr: float | None = None
    higher_is_better: bool
    n: int


class LmEvalRun(Record):
    """``lmeval.json``: lm-eval's scores with its stderr per task and metric, and where the samples are."""

    schema_version: Literal[1] = 1
    kind: Literal["quantgate.lmeval"] = "quantgate.lmeval"
    variant: str
    variant_fingerprint: str | None = None
    backend: str
    tasks: list[str]
    include_path: str | None = None
    limit: int | None = None
    lm_eval_version: str
    results: dict[str, dict[str, MetricResult]] = Field(default_factory=dict)  # task -> "metric,filter" -> result
    samples: dict[str, str] = Field(default_factory=dict)  # task -> samples file name




class LmEvalSample(Record):
    """One line of ``samples-<task>.jsonl``: one document of an lm-eval task, a value per ``metric,filter``
    (lm-eval logs one sample per document and filter; quantgate keeps one row per document)."""

    doc_id: str
    doc_hash: str | None = None  # lm-eval's hash of the document: documents are paired only when it agrees
    target: Any = None
    responses: dict[str, Any] = Field(default_factory=dict)  # filter -> the filtered response
    metrics: dict[str, float | None] = Field(default_factory=dict)  # "metric,filter" -> value


class LmEvalResult(Verdict):
    """One lm-eval task × metric of a candidate: lm-eval's scores and stderr, the recovery ratio, and
    the paired verdict over the logged samples — every ``Verdict`` field, as ``lmeval.compare`` makes it."""

    task: str
    baseline: float  # lm-eval's own score (the verdict's baseline_mean is the mean over the paired samples)
    baseline_stderr: float | None
    candidate: float
    candidate_stderr: float | None
    recovery: float | None  # oriented so 1.0 is parity

    @model_serializer(mode="wrap")
    def _order(self, handler):
        d = handler(self)
        return {"task": d.pop("task"), **d}
