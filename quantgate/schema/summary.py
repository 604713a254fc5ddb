"""``summary.json``, typed: the one report model every renderer and the gate read.

Versioned like guidellm's benchmark report: ``kind`` says what the file is, ``schema_version`` which
layout; a reader refuses a newer version with a message naming the one it reads, and any unknown or
malformed field with the file and the field (:func:`load_summary`). The verdict rows embed
``schema.verdict.Verdict`` by inheritance, so fields the statistics add to a verdict flow into the report."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_serializer, model_validator

from quantgate.schema.base import Record, read_record_file
from quantgate.schema.lmeval import LmEvalResult, LmEvalRun
from quantgate.schema.run import EngineSettings, KernelCounts, LevelStats, RunNumerics, SpeedLevel, upgrade_kernels
from quantgate.schema.sequential import SequentialDecision
from quantgate.schema.settings import TestName
from quantgate.schema.speed import SpeedupInterval
from quantgate.schema.timings import TimeBudget
from quantgate.schema.verdict import Verdict

SUMMARY = "summary.json"
# 2: verdicts with reasons and the declared margin, paths relative to the study folder, ``inputs``
# 3: each variant's ``kernels`` counts every choice vLLM logged per scheme (as run.json 2); 2 is read, upgraded
# 4: ``truth`` (the judged pages with and without truth), ``truth_free`` and ``largest_bounds`` (what the outputs
# alone bound); 3 is read as a study that did not count them
# 5: the study as run (``study.json``, written by the study) is hashed in ``inputs.files`` and the echo must equal it,
# so an echo field no run.json or variant manifest proves (name, model, backend, timeouts, GPUs) is bound too; 4 is
# read as it was written (its echo bound only where run.json proves it), and stays 4 when its reports are rebuilt
SUMMARY_SCHEMA_VERSION: Literal[5] = 5
STUDY_AS_RUN = "study.json"  # the study's own copy of the study it ran, in the study folder


class StudyEcho(BaseModel):
    """The study echoed into the report is the study file's own model dumped (its schema lives with the
    study, and the gate parses it through that); these are the keys the renderers read from it, typed
    so that a hand-edited value of the wrong type is refused here, not met as a traceback in a renderer."""

    model_config = ConfigDict(extra="allow")
    name: str
    baseline: str
    variants: list[dict[str, Any]]
    metrics: list[str] = Field(min_length=1)
    margins: dict[str, float]
    split: str
    bootstrap_seed: int
    resamples: int
    min_pages: int
    test: TestName
    slo_s: float

    @model_validator(mode="before")
    @classmethod
    def _renamed(cls, obj: Any) -> Any:
        # a summary written before the study's `seed` was named `bootstrap_seed` (schema.study.RENAMED_KEYS)
        if isinstance(obj, dict) and "seed" in obj and "bootstrap_seed" not in obj:
            obj = {("bootstrap_seed" if k == "seed" else k): v for k, v in obj.items()}
        return obj


class VariantVerdict(Verdict):
    """One verdict of a candidate variant on one metric: a ``Verdict`` and the variant's name."""

    variant: str
    # a candidate in another TP/DP layout than the baseline: its noise floor was measured in that layout
    # (a layout twin) or not (quantgate.study.noise_layout); None: the baseline's layout
    noise_layout: Literal["measured", "not_measured"] | None = None
    # a verdict on the pages of one tag value only (``verdicts_by_tag``), e.g. "language:english";
    # None: every judged page
    tag: str | None = None

    @property
    def label(self) -> str:
        """The row's name in reports: the variant, and the tag value its pages share."""
        return self.variant if self.tag is None else f"{self.variant} [{self.tag}]"

    def marked(self, flag: str | None, note: str | None) -> VariantVerdict:
        """This verdict with its layout's ``noise_layout`` and sentence (``study.noise_layout.layout_note``), or
        itself in the baseline's layout. On the record because the judge marks the sequential design's rows it
        returns and the study the fixed design's, by one rule."""
        if flag is None:
            return self
        return self.model_copy(update={"noise_layout": flag, "message": f"{self.message} {note}".strip()})

    @model_serializer(mode="wrap")
    def _variant_first(self, handler):
        d = handler(self)
        for k in ("noise_layout", "tag"):
            if d.get(k) is None:
                d.pop(k, None)  # the baseline's layout / every page: the row as before layouts and tags existed
        return {"variant": d.pop("variant"), **d}  # the name leads the row, as it reads


