"""The records of a sequential accuracy pass (docs/statistics.md, "Sequential verdicts"): the boundary of each
look, each metric's decision at the current look, and the whole decision summary.json keeps per candidate
(``variants[].sequential``). ``quantgate.judge.sequential`` makes them; the report and the gate read them."""

from __future__ import annotations

from typing import Literal

from quantgate.schema.base import Record
from quantgate.schema.verdict import IntervalName, ReasonName, VerdictName

Spending = Literal["obrien_fleming", "pocock"]
StopReason = Literal["all_decisive", "page_budget"]


class LookBoundary(Record):
    """One look of the design: after ``pages`` pages, a verdict side is decided when its one-sided
    p-value is at most ``nominal_alpha`` (z beyond ``z``); ``alpha_spent`` is cumulative."""

    look: int  # 1-based
    pages: int
    information_fraction: float  # pages / planned page budget
    z: float
    nominal_alpha: float
    alpha_spent: float


class SequentialMetric(Record):
    """One metric's verdict at the current look (frozen at ``decided_at_look`` once decisive).
    Mean and interval are oriented (higher is better), from the pages of the look it was decided at."""

    metric: str
    verdict: VerdictName
    reason: ReasonName
    decisive: bool
    decided_at_look: int | None
    pages: int  # pages with a value for this metric at that look
    mean: float | None
    ci_low: float | None  # (1 − 2·nominal_alpha) interval: each end a one-sided test at nominal_alpha
    ci_high: float | None
    nominal_alpha: float
    interval: IntervalName | None
    margin: float
    noise_floor: float | None  # one-sided 95% bound, as in the fixed design: a guard, not the test
    p_regression_nominal: float | None  # at that look, against nominal_alpha
    p_regression: float  # repeated p-value over the looks so far: compare with alpha; Holm-adjust a family


class SequentialDecision(Record):
    """What the report records for a variant's accuracy pass: the plan, where it stopped and why,
    the boundary of every look and the alpha spent, and each metric's verdict."""

    schema_version: Literal[1] = 1
    test: Literal["non_inferiority", "equivalence"]
    spending: Spending
    alpha: float  # one-sided, each side, over all looks
    n_max: int  # planned page budget
    looks: list[int]
    plan: list[LookBoundary]
    seed: int  # bootstrap seed (the page order has its own)
    n_resamples: int
    min_pages: int
    look: int  # 1-based: the look just made
    pages_used: int
    alpha_spent: float  # cumulative, at this look
    stop: bool
    stop_reason: StopReason | None
    metrics: dict[str, SequentialMetric]

    def stop_line(self) -> str:
        """"stopped at look 2 of 4: 60 of 120 pages (every verdict decisive)" — the report's and console's line."""
        why = {"all_decisive": "every verdict decisive", "page_budget": "the page budget ended"}.get(
            self.stop_reason or "", "not finished")
        return (f"{'stopped' if self.stop else 'at'} at look {self.look} of {len(self.looks)}: {self.pages_used} of "
                f"{self.n_max} pages ({why})")
