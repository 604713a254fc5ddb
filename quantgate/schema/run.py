"""A run's files: ``requests.jsonl`` (one :class:`RequestRecord` per request, appended as it finishes) and
``run.json`` (:class:`RunManifest`: what served, how, the speed per level), with what a backend reads from its
server's log (:class:`LogFacts`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import Field, model_validator

from quantgate.schema.base import Record
from quantgate.schema.placement import VariantPlacement
from quantgate.schema.speed import SpeedWaves

DEFAULT_PROMPT = "Convert this page to markdown. Output only the markdown."
DEFAULT_MAX_TOKENS = 1024


class ServeOptions(Record):
    """How ``serve`` sends a variant its pages (checked when it runs, each value with the flag it comes from)."""

    split: str = "heldout"
    concurrency: list[int] = Field(default_factory=lambda: [1])
    max_tokens: int = DEFAULT_MAX_TOKENS
    prompt: str | None = None  # None: DEFAULT_PROMPT
    slo_s: float = 10.0
    timeout_s: float = 600.0
    limit: int | None = None  # the first pages of the split only
    overwrite: bool = False  # discard another run in the folder
    ignore_eos: bool = False  # fixed output length: speed runs on random weights
    waves: float | None = None  # None: every page at every level; else ceil(waves * c) pages (at least 3)
    record_root: Path | None = None  # run.json's paths relative to this folder when they lie inside it
    speed: SpeedWaves | None = None  # speed levels sent in repeated waves, into speed.jsonl


ErrorKind = Literal["infrastructure", "page"]


class RequestRecord(Record):
    """One line of a run's ``requests.jsonl``, appended the moment the request finishes. Schema 2 adds
    ``error_kind`` and ``truncated``; schema-1 lines read as before (``error_kind`` None: not classified).
    Schema 3 adds ``prev``, the digest of the record before it (``io.chain``); older lines read as before."""

    schema_version: Literal[1, 2, 3] = 3
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
    # infrastructure: the server's side failed (HTTP error, timeout, died, malformed or oversized answer), so the
    # page says nothing about the model; page: the page itself could not be sent (its image unreadable)
    error_kind: ErrorKind | None = None
    truncated: bool = False  # finish_reason "length": the model's output, cut at max_tokens, kept and scored
    attempts: int = 1
    session: str | None = None  # one id per invocation, so a resumed level's speed excludes the gap
    wave: int | None = None  # a speed level's repeat (speed.jsonl); None: a page run
    prev: str | None = None  # schema 3: io.chain's digest of the record before (the run's anchor for the first)

    @model_validator(mode="after")
    def _schema_1_truncation(self) -> RequestRecord:
        if self.schema_version == 1:  # written before ``truncated``: it is what finish_reason said
            self.truncated = self.finish_reason == "length"
        return self


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


class SpeedLevel(Record):
    """One speed level sent in repeated waves: each complete wave's own figures, from which
    ``judge.speed.speedup_interval`` takes a ratio to the baseline with its interval."""

    concurrency: int
    per_wave: int  # requests per wave, sent together by one client call
    ignore_eos: bool  # fixed output length (max_tokens): labelled in the speed table
    waves: list[LevelStats]  # complete waves without errors, in wave order
    incomplete_waves: int = 0  # waves with an error or cut by an interruption (re-sent on resume)


CompileStart = Literal["cold", "warm", "uncached", "none"]


class EngineSettings(Record):
    """The server settings that shape speed, as the server's own log states them (vLLM) or as quantgate
    started it (transformers serve). ``None``: not stated, not applicable, or a default the log does not
    print. Filled by the backend (``Backend.engine_settings``) from the current start's log text."""

    compilation: str | None = None  # vLLM: CompilationMode (VLLM_COMPILE, NONE); transformers: torch.compile / none
    cudagraph_mode: str | None = None  # as configured (e.g. FULL_AND_PIECEWISE)
    cudagraph_mode_effective: str | None = None  # only when vLLM logged a downgrade for the attention backend
    cudagraph_capture_sizes: list[int] | None = None
    enforce_eager: bool | None = None
    prefix_caching: bool | None = None
    max_num_batched_tokens: int | None = None
    max_num_seqs: int | None = None  # only when passed: vLLM does not print its default
    kv_cache_dtype: str | None = None
    speculative: str | None = None  # vLLM's SpeculativeConfig(...) text; None: off or not stated
    async_scheduling: bool | None = None
    attention_backend: str | None = None
    dtype: str | None = None
    device: str | None = None
    continuous_batching: bool | None = None
    env: dict[str, str] = Field(default_factory=dict)  # variables that change numerics, speed or caching, as set
    compile_cache_dir: str | None = None  # where vLLM said it keeps this start's compiled graphs
    compile_start: CompileStart | None = None  # cold: compiled and stored; warm: loaded from the cache;
    # uncached: compiled with the cache disabled; none: nothing compiled (eager / mode 0)
    compile_s: float | None = None  # "torch.compile took … s in total"
    init_engine_s: float | None = None  # "init engine (profile, create kv cache, warmup model) took … s"
    graph_capture_s: float | None = None
    # vLLM: seconds from the end of its profiling forward pass ("Initial profiling/warmup run took") to its KV-cache
    # line, from the log's timestamps (1 s resolution). On a fresh machine the first sampler call JIT-builds
    # FlashInfer's sampling module there (vLLM 0.26 / flashinfer 0.6.14 source; lab/2026-12-03-h200-seven-variant-study/plan.md)
    profile_wait_s: float | None = None
    # vLLM: seconds from its KV-cache line to the end of its warm-up ("Kernel JIT monitor activated", else the "init
    # engine … took" line): CUDA graph capture, and where a start samples only after the KV cache is made (vLLM
    # 0.26's eager starts) FlashInfer's first build — 93-97 s for the four eager starts that built it together on
    # 2026-12-03, 1 s with it built (lab/2026-12-03-h200-seven-variant-study/flashinfer-wait)
    warmup_wait_s: float | None = None
    start_s: float | None = None  # wall seconds from launch to healthy, measured by quantgate


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


