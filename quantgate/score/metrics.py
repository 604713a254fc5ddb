"""The metric registry. Each metric knows its direction and range, what it needs (truth text or
checks), its worst value, which empty or missing predictions get (counted, never dropped), and its
declared non-inferiority margin with the reason for it (docs/statistics.md)."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from quantgate.errors import InputError
from quantgate.score.normalize import DEFAULT, Normalization
from quantgate.score.tokenize import words


@dataclass(frozen=True)
class Metric:
    name: str
    higher_is_better: bool
    range: tuple[float, float | None]  # None: unbounded above
    needs: str  # "truth" | "checks"
    worst: float
    fn: Callable[..., float | None]
    doc: str
    margin: float  # default margin, in the metric's units, for the mean over pages
    margin_why: str  # one line: what a shift of one margin means on a page

    @property
    def margin_ceiling(self) -> float:
        """Margins at or above this are refused: the metric's whole range (1 for unbounded rates,
        where 1 is one error per truth unit)."""
        lo, hi = self.range
        return 1.0 if hi is None else hi - lo


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


def check_margin(metric: str, margin, *, where: str = "margin") -> float:
    """A margin is a finite number > 0 and below the metric's range (metrics outside the registry,
    e.g. lm-eval's, only the first two). Raises InputError naming ``where``."""
    if isinstance(margin, bool) or not isinstance(margin, (int, float)):
        raise InputError(f"{where}: {margin!r} is not a number; give the margin in {metric}'s units, e.g. 0.01")
    m = float(margin)
    if not math.isfinite(m) or m <= 0:
        raise InputError(f"{where}: {margin} is not a usable margin for {metric}: it must be a finite number > 0 "
                         "(exact equality is its own mode: compare --exact)")
    if metric in REGISTRY and m >= REGISTRY[metric].margin_ceiling:
        raise InputError(f"{where}: {margin} is not below {metric}'s range ({REGISTRY[metric].margin_ceiling:g}): "
                         f"every candidate would pass; the default is {REGISTRY[metric].margin:g}")
    return m


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

    p, t = words(norm(pred)), words(norm(truth))
    return Levenshtein.distance(p, t) / max(len(t), 1)


def _bow_f1(pred: str, truth: str, norm: Normalization = Normalization(strip_markdown=True)) -> float:
    p, t = Counter(words(norm(pred))), Counter(words(norm(truth)))
    if not p and not t:
        return 1.0
    common = sum((p & t).values())
    if common == 0:
        return 0.0
    prec, rec = common / sum(p.values()), common / sum(t.values())
    return 2 * prec * rec / (prec + rec)


def _table_teds(pred: str, truth: str) -> float | None:
    from quantgate.score.tables import table_teds

    return table_teds(pred, truth)


def _checks(pred: str, checks: list[dict]) -> float | None:
    from quantgate.score.olmocr_checks import checks_pass_rate

    return checks_pass_rate(checks, pred)[0] if checks else None


register(Metric("ned", False, (0.0, 1.0), "truth", 1.0, _ned,
                "normalized Levenshtein distance: edits / max(len(pred), len(truth)), after NFKC + whitespace folding",
                0.01, "one character in a hundred"))
register(Metric("cer", False, (0.0, None), "truth", 1.0, _cer, "character error rate: edits / len(truth)",
                0.01, "one character error per hundred truth characters"))
register(Metric("wer", False, (0.0, None), "truth", 1.0, _wer, "word error rate: word edits / words in truth (a CJK, kana or Thai character is a word)",
                0.02, "one word in fifty (one wrong character already costs its whole word)"))
register(Metric("bow_f1", True, (0.0, 1.0), "truth", 0.0, _bow_f1,
                "bag-of-words F1 after markdown stripping: content regardless of order (words as wer counts them)",
                0.01, "about one word in a hundred missing or extra"))
register(Metric("table_teds", True, (0.0, 1.0), "truth", 0.0, _table_teds,
                "tree-edit-distance similarity of tables (pages whose truth has tables)",
                0.02, "about one wrong cell in a 7 x 7 table (one node of ~57)"))
register(Metric("checks", True, (0.0, 1.0), "checks", 0.0, _checks,
                "pass rate of olmOCR-bench checks as upstream scores them (present/absent/order/table/baseline/format/"
                "footnote/math); math renders KaTeX in headless Chromium and is skipped, counted by reason, without it",
                0.02, "one failed check in fifty"))

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
