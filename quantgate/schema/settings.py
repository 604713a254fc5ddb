"""The settings a verdict is made with: :class:`VerdictSettings`, its defaults and floors, and the rules a
study's YAML shares with it (``check_resamples``, ``shift_problem``, ``document_damage_problem``), each defined
here once and checked once, when the settings are made. They live apart from the verdict record
(``quantgate.schema.verdict``) because the study spec, the command line and the statistics need the settings
without the record and its sentences; docs/statistics.md says why each bound is what it is."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import model_validator

from quantgate.errors import InputError
from quantgate.schema.base import Record
from quantgate.schema.metrics import (
    METRICS,
    MarginSource,
    check_margin,
    check_setting,
    declared_margin,
    metric_spec,
)

TestName = Literal["non_inferiority", "equivalence", "exact"]

DEFAULT_RESAMPLES = 10_000
MIN_RESAMPLES = 1_000  # a 5% tail from fewer resamples rests on a few dozen values
DEFAULT_CONFIDENCE = 0.90  # coverage of [ci_low, ci_high]; each end is a one-sided 95% bound
ALPHA = round((1 - DEFAULT_CONFIDENCE) / 2, 12)  # one-sided, each end: the fixed design's 5%
DEFAULT_POWER = 0.80
MIN_PAGES = 30  # below it the skewed page model of the calibration benchmark falsely passes > 6%
# Below 30 documents the interval alone (no count rule, no bounded test) falsely passed more than 6% of
# clustered studies whose documents all shift (benchmarks/verdict_calibration_documents.py, "diagnostics").
MIN_DOCUMENTS = 30
WORSE_THRESHOLD_MARGINS = 10  # default threshold of pages_worse: ten margins (0.1 ned: ten characters in a hundred)
# A truth-free pass still needs the baseline shown to read the pages: its mean score on this many labeled pages
# in this many documents (any labeled pages, hand-picked or drawn), else the verdict is baseline_unchecked.
MIN_LABELED_PAGES = 20
MIN_LABELED_DOCUMENTS = 10
# The rectified verdict spends this share of alpha on the lower bound of the bound's excess and the rest on the
# upper bound of the mean bound (a union bound: the two errors add up to alpha; docs/statistics.md). The bound's
# bounded test is what binds (it gains about (margin − mean bound) nats a document), so it gets most: on the
# calibration's 1.1-margin null cell a share of 0.5 / 0.3 / 0.2 passed 75% / 82% / 85% of pilot studies.
RECTIFY_SHARE = 0.2
# The rectified verdict is used (decided by the design, before the data) when at least this many whole documents
# were labeled at random: from fewer, the excess's lower bound is too loose to pay for the alpha it takes, and the
# bound alone keeps the whole alpha (benchmarks/truth_free_calibration.py measures both).
MIN_RECTIFY_DOCUMENTS = 20


def _count(name: str, value: object, least: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise InputError(f"{name} {value!r}: must be an integer >= {least}")
    return value


def _fraction(name: str, value: object, lo: float, hi: float) -> float:
    """A number in [lo, hi)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not lo <= value < hi:
        raise InputError(f"{name} {value!r}: must be a number in [{lo:g}, {hi:g})")
    return float(value)


