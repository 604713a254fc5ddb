"""What ``quantgate score`` prints: each metric's mean over the pages it applies to, with a plain percentile
bootstrap interval — a description of one run's scores, not a verdict (verdicts: ``quantgate.judge.compare``)."""

from __future__ import annotations

import numpy as np

from quantgate.judge.stats import percentile_ci
from quantgate.schema.metrics import MetricSpec
from quantgate.schema.scores import MetricSummary, ScoreRow


def summarize(rows: list[ScoreRow], metrics: list[MetricSpec], seed: int = 0) -> list[MetricSummary]:
    """Mean and 95% bootstrap interval per metric (pages where it applies)."""
    out = []
    for m in metrics:
        vals = np.array([v for r in rows if (v := r.value(m.name)) is not None], dtype=float)
        ci = None
        if len(vals):
            ci = percentile_ci(vals, 0.95, 2000, seed) if len(vals) > 1 else (float(vals[0]), float(vals[0]))
        out.append(MetricSummary(metric=m.name, direction="higher" if m.higher_is_better else "lower", n=int(len(vals)),
                                 mean=float(vals.mean()) if len(vals) else None, ci95=ci))
    return out
