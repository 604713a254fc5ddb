"""What a page metric is, apart from how it is computed: its name, direction, range and declared
non-inferiority margin with the reason for it (docs/statistics.md). The implementations are
``quantgate.scoring.metrics``; everything that judges a metric — a study's margins when its YAML is read,
``compare``, the gate — reads the spec from here, so a margin is checked by one rule and defaults in one place."""

from __future__ import annotations

import math
from typing import Literal

from pydantic import BaseModel, ConfigDict, model_validator

from quantgate.errors import InputError

MarginSource = Literal["registry", "given"]
# How a page's damage on the metric is bounded from the baseline's and the candidate's outputs alone, with no
# truth (each kind is proved in ``quantgate.scoring.bounds``, docs/metrics.md "Truth-free bounds"):
#   ned             min(1, (ED + max(0, |b| - |c|)) / max(|b|, |c|)) on the normalized texts, at most 2·ned(b, c)
#   char_edit_rate  min(1, 2·ED / (|b| + ED)) on normalized characters (the rate clipped at 1, as judged)
#   word_edit_rate  the same on the metric's words
#   bag_f1          x / (|B ∩ C| + x), x = |B − C| + max(|B − C|, |C − B|), on the bags of words
#   range_if_changed  the metric's range when what it reads of the outputs differs, 0 when it is identical
#   none            no bound: the metric needs more than the truth's text (checks: the page's checks)
# Every metric declares one, so a metric added later cannot be judged truth-free until its bound is stated.
BoundKind = Literal["ned", "char_edit_rate", "word_edit_rate", "bag_f1", "range_if_changed", "none"]


