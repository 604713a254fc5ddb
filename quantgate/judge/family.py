"""A study's verdicts as one family (docs/statistics.md, "Multiplicity"): Holm's step-down adjustment of the
regression p-values over every verdict of the study, page and lm-eval ones together, made here once for the
study, its report and the gate. The pass side needs no adjustment: a gate that passes only when every verdict
passes is an intersection–union test, at level alpha as it is."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

import numpy as np

from quantgate.schema.verdict import Verdict

V = TypeVar("V", bound=Verdict)


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm (1979) step-down adjusted p-values: strong control of the family-wise error rate under
    any dependence. (Hand-written: scipy has no Holm; statsmodels would be a large dependency.)"""
    p = np.asarray(pvalues, dtype=np.float64)
    k = len(p)
    order = np.argsort(p, kind="stable")
    adj = np.minimum(1.0, np.maximum.accumulate((k - np.arange(k)) * p[order]))
    out = np.empty(k)
    out[order] = adj
    return [float(x) for x in out]


def adjust_family(verdicts: Sequence[V]) -> list[V]:
    """Each verdict with ``p_regression_holm`` set, over the whole family: calling a regression where it is at
    most alpha keeps the chance of any false regression call in the family at most alpha."""
    adj = holm([v.p_regression for v in verdicts]) if verdicts else []
    return [v.model_copy(update={"p_regression_holm": a}) for v, a in zip(verdicts, adj, strict=True)]


def confirmed(v: Verdict) -> bool:
    """A regression that stays one after Holm's adjustment (the verdict itself must be a regression: too few
    pages or a noisy baseline never become one). ``v`` must come from :func:`adjust_family`."""
    return v.verdict == "regression" and v.p_regression_holm is not None and v.p_regression_holm <= v.alpha
