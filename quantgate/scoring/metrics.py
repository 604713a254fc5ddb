"""The metric registry. Each metric knows its direction and range, what it needs (truth text or
checks) and its worst value, which empty or missing predictions get (counted, never dropped)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from quantgate.errors import InputError
from quantgate.scoring.normalize import DEFAULT, Normalization


@dataclass(frozen=True)
class Metric:
    name: str
    higher_is_better: bool
    range: tuple[float, float | None]  # None: unbounded above
    needs: str  # "truth" | "checks"
    worst: float
    fn: Callable[..., float | None]
    doc: str


REGISTRY: dict[str, Metric] = {}


def register(m: Metric) -> Metric:
    if m.name in REGISTRY:
        raise ValueError(f"metric {m.name!r} registered twice")
    REGISTRY[m.name] = m
    return m


def get_metric(name: str) -> Metric:
    if name not in REGISTRY:
        raise InputError(f"unknown metric {name!r}; known: {', '.join(REGISTRY)}")
    return REGISTRY[name]


def parse_metric_list(spec: str | list[str] | None) -> list[Metric]:
    names = spec.split(",") if isinstance(spec, str) else (spec or list(REGISTRY))
    return [get_metric(n.strip()) for n in names if n.strip()]


def _ned(pred: str, truth: str, norm: Normalization = DEFAULT) -> float:
    from rapidfuzz.distance import Levenshtein

    return Levenshtein.normalized_distance(norm(pred), norm(truth))


def _cer(pred: str, truth: str, norm: Normalization = DEFAULT) -> float:
    from rapidfuzz.distance import Levenshtein

    p, t = norm(pred), norm(truth)
    return Levenshtein.distance(p, t) / max(len(t), 1)


def _wer(pred: str, truth: str, norm: Normalization = DEFAULT) -> float:
    from rapidfuzz.distance import Levenshtein

    p, t = norm(pred).split(), norm(truth).split()
    return Levenshtein.distance(p, t) / max(len(t), 1)


def _bow_f1(pred: str, truth: str, norm: Normalization = Normalization(strip_markdown=True)) -> float:
    p, t = Counter(norm(pred).split()), Counter(norm(truth).split())
    if not p and not t:
        return 1.0
    common = sum((p & t).values())
    if common == 0:
        return 0.0
    prec, rec = common / sum(p.values()), common / sum(t.values())
    return 2 * prec * rec / (prec + rec)


def _table_teds(pred: str, truth: str) -> float | None:
    from quantgate.scoring.tables import table_teds

    return table_teds(pred, truth)


def _checks(pred: str, checks: list[dict]) -> float | None:
    from quantgate.scoring.olmocr_checks import checks_pass_rate

    return checks_pass_rate(checks, pred)[0] if checks else None


register(Metric("ned", False, (0.0, 1.0), "truth", 1.0, _ned,
                "normalized Levenshtein distance: edits / max(len(pred), len(truth)), after NFKC + whitespace folding"))
register(Metric("cer", False, (0.0, None), "truth", 1.0, _cer, "character error rate: edits / len(truth)"))
register(Metric("wer", False, (0.0, None), "truth", 1.0, _wer, "word error rate: word edits / words in truth"))
register(Metric("bow_f1", True, (0.0, 1.0), "truth", 0.0, _bow_f1,
                "bag-of-words F1 after markdown stripping: content regardless of order"))
register(Metric("table_teds", True, (0.0, 1.0), "truth", 0.0, _table_teds,
                "tree-edit-distance similarity of tables (pages whose truth has tables)"))
register(Metric("checks", True, (0.0, 1.0), "checks", 0.0, _checks,
                "pass rate of olmOCR-bench style checks (present/absent/order/table/baseline; math skipped)"))


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