def check_resamples(value: object) -> int:
    """The one rule on the number of resamples (the study YAML and every verdict use it)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < MIN_RESAMPLES:
        raise InputError(f"resamples {value!r}: must be an integer >= {MIN_RESAMPLES} (a 5% tail needs at least "
                         f"~1,000 resamples; the default is {DEFAULT_RESAMPLES})")
    return value


def shift_problem(shift: object, margin: float) -> str | None:
    """The rule on a declared ``expected_shift`` (the study's YAML and every verdict use it); None: nothing wrong."""
    if isinstance(shift, bool) or not isinstance(shift, (int, float)) or not 0 <= shift < margin:
        return (f"{shift!r} must be >= 0 (how much worse the candidate may truly be) and below the margin {margin:g} "
                "(no study passes a candidate a whole margin worse)")
    return None


def document_damage_problem(document: float, page: float) -> str | None:
    """The rule relating the two declared damages (the study's YAML and every verdict use it)."""
    if document > page:
        return (f"{document:g} is above the worst page damage {page:g}; a document's mean damage cannot exceed its "
                "worst page's")
    return None


class VerdictSettings(Record):
    """Every setting a verdict is made with, in one record: the metric, its direction and margin, the test,
    the resampling, the document-level rules and the truth-free ones. Checked once, when it is made (a study's
    YAML, the command line, ``quantgate.compare_outputs``), and passed whole through ``quantgate.judge``.
    ``margin`` and ``higher_is_better`` left out (or None) take the metric registry's; ``baseline_floor`` None
    takes the registry's floor (metrics outside it have none); ``worse_threshold`` None is ten margins."""

    metric: str
    higher_is_better: bool
    margin: float
    margin_source: MarginSource = "given"
    test: TestName = "non_inferiority"
    seed: int = 0
    n_resamples: int = DEFAULT_RESAMPLES
    confidence: float = DEFAULT_CONFIDENCE
    min_pages: int = MIN_PAGES
    min_documents: int = MIN_DOCUMENTS
    power: float = DEFAULT_POWER
    worst_page_damage: float | None = None  # None: the metric's default (its range)
    worst_document_damage: float | None = None
    baseline_floor: float | None = None
    expected_shift: float = 0.0  # planning alternative: how much worse (metric units, >= 0) the candidate may be
    worse_threshold: float | None = None  # pages_worse counts pages worse by more (default ten margins)
    min_labeled_pages: int = MIN_LABELED_PAGES
    min_labeled_documents: int = MIN_LABELED_DOCUMENTS
    rectify_share: float = RECTIFY_SHARE
    min_rectify_documents: int = MIN_RECTIFY_DOCUMENTS

    @property
    def alpha(self) -> float:
        """Each end of the interval is a one-sided test at this level."""
        return (1 - self.confidence) / 2

    @property
    def equivalence(self) -> bool:
        return self.test == "equivalence"

    @model_validator(mode="before")
    @classmethod
    def _checked(cls, obj: Any) -> Any:
        """Every number checked here, once, before any page is resampled (InputError: one line for the user)."""
        if not isinstance(obj, dict):
            return obj
        data = dict(obj)
        metric = data.get("metric")
        if not isinstance(metric, str) or not metric:
            raise InputError(f"metric {metric!r}: give the metric's name, e.g. 'ned'")
        if "margin_source" in data and data.get("margin") is not None:  # a record read back: already resolved
            value, source = check_margin(metric, data["margin"], where=f"margin for {metric}"), data["margin_source"]
        else:
            value, source = declared_margin(metric, data.get("margin"))
        data["margin"], data["margin_source"] = value, source
        if data.get("higher_is_better") is None:
            data["higher_is_better"] = metric_spec(metric).higher_is_better
        _count("seed", data.get("seed", 0), 0)
        check_resamples(data.get("n_resamples", DEFAULT_RESAMPLES))
        confidence = data.get("confidence", DEFAULT_CONFIDENCE)
        if not (isinstance(confidence, float) and 0.5 <= confidence < 1):
            raise InputError(f"confidence {confidence!r}: must be in [0.5, 1)")
        for name, default in (("min_pages", MIN_PAGES), ("min_documents", MIN_DOCUMENTS)):
            _count(name, data.get(name, default), 2)
        _count("min_labeled_pages", data.get("min_labeled_pages", MIN_LABELED_PAGES), 1)
        _count("min_labeled_documents", data.get("min_labeled_documents", MIN_LABELED_DOCUMENTS), 1)
        _count("min_rectify_documents", data.get("min_rectify_documents", MIN_RECTIFY_DOCUMENTS), 2)
        _fraction("power", data.get("power", DEFAULT_POWER), 0.5, 1.0)
        share = data.get("rectify_share", RECTIFY_SHARE)
        if _fraction("rectify_share", share, 0.0, 1.0) <= 0:
            raise InputError(f"rectify_share {share!r}: must be in (0, 1), the share of alpha spent on the excess")
        D = check_setting(metric, "worst_page_damage", data.get("worst_page_damage"), value)
        Dd = check_setting(metric, "worst_document_damage", data.get("worst_document_damage"), value)
        problem = None if D is None or Dd is None else document_damage_problem(Dd, D)
        if problem:
            raise InputError(f"worst_document_damage for {metric}: {problem}")
        floor = check_setting(metric, "baseline_floor", data.get("baseline_floor"), value)
        if floor is None and metric in METRICS:
            floor = METRICS[metric].baseline_floor
        shift = data.get("expected_shift", 0.0)
        problem = shift_problem(shift, value)
        if problem:
            raise InputError(f"expected_shift for {metric}: {problem}")
        worse = data.get("worse_threshold")
        if worse is not None and not (isinstance(worse, (int, float)) and not isinstance(worse, bool) and worse > 0):
            raise InputError(f"worse_threshold for {metric}: {worse!r} must be a number > 0")
        data.update(worst_page_damage=D, worst_document_damage=Dd, baseline_floor=floor, expected_shift=float(shift),
                    worse_threshold=WORSE_THRESHOLD_MARGINS * value if worse is None else float(worse))
        return data
