"""``quantgate.json``, beside a variant's weights (:class:`VariantManifest`): how it was built — the recipe as
written, resolved and compiled, the plan, the verification, the calibration pages, the fingerprint that
decides reuse — and the hashes the gate re-checks; and what ``quantize`` returns (:class:`QuantizeResult`)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from quantgate.schema.base import Record
from quantgate.schema.placement import QuantizeDevices


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

    schema_version: Literal[1] = 1
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
    # torch.cuda.max_memory_allocated per visible device (None on CPU); where --devices spread the model
    peak_gpu_mb_per_device: dict[str, float] | None = None
    devices: QuantizeDevices | None = None


# --- lmeval.json (written by lmeval) ---------------------------------------------------------------



class QuantizeResult(Record):
    """What ``quantize`` did: the variant's manifest, and whether the folder already held it (built from the
    same inputs, every file intact) and was reused instead of rebuilt."""

    manifest: VariantManifest
    reused: bool
