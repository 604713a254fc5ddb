"""The metric registry: each metric's implementation, bound by ``@metric(name)`` to its spec in
``quantgate.schema.metrics`` (direction, range, declared margin), with what it needs (truth text or checks)
and its worst value, which empty or missing predictions get (counted, never dropped). The OmniDocBench family
(``needs="omnidoc"``) reads the page's block-level truth and scores an empty prediction by its own protocol."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from quantgate.errors import InputError
from quantgate.schema.metrics import FAMILIES, METRICS, MetricSpec
from quantgate.scoring.normalize import DEFAULT, Normalization
from quantgate.scoring.tokenize import words

# truth: the page's truth text; checks: its olmOCR checks; omnidoc: its OmniDocBench truth (the JSON record
# next to the truth, ``io.pageset.OMNIDOC_SUFFIX``, else the truth markdown split into blocks); parsebench: its
# ParseBench content rules (``PageRecord.parsebench``).
Needs = Literal["truth", "checks", "omnidoc", "parsebench"]


def _as_given(text: str) -> str:
    return text


@dataclass(frozen=True)
class Metric:
    spec: MetricSpec
    needs: Needs
    worst: float
    fn: Callable[..., float | None]
    # what the metric reads of a prediction: its score depends on the prediction only through reads(pred) (and
    # score_one's empty rule), so two outputs that read the same score the same on every truth — what the
    # truth-free bounds (scoring.bounds) are computed on. Default: the text as given.
    reads: Callable[[str], Any] = _as_given
    # what it needs installed: raises an InputError saying what is missing and how to install it (None: nothing).
    # parse_metric_list calls it, so asking for the metric fails before anything is served or scored
    requires: Callable[[], None] | None = None

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


def metric(name: str, *, needs: Needs, worst: float, reads: Callable[[str], Any] = _as_given,
           requires: Callable[[], None] | None = None) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register the function below as the implementation of the metric ``name`` declares in
    ``schema.metrics.METRICS``: ``(pred, truth) -> float | None`` (``None``: not applicable to the page), or
    ``(pred, checks)`` when it ``needs`` checks. ``reads``: what of the prediction it scores (``Metric.reads``)."""

    def deco(fn: Callable[..., Any]) -> Callable[..., Any]:
        if name not in METRICS:
            raise ValueError(f"metric {name!r} has no spec in quantgate.schema.metrics.METRICS")
        if name in REGISTRY:
            raise ValueError(f"metric {name!r} registered twice")
        REGISTRY[name] = Metric(METRICS[name], needs, worst, fn, reads, requires)
        return fn

    return deco


def get_metric(name: str) -> Metric:
    if name not in REGISTRY:
        raise InputError(f"unknown metric {name!r}; known: {', '.join(REGISTRY)}")
    return REGISTRY[name]


def parse_metric_list(spec: str | list[str] | None) -> list[Metric]:
    """Names (or a family's name, e.g. ``omnidoc``) → metrics; none given: every metric outside a family."""
    names = spec.split(",") if isinstance(spec, str) else (spec or [n for n, m in REGISTRY.items() if not m.spec.family])
    out: list[Metric] = []
    for n in (n.strip() for n in names):
        for name in FAMILIES.get(n, [n] if n else []):
            if get_metric(name) not in out:
                out.append(get_metric(name))
    for m in out:
        if m.requires is not None:
            m.requires()
    return out


BOW_NORM = Normalization(strip_markdown=True)  # bow_f1 scores content only


def _tables_of(text: str) -> Any:
    from quantgate.scoring.tables import extract_tables

    return extract_tables(text)


@metric("ned", needs="truth", worst=1.0, reads=DEFAULT)
def _ned(pred: str, truth: str, norm: Normalization = DEFAULT) -> float:
    from rapidfuzz.distance import Levenshtein

    return Levenshtein.normalized_distance(norm(pred), norm(truth))


@metric("cer", needs="truth", worst=1.0, reads=DEFAULT)
def _cer(pred: str, truth: str, norm: Normalization = DEFAULT) -> float:
    from rapidfuzz.distance import Levenshtein

    p, t = norm(pred), norm(truth)
    return Levenshtein.distance(p, t) / max(len(t), 1)


@metric("wer", needs="truth", worst=1.0, reads=DEFAULT)
def _wer(pred: str, truth: str, norm: Normalization = DEFAULT) -> float:
    from rapidfuzz.distance import Levenshtein

    p, t = words(norm(pred)), words(norm(truth))
    return Levenshtein.distance(p, t) / max(len(t), 1)


@metric("bow_f1", needs="truth", worst=0.0, reads=BOW_NORM)
def _bow_f1(pred: str, truth: str, norm: Normalization = BOW_NORM) -> float:
    p, t = Counter(words(norm(pred))), Counter(words(norm(truth)))
    if not p and not t:
        return 1.0
    common = sum((p & t).values())
    if common == 0:
        return 0.0
    prec, rec = common / sum(p.values()), common / sum(t.values())
    return 2 * prec * rec / (prec + rec)


