"""Typed records of the measured speed model: one decode profile per variant and concurrency
(``StepProfile``, written from a torch-profiler trace of ``vllm serve``) and the cost table built from
several of them (``CostTable``: decode ms per step per format × layer-group GEMM × concurrency, and the
fixed cost of a step), which ``recommend`` / ``tune --speed-table`` read for ``--speedup``."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field

from quantgate.schema.base import Record, read_record_file
from quantgate.schema.variant import PlanRow

STEP_PROFILE_VERSION = 1
COST_TABLE_VERSION = 1
Attribution = Literal["launch_order", "weight_bytes"]
MIN_WAVES = 3  # a speed-up interval needs at least this many waves per arm (judge.speed refuses fewer)


class SpeedWaves(Record):
    """How a run sends its speed levels: ``repeats`` waves per level, each ``max(c, wave_requests)``
    requests (pages cycled) sent together by one client call, so waves never overlap and each is one figure."""

    levels: list[int] = Field(min_length=1)
    repeats: int = Field(default=MIN_WAVES, ge=MIN_WAVES)
    wave_requests: int = Field(default=3, ge=1)  # at least this many requests per wave (c=1: 3 one after another)
    ignore_eos: bool = False  # fixed output length, as ``serve --ignore-eos``

    def per_wave(self, concurrency: int) -> int:
        return max(concurrency, self.wave_requests)


class SpeedupInterval(Record):
    """summary.json: a variant's ratio to the baseline at one speed level, with its interval
    (``judge.speed.level_interval``); ``note`` says why a bound is missing."""

    concurrency: int
    quantity: str  # the per-wave figure compared (output tok/s)
    ignore_eos: bool
    per_wave: int
    n_variant: int  # complete waves per arm
    n_baseline: int
    level: float
    ratio: float | None = None  # mean(variant waves) / mean(baseline waves)
    low: float | None = None
    high: float | None = None
    df: int | None = None
    resamples: int | None = None
    seed: int | None = None
    method: str | None = None
    note: str | None = None


class KernelSlot(Record):
    """One GPU kernel (or memcpy/memset) at one position of a pure-decode step, over the profiled steps."""

    name: int  # index into StepProfile.names
    cls: str  # kernel class (quantgate.speed.trace.classify)
    us: float = Field(ge=0)  # mean GPU microseconds at this position
    us_min: float = Field(ge=0)
    us_max: float = Field(ge=0)


class StepProfile(Record):
    """A variant's decode step at one concurrency, from a torch-profiler trace: every GPU kernel of one
    pure-decode step in execution order (the steps whose kernel sequence is the most common one, averaged per
    position), what ran outside the step annotations (sampling), and the variant's decode modules with their
    formats (from its quantgate.json plan), which the cost table maps the step's GEMMs onto."""

    schema_version: int = STEP_PROFILE_VERSION
    kind: Literal["quantgate.step_profile"] = "quantgate.step_profile"
    variant: str
    concurrency: int = Field(ge=1)
    source: str  # the trace file
    decode_steps: int = Field(ge=1)  # pure-decode steps averaged
    dropped_steps: int = Field(0, ge=0)  # pure-decode steps with another kernel sequence (not averaged)
    other_steps: int = Field(0, ge=0)  # annotated steps with prefill in them (not used)
    names: list[str]
    step: list[KernelSlot]
    outside_ms_per_step: float = Field(ge=0)  # GPU time launched outside any step annotation, per step
    outside_kernels_per_step: float = Field(ge=0)
    plan: list[PlanRow]  # the variant's decode modules (decoder projections and lm_head) and their formats

    @property
    def gpu_ms_per_step(self) -> float:
        return sum(s.us for s in self.step) / 1e3 + self.outside_ms_per_step

    @property
    def kernels_per_step(self) -> float:
        return len(self.step) + self.outside_kernels_per_step


class Cell(Record):
    """One GEMM in one format at one concurrency."""

    ms_per_step: float  # the GEMM and the kernels attributed to it (see CostTable.attribution)
    gemm_ms_per_step: float  # of it, GEMM-class kernels
    kernels: list[str] = Field(default_factory=list)  # the GEMM kernel name(s) that ran it (launch_order only)
    sources: list[str]  # the profiles that measured it ("variant@c"); several: ms are their mean


class TableGemm(Record):
    """One GEMM of a decode step, as vLLM runs it: fused siblings (q/k/v, gate/up, qkv+z, b+a) are one."""

    id: str  # "<group>:<module leaves>", e.g. "layers.0.linear_attn:in_proj_qkv+in_proj_z"
    group: str  # the sensitivity group (layers.N.attn / linear_attn / mlp) or "lm_head"
    modules: list[str]
    params: int
    cells: dict[str, dict[int, Cell]] = Field(default_factory=dict)  # format -> concurrency -> cell


class FixedCost(Record):
    ms_per_step: float  # the mean over the profiles at this concurrency
    by_source: dict[str, float]


class TableSource(Record):
    variant: str
    concurrency: int
    source: str  # the trace (launch_order) or profile.json (weight_bytes) it came from
    formats: list[str]  # the formats of its decode GEMMs
    gpu_ms_per_step: float
    kernels_per_step: float | None


class CostTable(Record):
    schema_version: int = COST_TABLE_VERSION
    kind: Literal["quantgate.speed_table"] = "quantgate.speed_table"
    # launch_order: each step's k-th GEMM launch is the plan's k-th decode GEMM, and the kernels between a GEMM
    # and the one before it (norms, activations, activation quantization) are the later GEMM's; weight_bytes:
    # from a profile.json that kept GPU time per kernel name only — a format's GEMM time spread over its GEMMs
    # by parameters, its non-GEMM change against BF16 likewise (a model within each measured total)
    attribution: Attribution
    concurrency: list[int]
    gemms: list[TableGemm]  # in decode order
    fixed: dict[int, FixedCost]  # concurrency -> GPU time per step outside every GEMM's share
    sources: list[TableSource]
    notes: list[str] = Field(default_factory=list)
    created_utc: str


def load_cost_table(path: str | Path) -> CostTable:
    return read_record_file(CostTable, Path(path), missing="write one with quantgate.speed.costtable.build_cost_table "
                            "from `quantgate speed-profile` profiles (docs/gpu.md)")


def load_step_profile(path: str | Path) -> StepProfile:
    return read_record_file(StepProfile, Path(path), missing="written by quantgate.speed.profile.speed_profile")


COPY_BANDWIDTH_VERSION = 1


class CopyBandwidth(Record):
    """The GPU's measured device-to-device copy bandwidth (``speed-profile --copy-gbs``, measured beside it, as the
    GPU sessions did: lab/2026-12-03-h200-session-scripts/README.md), which the weight-read bound of a step divides by."""

    schema_version: int = COPY_BANDWIDTH_VERSION
    kind: Literal["quantgate.copy_bandwidth"] = "quantgate.copy_bandwidth"
    gbs: float = Field(gt=0)
    source: str  # how it was measured


def load_copy_bandwidth(path: str | Path) -> CopyBandwidth:
    return read_record_file(CopyBandwidth, Path(path), missing="written by `quantgate speed-profile --copy-gbs`")
