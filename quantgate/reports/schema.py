"""``summary.json``, typed: the one report model every renderer and the gate read.

Versioned like guidellm's benchmark report: ``kind`` says what the file is, ``schema_version`` which
layout; a reader refuses a newer version with a message naming the one it reads, and any unknown or
malformed field with the file and the field (:func:`load_summary`). The verdict rows embed
``records.Verdict`` by inheritance, so fields the statistics add to a verdict flow into the report."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import field_validator, model_serializer

from quantgate.records import (
    SCHEMA_VERSION,
    EngineSettings,
    LevelStats,
    Record,
    RunNumerics,
    Verdict,
    VerdictName,
    parse_record,
)
from quantgate.records_files import LmEvalRun, read_record_file

SUMMARY = "summary.json"
# The study echoed into the report is the study file's own model dumped (its schema lives with the
# study); these are the keys the renderers and the gate read from it.
STUDY_KEYS = ("name", "baseline", "variants", "metrics", "split", "seed", "resamples", "slo_s")


class VariantVerdict(Verdict):
    """One verdict of a candidate variant on one metric: a ``Verdict`` and the variant's name."""

    variant: str

    @model_serializer(mode="wrap")
    def _variant_first(self, handler):
        d = handler(self)
        return {"variant": d.pop("variant"), **d}  # the name leads the row, as it reads


class LmEvalVerdict(Record):
    """One lm-eval task × metric of a candidate: lm-eval's scores and stderr, the recovery ratio and
    the paired verdict over the logged samples (the fields ``lmeval.compare`` keeps of a Verdict)."""

    variant: str
    task: str
    metric: str  # "metric,filter" as lm-eval names it
    baseline: float
    baseline_stderr: float | None
    candidate: float
    candidate_stderr: float | None
    recovery: float | None  # oriented so 1.0 is parity
    verdict: VerdictName
    higher_is_better: bool
    n: int
    delta: float
    ci_low: float
    ci_high: float
    margin: float
    confidence: float
    seed: int
    n_resamples: int
    missing_pages: list[str]


class LmEvalSection(Record):
    verdicts: list[LmEvalVerdict]
    runs: dict[str, LmEvalRun]  # variant name -> its lmeval.json


class VariantSummary(Record):
    name: str
    recipe: str
    recipe_sha256: str
    path: str  # the variant folder; the gate re-hashes the weight files under it
    weights_bytes: int
    compression: float | None
    formats: dict[str, int] | None
    vision_bf16: bool | None
    files: dict[str, str]  # file name -> sha256, from quantgate.json
    kernels: dict[str, str]
    numerics: RunNumerics | None  # from run.json: per format, weights-only or weights+activations, and the evidence
    notes: list[str]
    server_version: str | None
    engine: EngineSettings | None = None  # the run's engine settings (run.json), printed beside the speed
    levels: list[LevelStats]
    max_concurrency_within_slo: int | None
    calibration_pages: int
    speedup: dict[str, float | None]  # concurrency (as text) -> pages/s over the baseline's


class WorstPage(Record):
    page_id: str
    metric: str
    baseline_value: float
    variant_value: float
    truth: str | None
    baseline_output: str | None
    variant_output: str | None


class Provenance(Record):
    packages: dict[str, str | None]
    git_commit: str | None
    pageset_sha256: str
    statistics: str


class Summary(Record):
    """``summary.json``: the study, every verdict with its numbers, speed per variant and level,
    sizes and weight hashes, worst pages, lm-eval results, provenance."""

    schema_version: int = SCHEMA_VERSION
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

    @field_validator("study")
    @classmethod
    def _study_keys(cls, v: dict[str, Any]) -> dict[str, Any]:
        lacking = [k for k in STUDY_KEYS if k not in v]
        if lacking:
            raise ValueError(f"the study lacks {', '.join(lacking)}")
        return v


def numerics_rows(r: Summary) -> list[dict[str, str]]:
    """One row per variant and quantized format: what the backend computed (weights-only or
    weights+activations) and on what evidence — the table report.md and report.html print."""
    rows = []
    for v in r.variants:
        n = v.numerics
        if n is None:
            rows.append({"variant": v.name, "backend": "–", "format": "–", "computes": "not recorded",
                         "activations": "–", "evidence": "run.json has no numerics (an endpoint's model, or an "
                                                         "older run)"})
            continue
        where = f"{n.backend} ({n.device})" if n.device else n.backend
        if not n.formats:
            rows.append({"variant": v.name, "backend": where, "format": "none", "computes": "not quantized",
                         "activations": "–", "evidence": "the checkpoint has no quantization_config"})
        for f in n.formats.values():
            if f.evidence == "measured":
                ev = f"measured ({f.measured_by})"
            elif f.kernel:
                ev = f"kernel {f.kernel} named in vLLM's log" + (f"; {f.detail}" if f.detail else "")
            else:
                ev = f"not measured ({f.detail})" if f.detail else "not measured"
            rows.append({"variant": v.name, "backend": where, "format": f.format,
                         "computes": f.computes or "not measured", "activations": f.activations or "–", "evidence": ev})
    return rows


def load_summary(out: Path) -> Summary:
    """The report of a finished study folder, validated field by field."""
    return read_record_file(Summary, Path(out) / SUMMARY,
                            missing="the study has not finished; rerun `quantgate study`")


def as_summary(report: Summary | dict, where: str = "report") -> Summary:
    return report if isinstance(report, Summary) else parse_record(Summary, report, where=where)
