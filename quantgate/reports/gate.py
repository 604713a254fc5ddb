"""The release gate: an exit code a pipeline can trust.

0 every checked verdict passes; 1 any regression; 2 any inconclusive (none regressed);
3 the study is incomplete, or its weights changed since the verdicts were made."""

from __future__ import annotations

from pathlib import Path

from quantgate.reports.model import load_summary, rehash

PASS, REGRESSION, INCONCLUSIVE, INVALID = 0, 1, 2, 3


def gate(out: Path, metrics: list[str] | None = None, variants: list[str] | None = None) -> tuple[int, list[str]]:
    rep = load_summary(out)
    lines: list[str] = []
    changed = rehash(rep)
    if changed:
        return INVALID, [f"artifacts changed since the verdict: {c}" for c in changed]
    if not rep["complete"]:
        return INVALID, ["the study is incomplete: rerun `quantgate study` to finish it"]
    checked = [v for v in rep["verdicts"] if (not metrics or v["metric"] in metrics)
               and (not variants or v["variant"] in variants)]
    if not checked:
        return INVALID, [f"no verdict matches metrics={metrics} variants={variants}"]
    for v in checked:
        lines.append(f"{v['verdict']:<13} {v['variant']} {v['metric']}: delta {v['delta']:+.4f} "
                     f"[{v['ci_low']:+.4f}, {v['ci_high']:+.4f}], margin {v['margin']:.4f}, n {v['n']}")
    verdicts = {v["verdict"] for v in checked}
    if "regression" in verdicts:
        return REGRESSION, lines
    if "inconclusive" in verdicts:
        return INCONCLUSIVE, lines
    return PASS, lines
