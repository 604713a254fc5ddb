"""A study's YAML as a record: every number is checked when the file is read (unknown keys refused with
their path), so a study stops before any page is drawn, weight written or server started. The margins are
checked here by the metrics' own rule (``schema.metrics``), whoever reads a study — ``quantgate study``, the
gate re-reading the study a summary.json echoes, a tune. The ``backend:`` block is typed by the registered
backends (``quantgate.study.spec``, which narrows :class:`Study` to them); here it is any block with a
``name``."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, model_validator

from quantgate.schema.base import FieldError, Record
from quantgate.schema.metrics import METRICS, declared_margin, margin_problem, setting_problem
from quantgate.schema.placement import ClusterSpec
from quantgate.schema.run import DEFAULT_PROMPT
from quantgate.schema.settings import (
    MIN_DOCUMENTS,
    MIN_PAGES,
    MIN_RESAMPLES,
    TestName,
    VerdictSettings,
    document_damage_problem,
    shift_problem,
)
from quantgate.schema.speed import MIN_WAVES, SpeedWaves
from quantgate.schema.summary import Summary


class _S(BaseModel):
    # no float field takes nan or inf: checked when the YAML is loaded, before any page, weight or server
    # strict: a number written as text ("48", "0.01") or a float where a count is meant (1e30) is refused, not
    # coerced, as docs/reliability.md promises — the study is the one file a person types numbers into
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, strict=True)


def _not_bool(v):
    # YAML reads yes/no/on/off/true/false as booleans, which pydantic would take as 1 and 0
    if isinstance(v, bool):
        raise ValueError("expected a number, not true/false")
    return v


_Num = BeforeValidator(_not_bool)


def _not_float(v):
    # a Literal takes 1.0 for 1 even in strict mode (it compares by equality): a version is written as a whole number
    if isinstance(v, float):
        raise ValueError(f"expected a whole number, not {v!r}")
    return v
# an upper bound far above any real study on every count, so a typo (1e9 pages, 1e30 tokens) stops at once instead
# of filling a disk
MAX_COUNT = 1_000_000
# a plain name: no folder separator, no control character, not starting with a dot ("../x", ".hidden", "a/b")
PlainName = Annotated[str, Field(min_length=1, max_length=128, pattern=r"^[^./\\\x00-\x1f][^/\\\x00-\x1f]*$")]
PositiveInt = Annotated[int, _Num, Field(ge=1, le=MAX_COUNT)]
NonNegativeInt = Annotated[int, _Num, Field(ge=0)]
PositiveFloat = Annotated[float, _Num, Field(gt=0)]
NonNegativeFloat = Annotated[float, _Num, Field(ge=0)]
# each request in flight holds a connection; a wait longer than a day is a hang (as the CLI flags)
ConcurrencyLevel = Annotated[int, _Num, Field(ge=1, le=65_535)]
EnvName = Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")]


class SynthPages(_S):
    n: Annotated[int, _Num, Field(ge=2, le=100_000, description="number of pages")]
    seed: NonNegativeInt = Field(0, description="seeds the pages' text and layout and the split")
    profile: Literal["doc", "simple", "reader"] = Field("doc", description="doc: full pages; simple: a heading and "
                                                        "one short block; reader: what the bundled tiny reader learned")
    # below 1: a study scores held-out pages
    calibration_fraction: Annotated[float, _Num, Field(ge=0, lt=1, description=(
        "share of documents for calibration, the rest held out"))] = 0.2
    noise: Annotated[float, _Num, Field(ge=0, le=1, description="pixel noise, a fraction of full scale")] = 0.03
    pages_per_document: PositiveInt = Field(1, description="pages per synthetic document, split together; the last "
                                            "may have fewer")


class PagesSpec(_S):
    path: str | None = None
    synth: SynthPages | None = None

    @model_validator(mode="after")
    def _one(self):
        if (self.path is None) == (self.synth is None):
            raise ValueError("give exactly one of 'path' (an existing page set) or 'synth'")
        return self


class VariantSpec(_S):
    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
    recipe: str
    server_args: list[str] = Field(default_factory=list)  # e.g. ["--kv-cache-dtype", "fp8"]
    server_env: dict[EnvName, str] = Field(default_factory=dict)  # e.g. {VLLM_BATCH_INVARIANT: "1"}
    # this variant's own values of the study backend's options, e.g. {tensor_parallel_size: 2}
    # (checked by that backend's options model: quantgate.study.placement.variant_backend)
    backend: dict[str, Any] = Field(default_factory=dict)


class BackendBlock(BaseModel):
    """``backend:`` as this module sees it: a backend's name and its options (``quantgate.study.spec`` types
    them by the registered backends)."""

    model_config = ConfigDict(extra="allow")
    name: str = "transformers"


class LmEvalSpec(_S):
    tasks: list[str] = Field(default_factory=list)  # lm-eval task names
    include_path: str | None = None  # folder of local task YAML (offline: dataset_path: json + data_files)
    page_task: bool = True  # add quantgate_page_heading, built from the study's page set
    limit: PositiveInt | None = Field(None, description="at most N documents per task")
    concurrent: PositiveInt = Field(1, description="requests in flight (lm-eval's num_concurrent)")
    margin: PositiveFloat = 0.02  # equivalence margin in each metric's units
    margins: dict[str, PositiveFloat] = Field(default_factory=dict)  # per "metric" or "task/metric"
    # the rare-failure rule for lm-eval's samples: the worst damage one sample can take, in the metric's
    # units (None: the metric's whole range, 1 for exact_match — 59 samples at a 0.05 margin)
    worst_sample_damage: PositiveFloat | None = None

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


class SpeedSpec(_S):
    """``speed:``: each speed level sent in ``repeats`` waves of ``max(c, wave_requests)`` requests
    (pages cycled), apart from the accuracy pass, so the report gives every ratio to the baseline an interval
    (``judge.speed.speedup_interval``). The study's other levels are then not served as whole page passes
    (only the accuracy level and the baseline's noise level are)."""

    repeats: Annotated[int, _Num, Field(ge=MIN_WAVES)] = MIN_WAVES
    levels: list[ConcurrencyLevel] | None = None  # default: the study's concurrency levels
    wave_requests: PositiveInt = 3  # at least this many requests per wave (c=1: 3 one after another)
    ignore_eos: bool = False  # fixed output length (max_tokens), as `serve --ignore-eos`; labelled in the report
    interval: Annotated[float, _Num, Field(gt=0, lt=1)] = 0.90  # the speed-up interval's level
    # levels whose decode step each variant's own server profiles after its waves (vLLM's torch profiler:
    # ``speed/<variant>/c<C>.profile.json``, then ``speed/cost-table.json`` and the report's Decode step), so the
    # profile comes from the server the speed was measured on and no second start is paid (quantgate.study.profile)
    profile: list[ConcurrencyLevel] = Field(default_factory=list)
    profile_steps: PositiveInt = 32  # decode steps recorded per level
    profile_delay: NonNegativeInt = 16  # decode steps skipped first
    profile_max_tokens: PositiveInt = 256  # tokens per profiled request: all c must still decode after the steps

    @model_validator(mode="after")
    def _profile(self):
        if len(set(self.profile)) != len(self.profile):
            raise FieldError(("profile",), f"{self.profile}: each level once")
        if self.profile and self.profile_max_tokens < self.profile_delay + self.profile_steps + 8:
            raise FieldError(("profile_max_tokens",), f"{self.profile_max_tokens}: the requests must still be "
                             f"decoding after the {self.profile_delay} skipped and {self.profile_steps} profiled "
                             f"steps; give at least {self.profile_delay + self.profile_steps + 8}")
        return self


# study keys renamed so that a flag and its key share a name (seeds say what they seed); the old name is read for
# one release
RENAMED_KEYS = {"seed": "bootstrap_seed"}


class Study(_S):
    schema_version: Annotated[Literal[1], _Num, BeforeValidator(_not_float)] = 1
    name: PlainName  # the default output folder is <name>-out beside the study file: never a path
    model: str
    prompt: str = DEFAULT_PROMPT
    pages: PagesSpec
    split: str = "heldout"
    limit: PositiveInt | None = Field(None, description="only the first N pages of the split")
    variants: list[VariantSpec] = Field(min_length=2)
    baseline: str = "bf16"
    calibration_samples: PositiveInt = Field(32, description="calibration pages each quantization reads")
    backend: BackendBlock = Field(default_factory=BackendBlock)
    concurrency: list[ConcurrencyLevel] = Field(default_factory=lambda: [1, 8], min_length=1)
    noise_concurrency: ConcurrencyLevel | None = None  # the baseline's second level, used as its noise run
    max_tokens: PositiveInt = Field(1024, description="most tokens a page's answer may have")
    timeout_s: Annotated[float, _Num, Field(gt=0, le=86_400, description=(
        "per-request timeout in seconds (a longer wait is a hang)"))] = 600.0
    slo_s: Annotated[float, _Num, Field(gt=0, le=86_400, description=(
        "p90 latency a page may take, in seconds (at most a day); the report names the highest level within it"))] = 10.0
    metrics: list[str] = Field(default_factory=lambda: ["ned", "cer", "bow_f1"])
    margins: dict[str, PositiveFloat] = Field(default_factory=dict)  # per metric; unset: the registry's margin
    bootstrap_seed: NonNegativeInt = Field(0, description="seeds the bootstrap's resampling (and a sequential "
                                           "study's page order unless it sets its own)")
    resamples: Annotated[int, _Num, Field(ge=MIN_RESAMPLES, le=MAX_COUNT, description="bootstrap resamples (a 5% "
                                          "tail needs at least ~1,000)")] = 10_000
    # below the calibrated minimum (MIN_PAGES) only for smoke tests: the report says the verdicts are not calibrated
    min_pages: Annotated[int, _Num, Field(ge=2, le=MAX_COUNT, description="fewest scored pages for a decisive verdict; below "
                                          f"the calibrated {MIN_PAGES} only for smoke tests")] = MIN_PAGES
    # (docs/statistics.md, "In a study"): per metric, like margins, because each is in the metric's units —
    # the worst damage of a page (document) a pass assumes (unset: the metric's range), the baseline's floor
    # (unset: the registry's) and the planning alternative of pages_needed (how much worse, >= 0; unset: 0);
    # min_documents is a count, one for the study
    worst_page_damage: dict[str, PositiveFloat] = Field(default_factory=dict)
    worst_document_damage: dict[str, PositiveFloat] = Field(default_factory=dict)
    baseline_floor: dict[str, NonNegativeFloat] = Field(default_factory=dict)
    expected_shift: dict[str, NonNegativeFloat] = Field(default_factory=dict)
    min_documents: Annotated[int, _Num, Field(ge=2, le=MAX_COUNT, description="fewest documents for a decisive verdict "
                                              "(documents are the statistical unit)")] = MIN_DOCUMENTS
    test: TestName = Field("non_inferiority", description="non_inferiority: at worst one margin worse; "
                           "equivalence: also not a margin better; exact: every page's text identical")
    output: str | None = None
    lm_eval: LmEvalSpec | None = None
    sequential: SequentialSpec | None = None  # off by default: every page is served (the fixed design)
    # all_at_once: each variant's server starts as soon as its weights are written, so the starts (compiles)
    # overlap each other and the later quantizations; then the variants' pages are served one after another
    # with the others idle (quantgate.study.run)
    # auto: the servers start together on the one GPU they inherit when their memory plan fits (study/overlap.py)
    servers: Literal["auto", "one_at_a_time", "all_at_once"] = "auto"
    gpus: list[NonNegativeInt] = Field(default_factory=list)  # the GPU pool servers are placed on (study/placement.py)
    cluster: ClusterSpec | None = None  # quantize and servers as Ray tasks and actors (study/cluster.py)
    speed: SpeedSpec | None = None  # speed levels in repeated waves, with intervals
    # beside each overall verdict, one per value of these page tag keys ("language" judges the pages
    # tagged language:english, language:chinese, ... each on their own), all in the study's Holm family
    verdicts_by_tag: list[Annotated[str, Field(pattern=r"^[^:\s]+$")]] = Field(default_factory=list)

    @model_validator(mode="before")
    @classmethod
    def _renamed(cls, obj: Any) -> Any:
        # an old key read as its new name, so a study (or a summary.json echoing one) written before the rename
        # still reads; quantgate.study.spec.load_study warns the user whose YAML has it
        if not isinstance(obj, dict):
            return obj
        for old, new in RENAMED_KEYS.items():
            if old in obj:
                if new in obj:
                    raise FieldError((old,), f"'{old}' is the old name of '{new}', and both are given; keep '{new}'")
                obj = {(new if k == old else k): v for k, v in obj.items()}
        return obj

    @property
    def seed(self) -> int:
        """The bootstrap's seed, by the name the verdict records use."""
        return self.bootstrap_seed

    @model_validator(mode="after")
    def _check(self):
        names = [v.name for v in self.variants]
        if len(set(names)) != len(names):
            raise ValueError(f"variant names must be unique: {names}")
        for field in ("metrics", "concurrency"):  # a metric twice makes its verdicts twice, which no gate accepts
            seen = getattr(self, field)
            twice = [x for i, x in enumerate(seen) if x in seen[:i]]
            if twice:
                raise FieldError((field,), f"{twice[0]!r} is listed twice in {seen}; list each once")
        # the upper bounds (MAX_COUNT, a day for slo_s) sit on the fields themselves, where the flags made from
        # them (commands._fields) read them too
        if self.baseline not in names:
            raise ValueError(f"baseline {self.baseline!r} is not one of the variants {names}")
        if self.sequential is not None and self.verdicts_by_tag:
            raise ValueError("verdicts_by_tag: a sequential study stops on its overall verdicts; per-tag verdicts "
                             "need every page served (remove the sequential block or verdicts_by_tag)")
        if self.sequential is not None and self.test == "exact":
            raise ValueError("sequential: the exact test compares every page's text and has no looks; use test "
                             "non_inferiority or equivalence with sequential, or remove the sequential block")
        for i, m in enumerate(self.metrics):
            if m not in METRICS:
                raise FieldError(("metrics", i), f"unknown metric {m!r}; known: {', '.join(METRICS)}")
        for m, value in self.margins.items():
            if m not in self.metrics:
                raise FieldError(("margins", m), f"not one of the study's metrics {self.metrics}; a margin for a "
                                                 "metric the study does not compute would judge nothing")
            problem = margin_problem(m, value)
            if problem:
                raise FieldError(("margins", m), problem)
        used = self.margins_used()
        for field in ("worst_page_damage", "worst_document_damage", "baseline_floor", "expected_shift"):
            for m, value in getattr(self, field).items():
                if m not in self.metrics:
                    raise FieldError((field, m), f"not one of the study's metrics {self.metrics}")
                problem = (setting_problem(METRICS[m], field, value, used[m]) if field != "expected_shift" else
                           shift_problem(value, used[m]))
                if problem:
                    raise FieldError((field, m), problem)
        if self.speed is not None and self.speed.profile:
            levels = set(self.speed.levels or self.concurrency)
            for i, c in enumerate(self.speed.profile):
                if c not in levels:
                    raise FieldError(("speed", "profile", i), f"{c} is not one of the speed levels {sorted(levels)}: a "
                                     "profile explains a measured level")
            if self.backend.name != "vllm":
                raise FieldError(("speed", "profile"), f"decode profiles come from vLLM's torch profiler; the "
                                 f"backend is {self.backend.name!r} (use backend name vllm, or drop speed.profile)")
        for m, value in self.worst_document_damage.items():
            page = self.worst_page_damage.get(m, METRICS[m].damage)
            problem = document_damage_problem(value, page)
            if problem:
                raise FieldError(("worst_document_damage", m), problem)
        return self

    def verdict_settings(self, metric: str) -> VerdictSettings:
        """Every setting of ``metric``'s verdicts, as the study declares them, in the one record the judge takes."""
        return VerdictSettings.model_validate({
            "metric": metric, "margin": self.margins.get(metric), "test": self.test, "seed": self.seed,
            "n_resamples": self.resamples, "min_pages": self.min_pages, "min_documents": self.min_documents,
            "worst_page_damage": self.worst_page_damage.get(metric),
            "worst_document_damage": self.worst_document_damage.get(metric),
            "baseline_floor": self.baseline_floor.get(metric), "expected_shift": self.expected_shift.get(metric, 0.0)})

    # --- what the study's fields imply, computed here once -----------------------------------------------

    @property
    def compare_level(self) -> int:
        """The concurrency level every verdict is made at: the first."""
        return self.concurrency[0]

    @property
    def noise_level(self) -> int | None:
        """The baseline's second level, its noise run (None: the study has no second level)."""
        return self.noise_concurrency or (self.concurrency[1] if len(self.concurrency) > 1 else None)

    def levels_of(self, variant: str) -> list[int]:
        """The levels a variant's pages are served at: the study's, and for the baseline also its noise level;
        with ``speed:`` only the accuracy level (and the noise level), the speed levels going in waves."""
        noise = [self.noise_level] if variant == self.baseline and self.noise_level else []
        levels = [self.compare_level] if self.speed is not None else list(self.concurrency)
        return sorted(set(levels + noise))

    def speed_waves(self) -> SpeedWaves | None:
        """What a variant's run sends as repeated speed levels (None: no ``speed:`` block)."""
        sp = self.speed
        if sp is None:
            return None
        return SpeedWaves(levels=sorted(set(sp.levels or self.concurrency)), repeats=sp.repeats,
                          wave_requests=sp.wave_requests, ignore_eos=sp.ignore_eos)

    def margins_used(self) -> dict[str, float]:
        """The margin each metric is judged against: the study's, else the registry's."""
        return {m: declared_margin(m, self.margins.get(m))[0] for m in self.metrics}


class StudyOutcome(Record):
    """What ``quantgate study`` returns: its folder and either the report it wrote or the stage it was told to
    stop after (tests stop early)."""

    out: str
    stopped_after: Literal["quantize", "serve", "score"] | None = None
    summary: Summary | None = None
