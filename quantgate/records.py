"""Typed records passed between stages. Every file quantgate writes carries ``schema_version``;
unknown fields are refused (``extra="forbid"``) so a typo in a hand-edited file is caught, not
ignored."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from quantgate.errors import InputError

SCHEMA_VERSION = 1
DEFAULT_PROMPT = "Convert this page to markdown. Output only the markdown."


class Record(BaseModel):
    model_config = ConfigDict(extra="forbid")


def parse_record(cls: type[Record], obj: Any, *, where: str) -> Any:
    """Validate ``obj`` as ``cls``; on failure raise one InputError naming ``where`` and the field."""
    try:
        return cls.model_validate(obj)
    except ValidationError as e:
        err = e.errors()[0]
        field = ".".join(str(p) for p in err["loc"]) or "(record)"
        raise InputError(f"{where}: field {field!r}: {err['msg']}") from None


# --- page sets -------------------------------------------------------------------------------

Split = Literal["calibration", "heldout"]


class PageSource(Record):
    file: str
    page: int | None = None  # 1-based page number for PDFs


class PageRecord(Record):
    """One line of ``pages.jsonl``. Paths are relative to the page-set folder."""

    schema_version: int = SCHEMA_VERSION
    id: str = Field(min_length=1, max_length=200, pattern=r"^[^/\\\x00]+$")
    image: str
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    phash: str | None = None  # perceptual hash (hex), for near-duplicate leakage checks
    width: int = Field(gt=0)
    height: int = Field(gt=0)
    source: PageSource
    truth: str | None = None
    truth_sha256: str | None = None
    checks: list[dict[str, Any]] = Field(default_factory=list)  # olmOCR-bench format, kept as given
    split: Split
    tags: list[str] = Field(default_factory=list)


class SynthSpec(Record):
    """How ``pages synth`` made a page set: every argument that changes its pages. A study compares it
    with its own ``pages.synth`` before reusing the folder."""

    n: int
    seed: int
    calibration_fraction: float
    profile: str
    noise: float
    width: int | None = None
    page_size: list[int] | None = None  # [width, height]


class PageSetManifest(Record):
    """``pageset.json``: how the set was made, so a split can be reproduced and checked."""

    schema_version: int = SCHEMA_VERSION
    kind: Literal["quantgate.pageset"] = "quantgate.pageset"
    created_by: str
    seed: int
    calibration_fraction: float
    n_pages: int
    pages_sha256: str  # sha256 of pages.jsonl
    synth: SynthSpec | None = None  # set by `pages synth`; None for imported sets (and synth sets made before it)
    notes: list[str] = Field(default_factory=list)


# --- serving ---------------------------------------------------------------------------------


class RequestRecord(Record):
    """One line of a run's ``requests.jsonl``, appended the moment the request finishes."""

    schema_version: int = SCHEMA_VERSION
    page_id: str
    concurrency: int
    output: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    ttft_s: float | None = None
    latency_s: float | None = None
    start: float  # unix time
    end: float
    finish_reason: str | None = None
    error: str | None = None
    attempts: int = 1
    session: str | None = None  # one id per invocation, so a resumed level's speed excludes the gap


class LevelStats(Record):
    concurrency: int
    n_requests: int
    n_errors: int
    wall_s: float
    pages_per_s: float
    output_tokens_per_s: float
    per_request_tokens_per_s_p50: float | None
    ttft_s: dict[str, float | None]  # p50/p90/p99
    latency_s: dict[str, float | None]


Computes = Literal["weights-only", "weights+activations"]
Evidence = Literal["measured", "kernel reported by vLLM's log", "not measured"]


class FormatNumerics(Record):
    """What a backend computed for one quantized format (``quantgate.serve.numerics`` fills it)."""

    format: str
    computes: Computes | None = None  # None: not measured
    activations: str | None = None  # what the matmul's activation operand is
    evidence: Evidence = "not measured"
    measured_by: str | None = None  # the test that measures it
    kernel: str | None = None  # vLLM: the kernel its log named
    detail: str | None = None


class RunNumerics(Record):
    """``numerics`` of a run: per quantized format of the variant, weights-only or weights+activations
    on this backend, and the evidence for it."""

    backend: str
    device: str | None = None
    quantized: bool
    formats: dict[str, FormatNumerics] = Field(default_factory=dict)
    kv_cache: str | None = None  # a kv_cache_scheme in the checkpoint: its numerics are not measured


class RunManifest(Record):
    """``run.json``: what served, how, and the speed per concurrency level."""

    schema_version: int = SCHEMA_VERSION
    kind: Literal["quantgate.run"] = "quantgate.run"
    variant: str
    variant_fingerprint: str | None = None  # sha256 over the variant's weight files: a rebuilt variant is re-served
    backend: str
    server_command: list[str] | None = None
    server_version: str | None = None
    kernels: dict[str, str] = Field(default_factory=dict)
    # None: the backend serves a model quantgate cannot read (an endpoint by name), or run.json predates it
    numerics: RunNumerics | None = None
    notes: list[str] = Field(default_factory=list)
    pageset: str
    pageset_sha256: str
    split: str
    prompt: str
    max_tokens: int
    ignore_eos: bool = False  # fixed output length: speed runs on random weights
    waves: float | None = None  # None: every page at every level; else ceil(waves * c) pages (at least 3)
    levels: list[LevelStats] = Field(default_factory=list)
    slo_p90_latency_s: float
    max_concurrency_within_slo: int | None = None


# --- scoring ---------------------------------------------------------------------------------

VerdictName = Literal["within_noise", "regression", "inconclusive"]


class Verdict(Record):
    schema_version: int = SCHEMA_VERSION
    metric: str
    higher_is_better: bool
    verdict: VerdictName
    n: int
    baseline_mean: float
    candidate_mean: float
    delta: float  # mean(candidate - baseline), metric's own units
    ci_low: float
    ci_high: float
    confidence: float
    margin: float  # the margin actually used (max of requested and noise floor)
    requested_margin: float
    noise_floor: float | None
    seed: int
    n_resamples: int
    pages_needed: int | None = None
    missing_pages: list[str] = Field(default_factory=list)