class MetricSpec(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    higher_is_better: bool
    range: tuple[float, float | None]  # None: unbounded above
    doc: str
    margin: float  # default margin, in the metric's units, for the mean over pages
    margin_why: str  # one line: what a shift of one margin means on a page
    bound: BoundKind  # its truth-free damage bound (BoundKind above); no default, so every metric states one
    # A family is scored only when asked for (``--metrics omnidoc`` or by name), not by default: its metrics
    # need block-level truth and a page without the category is not scored on them (docs/metrics.md).
    family: str | None = None
    # the worst damage one page can take, for the rare-failure rule (docs/statistics.md, "Rare
    # failures"); None: the whole range (margin_ceiling: 1 for ned/checks, an output that reads nothing; cer/wer
    # are clipped to [0, 1] for the verdict, so 1 for them too)
    worst_page_damage: float | None = None
    # the baseline's own mean score past which it cannot read the pages and every verdict is vacuous (reason
    # baseline_unfit): past 0.5 at least half the text (ned, cer, wer, bow_f1, table_teds) or,
    # below 0.2, four checks in five (checks) are wrong, so "as good as the baseline" says nothing
    baseline_floor: float | None = None

    @property
    def margin_ceiling(self) -> float:
        """Margins at or above this are refused: the metric's whole range (1 for unbounded rates,
        where 1 is one error per truth unit)."""
        lo, hi = self.range
        return 1.0 if hi is None else hi - lo

    @property
    def damage(self) -> float:
        """The worst page damage the rare-failure rule assumes unless a study or flag declares a smaller one."""
        return self.margin_ceiling if self.worst_page_damage is None else self.worst_page_damage

    @property
    def clipped(self) -> bool:
        """Unbounded rates (cer, wer) are judged on min(score, 1): one page cannot outweigh the rest unboundedly."""
        return self.range[1] is None

    @model_validator(mode="after")
    def _defaults_in_range(self):
        for field in ("worst_page_damage", "baseline_floor"):
            problem = setting_problem(self, field, getattr(self, field), self.margin)
            if problem:
                raise ValueError(f"metric {self.name}: {field}: {problem}")
        return self


def _not_finite(value: object, name: str) -> str | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return f"{value!r} is not a finite number; give it in {name}'s units"
    return None


def damage_problem(value: object, margin: float, ceiling: float | None, name: str) -> str | None:
    """The one rule on a declared worst page (or document) damage on metric ``name``: a finite number above the
    margin — a page damaged by at most the margin cannot move the mean past it — and at most ``ceiling``, the
    metric's range (None: a metric outside the registry, whose range is not known); None: nothing wrong."""
    problem = _not_finite(value, name)
    if problem:
        return problem
    v = float(value)  # type: ignore[arg-type]  # a number: _not_finite said so
    if ceiling is None:
        return None if v > margin else f"{value!r} must be a finite number above the margin {margin:g}"
    if not margin < v <= ceiling:
        return (f"{v:g} must be above the margin {margin:g} and at most {name}'s range {ceiling:g} (the "
                "damage of a page that reads nothing)")
    return None


def setting_problem(spec: MetricSpec, field: str, value: object, margin: float) -> str | None:
    """What is wrong with a declared ``worst_page_damage``/``worst_document_damage`` (:func:`damage_problem`) or
    ``baseline_floor`` (within the metric's range) for ``spec``; None: nothing."""
    if value is None:
        return None
    if field != "baseline_floor":
        return damage_problem(value, margin, spec.margin_ceiling, spec.name)
    problem = _not_finite(value, spec.name)
    if problem:
        return problem
    v, (lo, hi) = float(value), spec.range  # type: ignore[arg-type]  # a number: _not_finite said so
    if v < lo or (hi is not None and v > hi):
        return f"{v:g} is outside {spec.name}'s range [{lo:g}, {'inf' if hi is None else f'{hi:g}'}]"
    return None


def check_setting(metric: str, field: str, value: float | None, margin: float, *, where: str | None = None
                  ) -> float | None:
    """A declared per-metric setting as a float (None stays None), or InputError naming ``where`` (default: the
    field and metric). Metrics outside the registry take any finite damage above the margin and no floor."""
    if value is None:
        return None
    where = where or f"{field} for {metric}"
    if metric not in METRICS:
        if field == "baseline_floor":
            raise InputError(f"{where}: {metric!r} is not in quantgate's registry, so it has no range to judge a "
                             "baseline floor against; leave it out")
        problem = damage_problem(value, margin, None, metric)
        if problem:
            raise InputError(f"{where}: {problem}")
        return float(value)
    problem = setting_problem(METRICS[metric], field, value, margin)
    if problem:
        raise InputError(f"{where}: {problem}")
    return float(value)


METRICS: dict[str, MetricSpec] = {s.name: s for s in (
    MetricSpec(name="ned", bound="ned", baseline_floor=0.5, higher_is_better=False, range=(0.0, 1.0), margin=0.01, margin_why="one character in a hundred",
               doc="normalized Levenshtein distance: edits / max(len(pred), len(truth)), after NFKC + whitespace folding"),
    MetricSpec(name="cer", bound="char_edit_rate", baseline_floor=0.5, higher_is_better=False, range=(0.0, None), margin=0.01,
               margin_why="one character error per hundred truth characters", doc="character error rate: edits / len(truth)"),
    MetricSpec(name="wer", bound="word_edit_rate", baseline_floor=0.5, higher_is_better=False, range=(0.0, None), margin=0.02,
               margin_why="one word in fifty (one wrong character already costs its whole word)",
               doc="word error rate: word edits / words in truth (a CJK, kana or Thai character is a word)"),
    MetricSpec(name="bow_f1", bound="bag_f1", baseline_floor=0.5, higher_is_better=True, range=(0.0, 1.0), margin=0.01,
               margin_why="about one word in a hundred missing or extra",
               doc="bag-of-words F1 after markdown stripping: content regardless of order (words as wer counts them)"),
    MetricSpec(name="table_teds", bound="range_if_changed", baseline_floor=0.5, higher_is_better=True, range=(0.0, 1.0), margin=0.02,
               margin_why="about one wrong cell in a 7 x 7 table (one node of ~57)",
               doc="tree-edit-distance similarity of tables (pages whose truth has tables)"),
    MetricSpec(name="checks", bound="none", baseline_floor=0.2, higher_is_better=True, range=(0.0, 1.0), margin=0.02, margin_why="one failed check in fifty",
               doc="pass rate of olmOCR-bench checks as upstream scores them (present/absent/order/table/baseline/format/"
                   "footnote/math); math renders KaTeX in headless Chromium and is skipped, counted by reason, without it"),
    *(MetricSpec(name=n, bound="range_if_changed", higher_is_better=hib, range=(0.0, 1.0), margin=m, margin_why=why, doc=doc, family="omnidoc")
      for n, hib, m, why, doc in (
        ("omnidoc_text_edit", False, 0.01, "one character in a hundred of the page's matched text blocks",
         "OmniDocBench text-block edit distance (quick_match; letters, digits and CJK only); pages with text truth"),
        ("omnidoc_formula_edit", False, 0.02,
         "one LaTeX token character in fifty (normalised LaTeX varies more than text between equal renderings)",
         "OmniDocBench display-formula edit distance on normalised LaTeX; pages whose truth has display formulas"),
        ("omnidoc_table_teds", True, 0.02, "about one wrong cell in a 7 x 7 table (one node of ~57)",
         "OmniDocBench table TEDS (structure and cell text), the page's mean over its truth tables"),
        ("omnidoc_table_teds_struct", True, 0.02, "about one misplaced cell in a 7 x 7 table",
         "OmniDocBench table TEDS, structure only, the page's mean over its truth tables"),
        ("omnidoc_table_edit", False, 0.02, "one character in fifty of the page's normalised table HTML",
         "OmniDocBench table edit distance on normalised HTML; pages whose truth has tables"),
        ("omnidoc_reading_order_edit", False, 0.02,
         "one swap of two blocks on one page in five, on pages of about twenty blocks",
         "OmniDocBench reading-order edit distance over the matched text blocks' truth order"),
    )),
    # OmniDocBench v1.5 (hybrid matching; docs/metrics.md): the same margins as v1.0's, for the same reasons
    *(MetricSpec(name=n, bound="range_if_changed", higher_is_better=hib, range=(0.0, 1.0), margin=m, margin_why=why, doc=doc,
                 family="omnidoc15")
      for n, hib, m, why, doc in (
        ("omnidoc15_text_edit", False, 0.01, "one character in a hundred of the page's matched text blocks",
         "OmniDocBench v1.5 text edit distance (hybrid matching: a formula matched to text is scored as text)"),
        ("omnidoc15_formula_edit", False, 0.02,
         "one LaTeX token character in fifty (normalised LaTeX varies more than text between equal renderings)",
         "OmniDocBench v1.5 display-formula edit distance: the edit-distance fallback, not CDM (no LaTeX here)"),
        ("omnidoc15_table_teds", True, 0.02, "about one wrong cell in a 7 x 7 table (one node of ~57)",
         "OmniDocBench v1.5 table TEDS, the page's mean over its truth tables (a LaTeX table scores 0)"),
        ("omnidoc15_reading_order", False, 0.02,
         "one swap of two blocks on one page in five, on pages of about twenty blocks",
         "OmniDocBench v1.5 reading-order edit distance over the matched text blocks' truth order"),
        # CDM is a formula's token F1 (2·matched / (truth tokens + predicted tokens)): one token more or one fewer
        # in a formula of n tokens costs 1/(2n ± 1), 0.02 at n = 25 (docs/metrics.md)
        ("omnidoc15_formula_cdm", True, 0.02,
         "one token more or one fewer in every display formula of about 25 tokens",
         "OmniDocBench v1.5 display-formula CDM (rendered with XeLaTeX, tokens matched by their boxes), the page's "
         "mean over its formulas; needs make setup-cdm"),
    )),
    # a rule score has no proven truth-free bound: a changed output may move it anywhere in [0, 1]
    MetricSpec(name="parsebench_content", bound="range_if_changed", higher_is_better=True, range=(0.0, 1.0), margin=0.02,
               margin_why="one word in fifty lost from a page whose only rules are its missing-word bag",
               doc="ParseBench content faithfulness as upstream scores a page: (text correctness + order / 2) / 1.5 "
                   "over the page's word/sentence/digit-bag and order rules (pages imported with --parsebench)",
               family="parsebench"),
    MetricSpec(name="parsebench_formatting", bound="range_if_changed", higher_is_better=True, range=(0.0, 1.0),
               margin=0.02, margin_why="one page in fifty losing all its formatting (bold, titles, LaTeX, code)",
               doc="ParseBench semantic formatting as upstream scores a page: (text styling F0.5 + title accuracy + "
                   "(LaTeX + code blocks) / 5) / weights present, over the page's formatting rules (--parsebench)",
               family="parsebench"),
    MetricSpec(name="parsebench_charts", bound="range_if_changed", higher_is_better=True, range=(0.0, 1.0),
               margin=0.02, margin_why="one data point in fifty lost from the charts read into tables",
               doc="ParseBench chart data points as upstream scores a page: the pass rate of its chart_data_point "
                   "rules (a value in a table cell with its labels in its row, column, headers or title)",
               family="parsebench"),
    MetricSpec(name="parsebench_tables", bound="range_if_changed", higher_is_better=True, range=(0.0, 1.0),
               margin=0.02, margin_why="one cell in fifty of every table read wrong (GriTS-Con and the record match "
                                       "each lose about that), or one page in fifty losing its tables",
               doc="ParseBench tables as upstream scores a page (GTRM): 0.5 GriTS-Con + 0.5 TableRecordMatch over "
                   "its truth tables, GriTS-Con alone where the page says the record match does not apply",
               family="parsebench"),
)}

# Metrics a family's name does not expand to: asked for by name only. Formula CDM needs a LaTeX toolchain (an
# InputError without it) and renders each formula (~1 s), so ``--metrics omnidoc15`` stays cheap and runs anywhere.
BY_NAME_ONLY = frozenset({"omnidoc15_formula_cdm"})
FAMILIES: dict[str, list[str]] = {}
for _spec in METRICS.values():
    if _spec.family and _spec.name not in BY_NAME_ONLY:
        FAMILIES.setdefault(_spec.family, []).append(_spec.name)


def omnidoc15_overall(text_edit: float | None, table_teds: float | None, formula_cdm: float | None) -> float | None:
    """OmniDocBench v1.5's headline on its 0-100 scale, ((1 − text edit)·100 + table TEDS·100 + formula CDM·100) / 3,
    from the set's values (text edit: the page mean; TEDS: over tables; CDM: over formulas); None where a part has
    none. Here, below the scorer and the report, so ``quantgate score`` and the report compute it by one rule."""
    if text_edit is None or table_teds is None or formula_cdm is None:
        return None
    return ((1 - text_edit) * 100 + table_teds * 100 + formula_cdm * 100) / 3


def metric_spec(name: str) -> MetricSpec:
    if name not in METRICS:
        raise InputError(f"unknown metric {name!r}; known: {', '.join(METRICS)}")
    return METRICS[name]


def margin_problem(metric: str, margin: object) -> str | None:
    """What is wrong with ``margin`` for ``metric`` (None: nothing). A margin is a finite number > 0 and
    below the metric's range (metrics outside the registry, e.g. lm-eval's, only the first two)."""
    if isinstance(margin, bool) or not isinstance(margin, (int, float)):
        return f"{margin!r} is not a number; give the margin in {metric}'s units, e.g. 0.01"
    m = float(margin)
    if not math.isfinite(m) or m <= 0:
        return (f"{margin} is not a usable margin for {metric}: it must be a finite number > 0 (exact equality is its "
                "own mode: compare --exact)")
    if metric in METRICS and m >= METRICS[metric].margin_ceiling:
        return (f"{margin} is not below {metric}'s range ({METRICS[metric].margin_ceiling:g}): every candidate would "
                f"pass; the default is {METRICS[metric].margin:g}")
    return None


def check_margin(metric: str, margin: object, *, where: str = "margin") -> float:
    """``margin`` as a float, or InputError naming ``where`` (:func:`margin_problem` is the rule)."""
    problem = margin_problem(metric, margin)
    if problem:
        raise InputError(f"{where}: {problem}")
    return float(margin)  # type: ignore[arg-type]  # a number: margin_problem said so


def declared_margin(metric: str, given: float | None) -> tuple[float, MarginSource]:
    """The margin a verdict on ``metric`` uses — ``given``, else the registry's default — and where it came
    from; the one place a default margin is looked up."""
    if given is not None:
        return check_margin(metric, given, where=f"margin for {metric}"), "given"
    if metric not in METRICS:
        raise InputError(f"metric {metric!r} is not in quantgate's registry, so it has no default margin: "
                         "give one in its units")
    return METRICS[metric].margin, "registry"
