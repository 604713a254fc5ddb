"""Typed records of the files between stages that ``records.py`` does not hold: the variant manifest
(``quantgate.json``), the lm-eval run (``lmeval.json``) and one ``scores.jsonl`` row; and the one
way every stage and the reports read a manifest back (:func:`read_record_file`), which refuses a
foreign file, a newer schema and any unknown or malformed field with one error naming the file and
the field. The report itself (``summary.json``) is typed in ``quantgate.schema.summary``."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, model_validator

from quantgate.errors import InputError
from quantgate.schema.placement import QuantizeDevices
from quantgate.schema.run import SCHEMA_VERSION, Record, parse_record

R = TypeVar("R", bound=Record)


def read_record_file(cls: type[R], path: Path, *, missing: str = "") -> R:
    """Read one JSON manifest as ``cls`` (which declares ``kind`` and ``schema_version`` defaults).

    Checked in the order a user can act on: the file exists and is JSON, it is the right kind of
    file, its schema version is one this quantgate reads, then every field (``extra="forbid"``)."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"{path}: no such file" + (f"; {missing}" if missing else ""))
    try:
        obj = json.loads(path.read_text("utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise InputError(f"{path}: not valid JSON ({e})") from None
    kind = cls.model_fields["kind"].default
    if not isinstance(obj, dict) or obj.get("kind") != kind:
        got = obj.get("kind") if isinstance(obj, dict) else type(obj).__name__
        raise InputError(f"{path}: field 'kind' is {got!r}, not {kind!r}: this is not a {kind} file")
    check_schema_version(obj, cls.model_fields["schema_version"].default, where=str(path))
    return parse_record(cls, obj, where=str(path))


def check_schema_version(obj: dict, supported: int, *, where: str) -> None:
    ver = obj.get("schema_version")
    if not isinstance(ver, int) or isinstance(ver, bool):
        raise InputError(f"{where}: field 'schema_version' is {ver!r}; expected the integer {supported}")
    if ver > supported:
        raise InputError(f"{where}: schema_version {ver} was written by a newer quantgate; this quantgate reads "
                         f"schema_version {supported}: upgrade quantgate, or rerun the stage that wrote it with this one")
    if ver < supported:
        raise InputError(f"{where}: schema_version {ver} was written by an older quantgate; this quantgate reads "
                         f"schema_version {supported}: rerun the stage that wrote it")


# --- quantgate.json: the variant manifest (written by quantize) ---------------------------------


class RecipeInfo(Record):
    name: str
    source: str  # preset path or the user's file
    text: str  # the recipe exactly as written
    resolved: dict[str, Any] | None  # the parsed quantgate recipe (None for a raw llmcompressor recipe)
    llmcompressor: dict[str, Any] | None  # the recipe handed to llmcompressor (None: nothing quantized)


class PlanRow(Record):
    module: str
    kind: str
    layer: int | None
    shape: list[int]  # [out_features, in_features]
    params: int
    format: str


class FormatTotal(Record):
    modules: int
    params: int
    bytes: int


class PlanTotals(Record):
    per_format: dict[str, FormatTotal]
    bf16_bytes: int
    estimated_bytes: int
    compression: float | None


class PlanInfo(Record):
    modules: list[PlanRow]
    totals: PlanTotals
    warnings: list[str]


class Verification(Record):
    modules_checked: int
    formats: dict[str, int] | None = None  # format -> module count (absent for raw llmcompressor recipes)
    vision_bf16: bool


class CalibrationInfo(Record):
    pageset: str | None
    page_ids: list[str]
    samples: int
    max_seq_len: int
    pipeline: str | None
    text_only: bool | None
    prompt: str | None


class VariantInputs(Record):
    """The fingerprint that decides reuse: a variant is rebuilt when any of these changed
    (``quantize.run.input_fingerprint`` says what is in it and why). The calibration fields are None
    when no calibration data was used; fields added later default so older manifests still read."""

    model_weights: dict[str, str]  # file name -> sha256 of the source weights
    model_files: dict[str, str] = Field(default_factory=dict)  # config, tokenizer, processor, template -> sha256
    recipe_text: str
    calibration_pages_sha256: str | None  # the calibration pages used: ids, image and truth bytes
    samples: int | None  # calibration pages used
    max_seq_len: int | None
    prompt: str | None
    pipeline: str | None = None
    text_only: bool | None = None
    packages: dict[str, str | None] = Field(default_factory=dict)  # llmcompressor, compressed-tensors


class FileInfo(Record):
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    bytes: int = Field(ge=0)


class SizeInfo(Record):
    weights_bytes: int
    source_weights_bytes: int
    compression: float | None


class VariantManifest(Record):
    """``quantgate.json`` beside a variant's weights: how it was built, and the hashes the gate re-checks."""

    schema_version: int = SCHEMA_VERSION
    kind: Literal["quantgate.variant"] = "quantgate.variant"
    name: str
    source_model: str
    recipe: RecipeInfo
    plan: PlanInfo
    verification: Verification
    calibration: CalibrationInfo
    inputs: VariantInputs
    packages: dict[str, str | None]
    files: dict[str, FileInfo]  # every file of the folder but this manifest
    size: SizeInfo
    wall_s: float
    peak_rss_mb: float
    peak_gpu_mb: float | None
    # issue 31: torch.cuda.max_memory_allocated per visible device (None on CPU); where --devices spread the model
    peak_gpu_mb_per_device: dict[str, float] | None = None
    devices: QuantizeDevices | None = None


# --- lmeval.json (written by lmeval) ---------------------------------------------------------------


class MetricResult(Record):
    value: float
    stderr: float | None = None
    higher_is_better: bool
    n: int


class LmEvalRun(Record):
    """``lmeval.json``: lm-eval's scores with its stderr per task and metric, and where the samples are."""

    schema_version: int = SCHEMA_VERSION
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


# --- scores.jsonl (written by score) --------------------------------------------------------------


class ScoreRow(BaseModel):
    """One line of ``scores.jsonl``. The metric keys are an open set (the scoring registry names
    them), so this is the one record that allows extra keys; each must be a finite number or null
    (the metric does not apply). ``quantgate.score.read_scores`` also checks the names against the
    registry. Rows carry no ``schema_version``: a line is a plain table row, read by pandas too."""

    model_config = ConfigDict(extra="allow")

    page_id: str = Field(min_length=1)
    empty: bool
    error: Literal["missing", "request failed"] | None = None
    # sha256 of the output text (None: no output), what `compare --exact` compares; absent in older files
    output_sha256: str | None = Field(None, pattern=r"^[0-9a-f]{64}$")

    @model_validator(mode="after")
    def _metric_values(self):
        for k, v in (self.model_extra or {}).items():
            if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v)):
                raise ValueError(f"metric {k!r} = {v!r} is not a finite number or null")
        return self
