"""The outcome a report leads with: one word — PASS, FAIL, UNDECIDED or INVALID — and, per variant, the one reason
that matters most, so a reader knows the answer before the first table.

The words follow the gate's family rule (quantgate.gate.check; reports may not import the judge or the gate, so the
rule is stated here and tests/integration/test_report_outcome.py holds it equal to the gate's exit on the same folders):
PASS when every verdict is ``within_noise``; FAIL when a regression survives Holm's adjustment or a verdict is
``not_equivalent``; UNDECIDED otherwise, and whenever the baseline is unfit (no candidate can be judged against a
baseline that cannot read the pages); INVALID when the study is unfinished. The report states what summary.json
holds; only ``quantgate gate`` re-hashes the files behind it."""

from __future__ import annotations

from typing import NamedTuple

from quantgate.schema.summary import Summary

WORDS = ("PASS", "FAIL", "UNDECIDED", "INVALID")
CLASS = {"PASS": "within_noise", "FAIL": "regression", "UNDECIDED": "inconclusive", "INVALID": "regression"}


class VariantOutcome(NamedTuple):
    name: str
    word: str
    reason: str  # the one that matters most: the failing verdict, else what keeps it undecided, else what passed


class Outcome(NamedTuple):
    word: str
    reason: str  # one line for the whole study
    variants: list[VariantOutcome]


def _fails(v) -> bool:
    """A definite failure: not_equivalent, or a regression Holm confirms (judge.family.confirmed)."""
    return v.verdict == "not_equivalent" or (
        v.verdict == "regression" and v.p_regression_holm is not None and v.p_regression_holm <= v.alpha)


def _what(v) -> str:
    """A verdict row named as the report's tables name it: metric (and tag), or lm-eval's task and metric."""
    task = getattr(v, "task", None)
    return f"lm-eval {task} {v.metric}" if task else v.metric + (f" [{v.tag}]" if v.tag else "")


def _variant(name: str, rows: list, lm: list) -> VariantOutcome:
    failing = [v for v in rows if _fails(v)]
    open_ = [v for v in rows if v.verdict != "within_noise"]
    lm_open = [v for v in lm if v.verdict != "within_noise"]
    # lm-eval's verdicts are reported beside, as the gate checks them only with --lmeval
    beside = "" if not lm_open else (f"; lm-eval (gate --lmeval): {lm_open[0].verdict} on "
                                     f"{getattr(lm_open[0], 'task', '')} {lm_open[0].metric}")
    if failing:  # the failure furthest beyond its margin, in margins
        worst = max(failing, key=lambda v: abs(v.delta) / v.margin if v.margin else 0.0)
        return VariantOutcome(name, "FAIL", f"{_what(worst)}: {worst.message}{beside}")
    decidable = [v for v in open_ if v.reason != "baseline_unfit"]
    if decidable:  # what would decide it: a verdict that names its page count first, the fewest pages first
        first = min(decidable, key=lambda v: (v.pages_needed is None, v.pages_needed or 0))
        more = f" (and {len(open_) - 1} more undecided)" if len(open_) > 1 else ""
        return VariantOutcome(name, "UNDECIDED", f"{_what(first)}: {first.message}{more}{beside}")
    if open_:  # only the baseline's unfitness: said once, in the study's line
        return VariantOutcome(name, "UNDECIDED", f"the baseline is unfit on {', '.join(_what(v) for v in open_)} "
                              f"(above){beside}")
    if not rows:
        return VariantOutcome(name, "UNDECIDED", f"no verdict{beside}")
    return VariantOutcome(name, "PASS", f"every verdict within noise ({', '.join(_what(v) for v in rows)}){beside}")


def outcome(r: Summary) -> Outcome:
    """The study's word (the gate's, over the page verdicts as `quantgate gate` checks them by default) and each
    candidate's."""
    lm = list(r.lm_eval.verdicts if r.lm_eval else [])
    names = list(dict.fromkeys([*(v.variant for v in r.verdicts), *(v.variant for v in lm)]))
    variants = [_variant(n, [v for v in r.verdicts if v.variant == n], [v for v in lm if v.variant == n])
                for n in names]
    unfit = sorted({(v.metric, v.baseline_score, v.baseline_floor) for v in r.verdicts if v.reason == "baseline_unfit"},
                   key=lambda x: x[0])
    if not r.complete:
        return Outcome("INVALID", "the study is incomplete: rerun `quantgate study` to finish it", variants)
    if unfit:
        metric, score, floor = unfit[0]
        shown = "–" if score is None else f"{score:.4f}"
        return Outcome("UNDECIDED", f"baseline unfit: {r.baseline} scores {shown} {metric} (floor "
                       f"{'–' if floor is None else f'{floor:g}'}); every verdict on {metric} is vacuous until the "
                       "baseline reads these pages", variants)
    words = {x.word for x in variants if x.name in {v.variant for v in r.verdicts}}
    if not words:
        return Outcome("UNDECIDED", "no verdict was made", variants)
    if "FAIL" in words:
        return Outcome("FAIL", f"{sum(x.word == 'FAIL' for x in variants)} of {len(variants)} candidate(s) regress",
                       variants)
    if words == {"PASS"}:
        return Outcome("PASS", f"every candidate is within noise of {r.baseline}", variants)
    return Outcome("UNDECIDED", "not every verdict passes and none fails: the lines below say what would decide "
                   "each", variants)


def banner_markdown(r: Summary) -> list[str]:
    """The banner as report.md's first lines after the title."""
    o = outcome(r)
    return [f"> **{o.word}** — {o.reason}", ">"] + [f"> - **{x.name}: {x.word}** — {x.reason}" for x in o.variants] + [""]