class LmEvalVerdict(LmEvalResult):
    """An lm-eval verdict of a candidate variant: an ``LmEvalResult`` and the variant's name."""

    variant: str

    @model_serializer(mode="wrap")
    def _order(self, handler):
        d = handler(self)
        return {"variant": d.pop("variant"), "task": d.pop("task"), **d}


class LmEvalSection(Record):
    verdicts: list[LmEvalVerdict]
    runs: dict[str, LmEvalRun]  # variant name -> its lmeval.json


class VerdictInputs(Record):
    """What the gate needs to make every verdict again (``quantgate.gate.check``): the declared margin
    per metric as used (the registry's when the study set none), and every file a verdict rests on —
    ``pages.jsonl``, the score files, lm-eval's results and samples — by its path relative to the study
    folder and its sha256. Seed, resamples, min_pages and the test are the study's own (``study``)."""

    margins: dict[str, float]
    pages: str  # the judged page set's pages.jsonl, relative to the study folder
    files: dict[str, Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]]


class VariantSummary(Record):
    name: str
    recipe: str
    recipe_sha256: str
    path: str  # the variant folder, relative to the study folder; the gate re-hashes the weight files under it
    weights_bytes: int
    compression: float | None
    formats: dict[str, int] | None
    vision_bf16: bool | None
    files: dict[str, str]  # file name -> sha256, from quantgate.json
    kernels: KernelCounts
    numerics: RunNumerics | None  # from run.json: per format, weights-only or weights+activations, and the evidence
    notes: list[str]
    server_version: str | None
    engine: EngineSettings | None = None  # the run's engine settings (run.json), printed beside the speed
    levels: list[LevelStats]
    max_concurrency_within_slo: int | None
    calibration_pages: int
    speedup: dict[str, float | None]  # concurrency (as text) -> pages/s over the baseline's
    speed: list[SpeedLevel] = Field(default_factory=list)  # the speed levels' waves (run.json)
    # concurrency (as text) -> the waves' ratio to the baseline's, with its interval
    speedup_interval: dict[str, SpeedupInterval] = Field(default_factory=dict)
    sequential: SequentialDecision | None = None  # a sequential study's candidate: the decision its pass stopped at
    preemptions: dict[str, int] | None = None  # concurrency (as text) -> requests preempted there (run.json)


class WorstPage(Record):
    page_id: str
    metric: str
    baseline_value: float
    variant_value: float
    truth: str | None
    baseline_output: str | None
    variant_output: str | None
    # the page image: relative to the study folder when inside it, else absolute; the report embeds a thumbnail
    image: str | None = None


class TruthCounts(Record):
    """The judged pages (the study's split, served to every variant) by whether they have truth (a truth file):
    a page without it is judged by what the two outputs show (the truth-free bound), one with it by its score too.
    ``label_sample``: pages in the random labeling draw ``pages label-sample`` recorded (None: none recorded);
    ``labeled_at_random``: every drawn page has truth and the draw checks out, so they stand as a random sample;
    ``sample_note``: why not (``quantgate.heldout.label.sample_status``)."""

    pages: int = Field(ge=0)
    documents: int = Field(ge=0)
    with_truth: int = Field(ge=0)
    documents_with_truth: int = Field(ge=0)
    without_truth: int = Field(ge=0)
    documents_without_truth: int = Field(ge=0)
    label_sample: int | None = None
    labeled_at_random: bool = False
    sample_note: str | None = None

    def line(self) -> str:
        """One sentence for the console and the report."""
        sample = "no labeling draw recorded" if self.label_sample is None else (
            f"{self.label_sample} pages in the random labeling draw, "
            + ("all labeled" if self.labeled_at_random else f"not usable as the random sample: {self.sample_note}"))
        return (f"{self.pages} pages judged in {self.documents} documents: {self.with_truth} with truth "
                f"({self.documents_with_truth} documents), {self.without_truth} without "
                f"({self.documents_without_truth} documents); {sample}")


