"""A study's YAML: its schema (unknown keys refused with their path) and ``load_study``. The
``backend:`` block is derived from the registered backends' own option models
(``quantgate.serve.backends.derive``), so a new backend needs no change here."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, model_validator

from quantgate.errors import InputError
from quantgate.judge.stats import MIN_PAGES, MIN_RESAMPLES
from quantgate.schema.placement import ClusterSpec
from quantgate.schema.run import DEFAULT_PROMPT, parse_record
from quantgate.serve.backends.derive import default_study_backend, study_backend_type


class _S(BaseModel):
    # no float field takes nan or inf: checked when the YAML is loaded, before any page, weight or server
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


def _not_bool(v):
    # YAML reads yes/no/on/off/true/false as booleans, which pydantic would take as 1 and 0
    if isinstance(v, bool):
        raise ValueError("expected a number, not true/false")
    return v


_Num = BeforeValidator(_not_bool)
PositiveInt = Annotated[int, _Num, Field(ge=1)]
NonNegativeInt = Annotated[int, _Num, Field(ge=0)]
PositiveFloat = Annotated[float, _Num, Field(gt=0)]
# each request in flight holds a connection; a wait longer than a day is a hang (as the CLI flags)
ConcurrencyLevel = Annotated[int, _Num, Field(ge=1, le=65_535)]


class SynthPages(_S):
    n: Annotated[int, _Num, Field(ge=2)]
    seed: NonNegativeInt = 0
    profile: Literal["doc", "simple", "reader"] = "doc"
    calibration_fraction: Annotated[float, _Num, Field(ge=0, lt=1)] = 0.2
    noise: Annotated[float, _Num, Field(ge=0, le=1)] = 0.03


class PagesSpec(_S):
    path: str | None = None
    synth: SynthPages | None = None

    @model_validator(mode="after")
    def _one(self):
        if (self.path is None) == (self.synth is None):
            raise ValueError("give exactly one of 'path' (an existing page set) or 'synth'")
        return self


EnvName = Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")]


class VariantSpec(_S):
    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
    recipe: str
    server_args: list[str] = Field(default_factory=list)  # e.g. ["--kv-cache-dtype", "fp8"]
    server_env: dict[EnvName, str] = Field(default_factory=dict)  # e.g. {VLLM_BATCH_INVARIANT: "1"}
    # issue 31: this variant's own values of the study backend's options, e.g. {tensor_parallel_size: 2}
    # (checked by that backend's options model: quantgate.study.placement.variant_backend)
    backend: dict[str, Any] = Field(default_factory=dict)


BackendSpec = study_backend_type()  # {name: transformers | vllm | openai | external | …, that backend's options}


class LmEvalSpec(_S):
    tasks: list[str] = Field(default_factory=list)  # lm-eval task names
    include_path: str | None = None  # folder of local task YAML (offline: dataset_path: json + data_files)
    page_task: bool = True  # add quantgate_page_heading, built from the study's page set
    limit: PositiveInt | None = None  # documents per task
    concurrent: PositiveInt = 1
    margin: PositiveFloat = 0.02  # equivalence margin in each metric's units
    margins: dict[str, PositiveFloat] = Field(default_factory=dict)  # per "metric" or "task/metric"

    @model_validator(mode="after")
    def _some(self):
        if not self.tasks and not self.page_task:
            raise ValueError("lm_eval needs tasks, or page_task: true")
        return self


class SequentialSpec(_S):
    """``sequential:``: serve the accuracy pass in a seeded random order, in batches, and stop a candidate
    once every verdict is decisive (``quantgate.judge.sequential``; docs/statistics.md, "Sequential
    verdicts in a study"). Give ``looks`` (equally spaced) or ``step`` (pages between looks), not both."""

    looks: PositiveInt | None = None  # equally spaced looks over the page budget (4: every 25%); default 4
    step: PositiveInt | None = None  # or: a look every `step` pages
    first_look: PositiveInt | None = None  # no look before this many pages (default 60; never below min_pages)
    spending: Literal["obrien_fleming", "pocock"] = "obrien_fleming"
    page_budget: PositiveInt | None = None  # pages at most per candidate (default: every judged page)
    order_seed: NonNegativeInt | None = None  # the serving order's seed (default: the study's seed)

    @model_validator(mode="after")
    def _one(self):
        if self.looks is not None and self.step is not None:
            raise ValueError("give 'looks' (equally spaced looks) or 'step' (pages between looks), not both")
        if self.looks is None and self.step is None:
            self.looks = 4
        return self


class Study(_S):
    schema_version: Annotated[Literal[1], _Num] = 1
    name: str
    model: str
    prompt: str = DEFAULT_PROMPT
    pages: PagesSpec
    split: str = "heldout"
    limit: PositiveInt | None = None
    variants: list[VariantSpec] = Field(min_length=2)
    baseline: str = "bf16"
    calibration_samples: PositiveInt = 32
    backend: BackendSpec = Field(default_factory=default_study_backend)
    concurrency: list[ConcurrencyLevel] = Field(default_factory=lambda: [1, 8], min_length=1)
    noise_concurrency: ConcurrencyLevel | None = None  # the baseline's second level, used as its noise run
    max_tokens: PositiveInt = 1024
    timeout_s: Annotated[float, _Num, Field(gt=0, le=86_400)] = 600.0
    slo_s: PositiveFloat = 10.0
    metrics: list[str] = Field(default_factory=lambda: ["ned", "cer", "bow_f1"])
    # checked further by check_statistics (a margin below its metric's range, for a metric the study computes;
    # resamples >= MIN_RESAMPLES) when the file is loaded
    margins: dict[str, PositiveFloat] = Field(default_factory=dict)  # per metric; unset: the registry's margin
    seed: NonNegativeInt = 0
    resamples: PositiveInt = 10_000
    # below the calibrated minimum (MIN_PAGES) only for smoke tests: the report says the verdicts are not calibrated
    min_pages: Annotated[int, _Num, Field(ge=2)] = MIN_PAGES
    test: Literal["non_inferiority", "equivalence", "exact"] = "non_inferiority"
    output: str | None = None
    lm_eval: LmEvalSpec | None = None
    sequential: SequentialSpec | None = None  # off by default: every page is served (the fixed design)
    # all_at_once: each variant's server starts as soon as its weights are written, so the starts (compiles)
    # overlap each other and the later quantizations; then the variants' pages are served one after another
    # with the others idle (quantgate.study.run._serve_all)
    servers: Literal["one_at_a_time", "all_at_once"] = "one_at_a_time"
    gpus: list[NonNegativeInt] = Field(default_factory=list)  # the GPU pool servers are placed on (study/placement.py)
    cluster: ClusterSpec | None = None  # issue 31: quantize and servers as Ray tasks and actors (study/cluster.py)

    @model_validator(mode="after")
    def _check(self):
        names = [v.name for v in self.variants]
        if len(set(names)) != len(names):
            raise ValueError(f"variant names must be unique: {names}")
        if self.baseline not in names:
            raise ValueError(f"baseline {self.baseline!r} is not one of the variants {names}")
        if self.sequential is not None and self.test == "exact":
            raise ValueError("sequential: the exact test compares every page's text and has no looks; use test "
                             "non_inferiority or equivalence with sequential, or remove the sequential block")
        return self


def load_study(path: Path) -> Study:
    path = Path(path)
    try:
        obj = yaml.safe_load(path.read_text("utf-8"))
    except (OSError, yaml.YAMLError, UnicodeDecodeError) as e:
        raise InputError(f"{path}: cannot read the study ({e})") from None
    if not isinstance(obj, dict):
        raise InputError(f"{path}: a study is a YAML mapping")
    st = parse_record(Study, obj, where=str(path))
    from quantgate.score import get_metric

    for m in st.metrics:
        try:
            get_metric(m)
        except InputError as e:
            raise InputError(f"{path}: metrics: {e}") from None
    check_statistics(st, str(path))
    starts_servers = "extra_args" in type(st.backend).model_fields
    for i, v in enumerate(st.variants):
        for field in ("server_args", "server_env"):
            if getattr(v, field) and not starts_servers:
                raise InputError(f"{path}: variants.{i}.{field}: backend {st.backend.name} starts no server to "
                                 "pass them to")
    if st.gpus and not starts_servers:
        raise InputError(f"{path}: field 'gpus': backend {st.backend.name} starts no server to place on a GPU")
    for i, v in enumerate(st.variants):
        if st.gpus and "CUDA_VISIBLE_DEVICES" in v.server_env:
            raise InputError(f"{path}: variants.{i}.server_env: CUDA_VISIBLE_DEVICES and the study's 'gpus' both "
                             "place this server; keep one of them")
    from quantgate.study.placement import plan_placement, variant_backend

    for i, v in enumerate(st.variants):  # issue 31: per-variant backend options, then the placement on the pool
        variant_backend(st.backend, v, i, where=f"{path}: ")
    if st.gpus and st.cluster:
        raise InputError(f"{path}: field 'gpus': with a cluster, Ray assigns each server its GPUs; remove 'gpus'")
    if not st.cluster:  # a cluster's pool is known once connected (study/cluster.py)
        try:
            plan_placement(st)
        except InputError as e:
            raise InputError(f"{path}: {e}") from None
    if st.servers == "all_at_once" and not st.gpus and not st.cluster \
            and "gpu_memory_utilization" in type(st.backend).model_fields and not st.backend.gpu_memory_utilization:
        raise InputError(f"{path}: field 'servers': all_at_once puts {len(st.variants)} servers on "
                         f"{max(len(set(st.gpus)), 1)} GPU(s), and each {st.backend.name} server takes most of a "
                         "GPU's memory by default; set backend.gpu_memory_utilization (below 1/number of servers "
                         "per GPU) and a KV-cache size in backend.extra_args (vLLM: --kv-cache-memory-bytes), "
                         "or list one GPU per variant in 'gpus'")
    return st


def check_statistics(st: Study, where: str) -> None:
    """The numbers a verdict rests on, checked before any page is drawn or server started (and by the
    gate, on the study a summary.json echoes): each margin finite, > 0 and below its metric's range,
    for a metric the study computes; seed >= 0; resamples >= MIN_RESAMPLES; min_pages >= 2."""
    from quantgate.score.metrics import check_margin

    for m, value in st.margins.items():
        if m not in st.metrics:
            raise InputError(f"{where}: field 'margins.{m}': not one of the study's metrics {st.metrics}; "
                             "a margin for a metric the study does not compute would judge nothing")
        check_margin(m, value, where=f"{where}: field 'margins.{m}'")
    if st.lm_eval:
        check_margin("lm-eval metrics", st.lm_eval.margin, where=f"{where}: field 'lm_eval.margin'")
        for k, value in st.lm_eval.margins.items():
            check_margin(k, value, where=f"{where}: field 'lm_eval.margins.{k}'")
    for name, value, least in (("seed", st.seed, 0), ("resamples", st.resamples, MIN_RESAMPLES),
                               ("min_pages", st.min_pages, 2)):
        if isinstance(value, bool) or value < least:
            why = {"resamples": " (a 5% tail from fewer rests on a few dozen values)",
                   "min_pages": " (a paired interval needs two pages; the calibrated minimum is "
                                f"{MIN_PAGES})"}.get(name, "")
            raise InputError(f"{where}: field '{name}': {value} must be an integer >= {least}{why}")


def effective_margins(st: Study) -> dict[str, float]:
    from quantgate.score import get_metric

    return {m: float(st.margins[m]) if m in st.margins else get_metric(m).margin for m in st.metrics}


def resolve_path(base: Path, p: str) -> Path:
    """A path written in a study: relative to the study file's folder unless absolute."""
    q = Path(p)
    return q if q.is_absolute() else (base / q)