class ServerLayout(Record):
    """Where a study's server for this variant ran and beside what: ``one_at_a_time`` starts
    each variant's server when the previous one is done (the next may start during the previous lm-eval);
    ``all_at_once`` starts every server of the study together so their starts (compiles) overlap, then
    serves the variants' pages one after another, each with the others idle."""

    schema_version: Literal[1] = 1
    servers: Literal["one_at_a_time", "all_at_once"]
    servers_in_study: int
    gpu: str | None = None  # CUDA_VISIBLE_DEVICES the study gave this server; None: inherited
    env: dict[str, str] = Field(default_factory=dict)  # the variant's server_env
    placement: VariantPlacement | None = None  # its GPUs, wave and parallel settings (study/placement.py)


class SequentialStop(Record):
    """run.json's record of a sequential accuracy pass (``sequential:`` in a study): where it stopped and
    each metric's decision there. The whole decision (boundaries, intervals, p-values) is in summary.json."""

    concurrency: int  # the level of the accuracy pass
    look: int  # the last look made, 1-based
    n_looks: int  # looks planned
    looks: list[int]  # pages at each planned look
    pages_used: int
    n_max: int  # the page budget
    stop: bool
    stop_reason: Literal["all_decisive", "page_budget"] | None
    decisions: dict[str, str]  # metric -> verdict at its deciding look (or at this look, if undecided)
    decided_at_look: dict[str, int | None]


# scheme -> kernel -> vLLM log lines naming that choice (``quantgate.serve.kernels``); None: not counted (a
# schema-1 run.json kept only the last kernel logged per scheme)
KernelCounts = dict[str, dict[str, int | None]]


class KernelTime(Record):
    """One linear kernel's part of a profiled decode step (``quantgate.serve.kernels.gemm_time``)."""

    ms_per_step: float
    launches_per_step: float | None = None  # None: not counted (the unattributed remainder)
    share_of_gemm: float


class RunManifest(Record):
    """``run.json``: what served, how, and the speed per concurrency level."""

    # 2: ``kernels`` counts every choice vLLM logged per scheme (1 kept the last line per scheme only)
    schema_version: Literal[2] = 2
    READS_SCHEMA_FROM: ClassVar[int] = 1
    kind: Literal["quantgate.run"] = "quantgate.run"
    variant: str
    variant_fingerprint: str | None = None  # sha256 over the variant's weight files: a rebuilt variant is re-served
    backend: str
    server_command: list[str] | None = None
    server_args: list[str] | None = None  # the backend's extra server flags (a variant's server_args included)
    server_env: dict[str, str] | None = None  # a study variant's server_env
    server_version: str | None = None
    kernels: KernelCounts = Field(default_factory=dict)
    engine: EngineSettings | None = None  # the settings that shaped this run's speed
    layout: ServerLayout | None = None  # set by a study: how its servers were placed when this run's was started
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
    speed: list[SpeedLevel] = Field(default_factory=list)  # repeated speed levels (speed.jsonl)
    slo_p90_latency_s: float
    max_concurrency_within_slo: int | None = None
    sequential: SequentialStop | None = None  # a sequential accuracy pass: where it stopped
    # requests the server preempted while each concurrency level's requests (page runs and speed waves)
    # were in flight, from its own counter (vLLM: vllm:num_preemptions_total on /metrics); None: it publishes none
    preemptions: dict[int, int] | None = None

    @model_validator(mode="before")
    @classmethod
    def _from_schema_1(cls, obj: Any) -> Any:
        if isinstance(obj, dict) and obj.get("schema_version") == 1:
            return {**upgrade_kernels(obj), "schema_version": 2}
        return obj


def upgrade_kernels(obj: dict) -> dict:
    """A record written before kernel counts (``kernels: {scheme: kernel}``) as ``{scheme: {kernel: None}}``:
    the one kernel it kept, its count unknown."""
    kernels = obj.get("kernels")
    if isinstance(kernels, dict) and all(isinstance(v, str) for v in kernels.values()):
        return {**obj, "kernels": {s: {k: None} for s, k in kernels.items()}}
    return obj


class LogFacts(Record):
    """What a backend read from its server's log for ``run.json`` (``Backend.read_log``)."""

    server_version: str | None = None
    kernels: KernelCounts | None = None  # None: the log names none (the run keeps what it had)
    notes: list[str] = Field(default_factory=list)
