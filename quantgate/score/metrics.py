"""The metric registry: each metric's implementation, bound by ``@metric(name)`` to its spec in
``quantgate.schema.metrics`` (direction, range, declared margin), with what it needs (truth text or checks)
and its worst value, which empty or missing predictions get (counted, never dropped)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from quantgate.errors import InputError
from quantgate.schema.metrics import METRICS, MetricSpec
from quantgate.score.normalize import DEFAULT, Normalization
from quantgate.score.tokenize import words


@dataclass(frozen=True)
class Metric:
    spec: MetricSpec
    needs: Literal["truth", "checks"]
    worst: float
    fn: Callable[..., float | None]

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def higher_is_better(self) -> bool:
        return self.spec.higher_is_better

    @property
    def margin(self) -> float:
        return self.spec.margin

    @property
    def doc(self) -> str:
        return self.spec.doc


REGISTRY: dict[str, Metric] = {}


def metric(name: str, *, needs: Literal["truth", "checks"], worst: float) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register the function below as the implementation of the metric ``name`` declares in
    ``schema.metrics.METRICS``: ``(pred, truth) -> float | None`` (``None``: not applicable to the page), or
    ``(pred, checks)`` when it ``needs`` checks."""

    def deco(fn: Callable[..., Any]) -> Callable[..., Any]:
        if name not in METRICS:
            raise ValueError(f"metric {name!r} has no spec in quantgate.schema.metrics.METRICS")
        if name in REGISTRY:
            raise ValueError(f"metric {name!r} registered twice")
        REGISTRY[name] = Metric(METRICS[name], needs, worst, fn)
        return fn

    return deco


def get_metric(name: str) -> Metric:
    if name not in REGISTRY:
        raise InputError(f"unknown metric {name!r}; known: {', '.join(REGISTRY)}")
    return REGISTRY[name]


def parse_metric_list(spec: str | list[str] | None) -> list[Metric]:
    names = spec.split(",") if isinstance(spec, str) else (spec or list(REGISTRY))
    return [get_metric(n.strip()) for n in names if n.strip()]


@metric("ned", needs="truth", worst=1.0)
def _ned(pred: str, truth: str, norm: Normalization = DEFAULT) -> float:
    from rapidfuzz.distance import Levenshtein

    return Levenshtein.normalized_distance(norm(pred), norm(truth))


@metric("cer", needs="truth", worst=1.0)
def _cer(pred: str, truth: str, norm: Normalization = DEFAULT) -> float:
    from rapidfuzz.distance import Levenshtein

    p, t = norm(pred), norm(truth)
    return Levenshtein.distance(p, t) / max(len(t), 1)


@metric("wer", needs="truth", worst=1.0)
def _wer(pred: str, truth: str, norm: Normalization = DEFAULT) -> float:
    from rapidfuzz.distance import Levenshtein

    p, t = words(norm(pred)), words(norm(truth))
    return Levenshtein.distance(p, t) / max(len(t), 1)


@metric("bow_f1", needs="truth", worst=0.0)
def _bow_f1(pred: str, truth: str, norm: Normalization = Normalization(strip_markdown=True)) -> float:
    p, t = Counter(words(norm(pred))), Counter(words(norm(truth)))
    if not p and not t:
        return 1.0
    common = sum((p & t).values())
    if common == 0:
        return 0.0
    prec, rec = common / sum(p.values()), common / sum(t.values())
    return 2 * prec * rec / (prec + rec)


@metric("table_teds", needs="truth", worst=0.0)
def _table_teds(pred: str, truth: str) -> float | None:
    from quantgate.score.tables import table_teds

    return table_teds(pred, truth)


@metric("checks", needs="checks", worst=0.0)
def _checks(pred: str, checks: list[dict]) -> float | None:
    from quantgate.score.olmocr_checks import checks_pass_rate

    return checks_pass_rate(checks, pred)[0] if checks else None


def score_one(metric: Metric, pred: str | None, truth: str | None, checks: list[dict]) -> float | None:
    """None: not applicable to this page (no truth, no checks, no tables)."""
    if metric.needs == "truth" and truth is None:
        return None
    if metric.needs == "checks" and not checks:
        return None
    if pred is None or not pred.strip():
        if metric.name == "table_teds" and _table_teds("", truth or "") is None:
            return None
        return metric.worst
    return metric.fn(pred, truth) if metric.needs == "truth" else metric.fn(pred, checks)