@metric("table_teds", needs="truth", worst=0.0, reads=_tables_of)
def _table_teds(pred: str, truth: str) -> float | None:
    from quantgate.scoring.tables import table_teds

    return table_teds(pred, truth)


@metric("checks", needs="checks", worst=0.0)
def _checks(pred: str, checks: list[dict]) -> float | None:
    from quantgate.scoring.olmocr_checks import checks_pass_rate

    return checks_pass_rate(checks, pred)[0] if checks else None


def _register_omnidoc() -> None:
    from quantgate.scoring.omnidoc import v15
    from quantgate.scoring.omnidoc.adapter import metric_fn

    for name in FAMILIES["omnidoc"]:
        metric(name, needs="omnidoc", worst=0.0 if METRICS[name].higher_is_better else 1.0)(metric_fn(name))
    for name in FAMILIES["omnidoc15"]:  # v1.5 reads the same block-level truth
        metric(name, needs="omnidoc", worst=0.0 if METRICS[name].higher_is_better else 1.0)(v15.metric_fn(name))
    # formula CDM, by name only (schema.metrics.BY_NAME_ONLY); without XeLaTeX and Ghostscript one InputError naming
    # the packages and make setup-cdm (omnidoc15_formula_edit, the edit-distance fallback, runs anywhere)
    metric(v15.CDM, needs="omnidoc", worst=0.0, requires=_cdm_toolchain)(v15.metric_fn(v15.CDM))


def _cdm_toolchain() -> None:
    from quantgate.scoring.omnidoc.cdm_render import require_toolchain

    require_toolchain()


_register_omnidoc()


@metric("parsebench_content", needs="parsebench", worst=0.0)
def _parsebench_content(pred: str, rules: list[dict]) -> float | None:
    from quantgate.scoring.parsebench.dataset import typed_rules
    from quantgate.scoring.parsebench.page import page_score

    return page_score(typed_rules(rules, "content"), pred)


@metric("parsebench_formatting", needs="parsebench", worst=0.0)
def _parsebench_formatting(pred: str, rules: list[dict]) -> float | None:
    from quantgate.scoring.parsebench.dataset import typed_rules
    from quantgate.scoring.parsebench.formatting_page import page_score

    return page_score(typed_rules(rules, "formatting"), pred)


@metric("parsebench_charts", needs="parsebench", worst=0.0)
def _parsebench_charts(pred: str, rules: list[dict]) -> float | None:
    from quantgate.scoring.parsebench.charts import page_score
    from quantgate.scoring.parsebench.dataset import typed_rules

    return page_score(typed_rules(rules, "charts"), pred)


def _tables_read(pred: str) -> str:
    # without "<table" nothing of the output reaches the table score (upstream's own test, before any parsing);
    # with one, the text around the tables can move a title into them: the whole text is read
    from quantgate.scoring.parsebench.tables.page import has_table

    return pred if has_table(pred) else ""


@metric("parsebench_tables", needs="parsebench", worst=0.0, reads=_tables_read)
def _parsebench_tables(pred: str, rules: list[dict]) -> float | None:
    from quantgate.scoring.parsebench.dataset import typed_rules
    from quantgate.scoring.parsebench.tables.page import page_score

    return page_score(typed_rules(rules, "tables"), pred)


def is_blank(pred: str | None) -> bool:
    """An output that reads nothing (none, or only whitespace): scored the metric's worst value, not by the metric
    (the one rule; the truth-free bounds follow it), except by ``checks``, whose checks judge an empty text
    themselves (``score_one``)."""
    return pred is None or not pred.strip()


def score_one(metric: Metric, pred: str | None, truth: str | None, checks: list[dict],
              omnidoc_truth: str | None = None, parsebench: list[dict] | None = None) -> float | None:
    """None: not applicable to this page (no truth, no checks, no tables; for the OmniDocBench family,
    nothing of the metric's category in the page's truth)."""
    if metric.needs == "omnidoc":
        # The protocol scores an empty prediction itself (every truth block unmatched) and still leaves a
        # page without the category unscored, so the worst value is never substituted here.
        return None if omnidoc_truth is None else metric.fn(pred or "", omnidoc_truth)
    if metric.needs == "parsebench":
        # the page score follows upstream's evaluator for an empty text (every rule failed) and a blank one
        # (run through the rules): only a page with no output at all takes the worst value here
        if not parsebench:
            return None
        return metric.worst if pred is None else metric.fn(pred, parsebench)
    if metric.needs == "truth" and truth is None:
        return None
    if metric.needs == "checks" and not checks:
        return None
    if metric.needs == "checks" and pred is not None:
        # olmOCR-bench's checks define their own answer for an empty output (an ``absent`` or blank-page
        # ``baseline`` check passes it, the rest fail): upstream runs them on the text as given, and so do we. Only
        # a page with no output at all (missing) takes the worst value.
        return metric.fn(pred, checks)
    if is_blank(pred):
        if metric.name == "table_teds" and _table_teds("", truth or "") is None:
            return None
        return metric.worst
    return metric.fn(pred, truth) if metric.needs == "truth" else metric.fn(pred, checks)
