"""Typed records of a tune: one line per finished trial (``trials.jsonl``) and the whole run
(``tune.json``), both under ``OUT/tune/<name>/`` of the study folder."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from quantgate.schema.base import Record
from quantgate.schema.verdict import VerdictName

SCHEMA_VERSION = 1
Outcome = Literal["within_noise", "regression", "inconclusive"]


class Measured(Record):
    """One verdict of a trial's variant, with the numbers the next step reads."""

    source: Literal["pages", "lm_eval"]
    metric: str  # a page metric, or "task metric" for lm-eval
    verdict: VerdictName
    reason: str | None = None  # page verdicts only (docs/statistics.md, Reasons)
    higher_is_better: bool
    n: int
    baseline_mean: float | None = None
    candidate_mean: float | None = None
    delta: float  # candidate − baseline, the metric's own units
    ci_low: float
    ci_high: float
    margin: float
    pages_needed: int | None = None
    pages_changed: int | None = None  # pages whose output text differs from the baseline's (page verdicts)

    @property
    def worse_bound(self) -> float:
        """The pessimistic end of the interval as a change for the worse (positive = worse)."""
        return -self.ci_low if self.higher_is_better else self.ci_high

    @property
    def worse_delta(self) -> float:
        return -self.delta if self.higher_is_better else self.delta


class Action(Record):
    """What the loop did after a trial, and why (one sentence a reviewer reads)."""

    kind: Literal["done", "promote", "tighten", "stop"]
    text: str
    promote: dict[str, list[str]] = Field(default_factory=dict)  # group -> formats newly forbidden
    target_kl: float | None = None  # the summed KL the promotion aimed at (additive model)
    limit: int | None = None  # pages per variant for the next trial (tighten)


class Trial(Record):
    schema_version: Literal[1] = 1
    trial: int  # 1-based
    variant: str  # the variant's name in the study
    recipe: str  # the recipe file, relative to the study folder
    recipe_sha256: str
    study: str  # the trial's study YAML, relative to the study folder
    exclude: dict[str, list[str]]  # formats forbidden per group when this recipe was chosen
    limit: int | None  # held-out pages per variant (None: the whole split)
    assignment: dict[str, str]  # group -> format
    bytes: int  # predicted weights payload (the sensitivity file's sizes)
    weights_bytes: int | None = None  # the built checkpoint's weights, as the study measured them
    effective_bits: float
    decode_bytes: int  # weights read per decoded token (the decode-time model)
    modelled_decode_ms: float  # ms per decode step, by speed_basis
    modelled_speedup: float
    speed_basis: str | None = None  # where the speed-up comes from (None: a tune from before it was recorded)
    predicted_kl: float  # summed KL of the groups plus the baseline every quantized variant carries
    verdicts: list[Measured]
    outcome: Outcome
    action: Action
    wall_s: float
    finished_utc: str


class TuneInputs(Record):
    """What a resumed tune must find unchanged (the trial count may grow)."""

    study: str
    study_sha256: str  # over the study's settings, its variants list and output excluded
    sensitivity: str
    sensitivity_sha256: str  # the file (provenance; a rerun of `quantgate sensitivity` rewrites its timings)
    sensitivity_fingerprint: str  # what the recommendations read: groups, formats, KL and bytes, sizes
    model_weights_sha256: str
    mode: Literal["budget", "effective_bits", "speedup"]
    limit: float
    formats: list[str] | None = None
    target: str
    speed_table_sha256: str | None = None  # --speed-table: the measured cost table the speed-ups come from
    prefill_table_sha256: str | None = None  # --prefill-table: the prefill phase of the served speed-ups
    speed_concurrency: int | None = None


class TuneFile(Record):
    schema_version: Literal[1] = 1
    kind: Literal["quantgate.tune"] = "quantgate.tune"
    name: str
    inputs: TuneInputs
    sensitivity_copy: str  # the sensitivity file, copied into the study folder (relative path)
    max_trials: int
    status: Literal["running", "found", "not_found"]
    current_trial: int | None = None  # the trial in progress (status running)
    chosen: int | None = None  # the trial whose recipe the tune ends at
    message: str = ""
    trials: list[Trial] = Field(default_factory=list)
    updated_utc: str


class TrialStudy(Record):
    """What a trial's study gave the tune: each variant's verdicts as the loop reads them, and each variant's
    built weights (bytes)."""

    measured: dict[str, list[Measured]]
    weights_bytes: dict[str, int]
