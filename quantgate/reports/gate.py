"""The release gate: an exit code a pipeline can trust.

0 every checked verdict passes; 1 any regression; 2 any inconclusive (none regressed);
3 the study is incomplete, or its weights changed since the verdicts were made."""

from __future__ import annotations

from pathlib import Path

from quantgate.reports.model import rehash
from quantgate.reports.schema import load_summary

PASS, REGRESSION, INCONCLUSIVE, INVALID = 0, 1, 2, 3


def gate(out: Path, metrics: list[str] | None = None, variants: list[str] | None = None,
         lmeval: bool = False) -> tuple[int, list[str]]:
    """``lmeval``: lm-eval verdicts count too (and their absence makes the gate fail with 3)."""
    rep = load_summary(out)
    changed = rehash(rep)
    if changed:
        return INVALID, [f"artifacts changed since the verdict: {c}" for c in changed]
    if not rep.complete:
        return INVALID, ["the study is incomplete: rerun `quantgate study` to finish it"]
    # (variant, metric label, verdict row) for every verdict the gate checks
    checked = [(v.variant, v.metric, v) for v in rep.verdicts
               if (not metrics or v.metric in metrics) and (not variants or v.variant in variants)]
    if not checked:
        return INVALID, [f"no verdict matches metrics={metrics} variants={variants}"]
    if lmeval:
        lm = [v for v in (rep.lm_eval.verdicts if rep.lm_eval else []) if not variants or v.variant in variants]
        if not lm:
            return INVALID, ["--lmeval: the study has no lm-eval verdicts (add an lm_eval: section and rerun it)"]
        checked += [(v.variant, f"lm-eval {v.task} {v.metric}", v) for v in lm]
    lines = [f"{v.verdict:<13} {variant} {label}: delta {v.delta:+.4f} [{v.ci_low:+.4f}, {v.ci_high:+.4f}], "
             f"margin {v.margin:.4f}, n {v.n}" for variant, label, v in checked]
    verdicts = {v.verdict for _, _, v in checked}
    if "regression" in verdicts:
        return REGRESSION, lines
    if "inconclusive" in verdicts:
        return INCONCLUSIVE, lines
    return PASS, lines
