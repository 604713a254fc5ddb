"""Typed records passed between stages. Every file quantgate writes carries ``schema_version``;
unknown fields are refused (``extra="forbid"``) so a typo in a hand-edited file is caught, not
ignored."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from quantgate.errors import InputError
from quantgate.schema.placement import VariantPlacement

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
    """Where a study's server for this variant ran and beside what (issue 22): ``one_at_a_time`` starts
    each variant's server when the previous one is done (the next may start during the previous lm-eval);
    ``all_at_once`` starts every server of the study together so their starts (compiles) overlap, then
    serves the variants' pages one after another, each with the others idle."""

    schema_version: int = 1
    servers: Literal["one_at_a_time", "all_at_once"]
    servers_in_study: int
    gpu: str | None = None  # CUDA_VISIBLE_DEVICES the study gave this server; None: inherited
    env: dict[str, str] = Field(default_factory=dict)  # the variant's server_env
    placement: VariantPlacement | None = None  # issue 31: its GPUs, wave and parallel settings (study/placement.py)


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


BudgetPart = Literal["pages", "quantize", "server_start", "accuracy", "speed", "lmeval", "score", "report", "other"]


class BudgetRow(Record):
    part: BudgetPart
    variant: str | None = None
    wall_s: float
    generation_s: float | None = None  # accuracy/speed: time with at least one recorded page request in flight
    requests: int | None = None  # accuracy/speed: page requests recorded in the stage
    reused: bool = False
    background: bool = False  # a server start begun beside another stage: only the part that ran alone


class TimeBudget(Record):
    """Where a run of ``quantgate study`` spent its wall time (``quantgate.study.timings.time_budget``). The
    foreground ``rows`` (``other``: what lies between stages) sum to ``wall_s``; server starts that ran beside
    another stage count only for the part that ran alone; the rest is ``background_s``, outside the sum."""

    schema_version: int = 1
    session: str
    wall_s: float  # from the start of this `quantgate study` run to when the budget was made (in the report stage)
    rows: list[BudgetRow]
    background_s: float
    engine_start_s: float  # foreground server starts
    generation_s: float  # page requests in flight (accuracy passes and speed levels)
    lmeval_s: float  # lm-eval stages: not split (their requests are not recorded one by one)
    overhead_s: float  # wall − engine starts − generation − lm-eval
    overhead_share: float  # overhead_s / wall_s


class RunManifest(Record):
    """``run.json``: what served, how, and the speed per concurrency level."""

    schema_version: int = SCHEMA_VERSION
    kind: Literal["quantgate.run"] = "quantgate.run"
    variant: str
    variant_fingerprint: str | None = None  # sha256 over the variant's weight files: a rebuilt variant is re-served
    backend: str
    server_command: list[str] | None = None
    server_args: list[str] | None = None  # the backend's extra server flags (a variant's server_args included)
    server_env: dict[str, str] | None = None  # a study variant's server_env
    server_version: str | None = None
    kernels: dict[str, str] = Field(default_factory=dict)
    engine: EngineSettings | None = None  # the settings that shaped this run's speed (issue 20)
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
    slo_p90_latency_s: float
    max_concurrency_within_slo: int | None = None
    sequential: SequentialStop | None = None  # a sequential accuracy pass: where it stopped


# --- scoring ---------------------------------------------------------------------------------

VerdictName = Literal["within_noise", "regression", "inconclusive", "not_equivalent"]
ReasonName = Literal["ci_inside_margin", "ci_beyond_margin", "ci_straddles_margin", "noise_exceeds_margin",
                     "too_few_pages", "identical_outputs", "outputs_differ"]


class Verdict(Record):
    """One paired comparison (docs/statistics.md). Interval, delta and noise are in the metric's own
    units and direction; the tests themselves run on differences oriented so that higher is better."""

    schema_version: int = 2
    metric: str
    higher_is_better: bool
    verdict: VerdictName
    reason: ReasonName
    test: Literal["non_inferiority", "equivalence", "exact"]
    message: str  # what the verdict means and, when it does not decide, what to do
    n: int
    baseline_mean: float
    candidate_mean: float
    delta: float  # mean(candidate - baseline), metric's own units
    ci_low: float
    ci_high: float
    confidence: float  # coverage of [ci_low, ci_high]; each end is a one-sided test at level alpha
    alpha: float
    interval: Literal["studentized_hall", "bca", "percentile", "degenerate"]
    margin: float  # the declared margin: never widened by data
    requested_margin: float  # kept for schema-1 readers; equals margin
    margin_source: Literal["registry", "given"]
    noise_floor: float | None  # one-sided (1 - alpha) upper bound on |baseline' - baseline| mean shift
    noise_delta: float | None = None  # mean(baseline' - baseline), metric's own units
    seed: int
    n_resamples: int
    min_pages: int
    power: float
    pages_needed: int | None = None
    pages_needed_method: str
    p_regression: float  # one-sided p of H0 "shift no worse than -margin", from the same interval
    p_noninferiority: float  # one-sided p of H0 "shift at least margin worse" (1 - p_regression)
    p_regression_holm: float | None = None  # set by quantgate.judge.compare.adjust_family
    pages_changed: int | None = None  # pages whose output text differs (score rows with output_sha256)
    pages_compared: int | None = None
    missing_pages: list[str] = Field(default_factory=list)