class TruthFreeEvidence(Record):
    """One candidate (or the baseline's noise run) against the baseline on one metric, from its bounds file
    (``study.truthfree``): what the outputs alone show, truth or no truth. ``changed``: pages whose two outputs
    differ at all (flips); ``mean_bound``: the mean truth-free damage bound over the ``pages`` both answered, in
    the metric's units, to read against ``margin`` (None: the metric has no truth-free bound)."""

    variant: str
    metric: str
    pages: int = Field(ge=0)
    changed: int = Field(ge=0)
    mean_bound: float | None
    margin: float


class BoundPage(Record):
    """A page with one of a candidate's largest truth-free bounds, shown as baseline vs candidate beside its image:
    the worst pages need no truth to be seen. ``image``: as ``WorstPage.image``."""

    page_id: str
    metric: str
    bound: float
    has_truth: bool
    baseline_output: str | None
    variant_output: str | None
    image: str | None = None


class Provenance(Record):
    packages: dict[str, str | None]
    git_commit: str | None
    pageset_sha256: str
    statistics: str


class Summary(Record):
    """``summary.json``: the study, every verdict with its numbers, speed per variant and level,
    sizes and weight hashes, worst pages, lm-eval results, provenance."""

    schema_version: Literal[4, 5] = SUMMARY_SCHEMA_VERSION
    READS_SCHEMA_FROM: ClassVar[int] = 2
    kind: Literal["quantgate.report"] = "quantgate.report"
    created: str  # UTC, ISO 8601
    study: dict[str, Any]
    baseline: str
    compare_level: int
    noise_level: int | None
    complete: bool
    verdicts: list[VariantVerdict]
    lm_eval: LmEvalSection | None
    variants: list[VariantSummary]
    worst_pages: dict[str, list[WorstPage]]
    provenance: Provenance
    inputs: VerdictInputs
    time_budget: TimeBudget | None = None  # where the study's wall time went (the run that wrote this report)
    truth: TruthCounts | None = None  # 4: the judged pages with and without truth; None: a schema-3 report
    # 4: per candidate × metric, then the noise run's rows (variant = the baseline): what the outputs alone bound
    truth_free: list[TruthFreeEvidence] = Field(default_factory=list)
    largest_bounds: dict[str, list[BoundPage]] = Field(default_factory=dict)  # 4: variant -> its largest bounds

    @field_validator("study")
    @classmethod
    def _study_keys(cls, v: dict[str, Any]) -> dict[str, Any]:
        try:
            StudyEcho.model_validate(v)
        except ValidationError as e:
            err = e.errors()[0]
            raise ValueError(f"study.{'.'.join(str(p) for p in err['loc'])}: {err['msg']}") from None
        return v

    @model_validator(mode="before")
    @classmethod
    def _from_schema_2(cls, obj: Any) -> Any:
        if isinstance(obj, dict) and obj.get("schema_version") == 2 and isinstance(obj.get("variants"), list):
            variants = [upgrade_kernels(v) if isinstance(v, dict) else v for v in obj["variants"]]
            obj = {**obj, "variants": variants, "schema_version": 3}
        if isinstance(obj, dict) and obj.get("schema_version") == 3:
            obj = {**obj, "schema_version": 4}  # no counts: ``truth`` stays None
        return obj


def load_summary(out: Path) -> Summary:
    """The report of a finished study folder, validated field by field."""
    return read_record_file(Summary, Path(out) / SUMMARY,
                            missing="the study has not finished; rerun `quantgate study`")
