"""The per-unit numbers a score row keeps for the whole-set headlines that are not means over pages
(``schema.scores.Units``), so the report gives them exactly from the bound score files instead of re-scoring
outputs (the report is a stage of its own and cannot import the scorers):

- OmniDocBench's table TEDS (v1.0 and v1.5): upstream averages over tables, so a page keeps its TEDS sum and its
  table count (the tables its family's ``score_page`` scored: ``PageScore.tables``);
- OmniDocBench v1.5's formula CDM, where ``omnidoc15_formula_cdm`` is scored: upstream averages over formulas, so a
  page with display formulas keeps its CDM sum and formula count (the row's own metric key, null on a page without
  one, is what tells the report that CDM was scored);
- ParseBench: every number of upstream's leaderboard (``parsebench.leaderboard``: each dimension's headline and
  each rule type's pass rate), each the page's own value as one unit, since upstream averages those over pages.
  They are read off the leaderboard of the page alone, so a dimension added to ``leaderboard.DIMENSIONS`` is kept
  (and reported) with no change here.

Each number comes from the family's own function on the same text and truth as the row's metric values; the
OmniDocBench page scores are the ones the metrics just computed (their caches)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from quantgate.schema.scores import Units
from quantgate.scoring.metrics import Metric

# family → its table-TEDS metric, whose headline averages over tables
TABLE_TEDS = {"omnidoc": "omnidoc_table_teds", "omnidoc15": "omnidoc15_table_teds"}


def _omnidoc(family: str, text: str, truth: str) -> dict[str, tuple[float, float]]:
    from quantgate.scoring.omnidoc import adapter, v15

    scores = (adapter if family == "omnidoc" else v15)._scores(text, truth)
    tables = scores.tables.get(TABLE_TEDS[family], [])
    return {TABLE_TEDS[family]: (sum(tables), len(tables))} if tables else {}


def _parsebench(rules: list[dict], text: str | None, names: set[str]) -> dict[str, tuple[float, float]]:
    """The page's leaderboard numbers of the dimensions whose metric is scored (``names``)."""
    from quantgate.scoring.parsebench.dataset import typed_rules
    from quantgate.scoring.parsebench.leaderboard import DIMENSIONS, leaderboard

    wanted = {family: name for family, (name, metric, *_) in DIMENSIONS.items() if metric in names}
    # only the scored dimensions' rules are run (a dimension reads only its own rules, so none of its numbers moves)
    board = leaderboard([([r for r in rules if any(typed_rules([r], f) for f in wanted)], text)])
    heads = {name: (v, 1) for name in wanted.values() if (v := board.headlines.get(name)) is not None}
    # the chart dimension's headline is its one rule type's pass rate: kept once, as the leaderboard prints it
    return heads | {f"rule_{kind}_pass_rate": (v, 1) for kind, v in board.rule_pass_rates.items()
                    if f"rule_{kind}_pass_rate" not in heads}


def page_units(metrics: Sequence[Metric], text: str | None, omnidoc_truth: str | None,
               parsebench: list[dict] | None) -> Units:
    """The page's units for each family among ``metrics`` it has truth for (``text``: the output, None when there
    is none; a missing output is scored as upstream scores a blank one, as ``quantgate score``'s whole-set values
    do). A family scored on the page is keyed even when it keeps nothing (a page without tables): the report then
    knows the row was written by a version that keeps units, and reads no units as none, not as unknown."""
    families = {m.spec.family for m in metrics}
    names = {m.name for m in metrics}
    units: Units = {}
    for family, teds in TABLE_TEDS.items():
        if family in families and omnidoc_truth is not None:
            units[family] = _omnidoc(family, text or "", omnidoc_truth) if teds in names else {}
    if "omnidoc15" in families and omnidoc_truth is not None:
        from quantgate.scoring.omnidoc.v15 import CDM, page_cdm

        if CDM in names:
            values = page_cdm(text or "", omnidoc_truth)[0]  # the metric's own rendering (cached), never a second
            if values:
                units.setdefault("omnidoc15", {})[CDM] = (sum(values), len(values))
    if "parsebench" in families and parsebench:
        units["parsebench"] = _parsebench(parsebench, text, names)
    return units


def repeats_units(each: Iterable[Units]) -> Units:
    """A page scored on several outputs (repeats): each number's sum and units the means over the repeats that
    carry it, as the row's metric values are the means over the repeats."""
    from statistics import fmean

    gathered: dict[str, dict[str, list[tuple[float, float]]]] = {}
    for units in each:
        for family, heads in units.items():
            kept = gathered.setdefault(family, {})  # a family keyed with nothing stays keyed (page_units)
            for name, pair in heads.items():
                kept.setdefault(name, []).append(pair)
    return {family: {name: (fmean(p[0] for p in pairs), fmean(p[1] for p in pairs)) for name, pairs in heads.items()}
            for family, heads in gathered.items()}
