"""ParseBench's leaderboard numbers for one system's outputs on a page set, as upstream's runner aggregates its
evaluator's per-page metrics (``evaluation/runner.py``, ``avg_<metric>``: the mean over the pages that report the
metric):

- each dimension's headline, the mean of its page scores over the pages that have one (``content_faithfulness``,
  ``semantic_formatting``, ``rule_chart_data_point_pass_rate``, ``grits_trm_composite`` for tables);
- each rule type's pass rate, the mean over the pages carrying that type of the page's mean score of its rules of
  that type (``rule_<type>_pass_rate``): a page with many rules of a type weighs as one page. The table
  dimension has no rules to pass (its page entry is the truth it is scored against), so no pass rate.

Only the dimensions quantgate scores are here; an empty or missing output fails every rule, as upstream's
evaluator fails a blank output."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable
from statistics import fmean

from pydantic import BaseModel, ConfigDict

from quantgate.scoring.parsebench import charts, formatting, formatting_page, page, rules
from quantgate.scoring.parsebench.dataset import typed_rules
from quantgate.scoring.parsebench.tables import page as tables_page

# family → (upstream's page metric, quantgate's metric, the family's page score, its rule score or None)
DIMENSIONS: dict[str, tuple[str, str, Callable, Callable | None]] = {
    "content": ("content_faithfulness", "parsebench_content", page.page_score, rules.score),
    "formatting": ("semantic_formatting", "parsebench_formatting", formatting_page.page_score, formatting.score),
    "charts": ("rule_chart_data_point_pass_rate", "parsebench_charts", charts.page_score, charts.score),
    "tables": ("grits_trm_composite", "parsebench_tables", tables_page.page_score, None),
}


class Leaderboard(BaseModel):
    """What ``score --metrics parsebench`` prints (and writes under ``parsebench`` with --json)."""
    model_config = ConfigDict(extra="forbid")
    headlines: dict[str, float | None]  # upstream's page metric → its mean over the pages that have it
    pages: dict[str, int]  # ... over how many pages
    rule_pass_rates: dict[str, float]  # rule type → its pass rate
    rule_pages: dict[str, int]  # rule type → the pages carrying it


def leaderboard(outputs: Iterable[tuple[list[dict], str | None]]) -> Leaderboard:
    """``outputs``: each page's ParseBench rules (as ``PageRecord.parsebench`` holds them) and the system's text for
    it (None: no output)."""
    page_values: dict[str, list[float]] = defaultdict(list)
    type_values: dict[str, list[float]] = defaultdict(list)
    for raw, text in outputs:
        md = text or ""
        for family, (name, _, page_fn, rule_fn) in DIMENSIONS.items():
            typed = typed_rules(raw, family)
            if (value := page_fn(typed, md)) is not None:
                page_values[name].append(value)
            if rule_fn is None:
                continue
            by_type: dict[str, list[float]] = defaultdict(list)
            for r in typed:
                by_type[r.type].append(rule_fn(r, md) if md else 0.0)
            for kind, scores in by_type.items():
                type_values[kind].append(fmean(scores))
    return Leaderboard(headlines={n: fmean(page_values[n]) if page_values[n] else None for n, *_ in DIMENSIONS.values()},
                       pages={n: len(page_values[n]) for n, *_ in DIMENSIONS.values()},
                       rule_pass_rates={k: fmean(v) for k, v in sorted(type_values.items())},
                       rule_pages={k: len(v) for k, v in sorted(type_values.items())})


def lines(board: Leaderboard) -> list[str]:
    """The board as printed: the dimensions' headlines, then each rule type's pass rate (the chart dimension's
    headline is its one rule type's pass rate: printed once)."""
    rows = [(name, v, board.pages[name]) for name, v in board.headlines.items() if board.pages[name]]
    rows += [(f"rule_{kind}_pass_rate", v, board.rule_pages[kind]) for kind, v in board.rule_pass_rates.items()
             if f"rule_{kind}_pass_rate" not in board.headlines]
    width = max((len(name) for name, _, _ in rows), default=0) + 2
    return ["ParseBench as upstream's leaderboard aggregates it (means over the pages that carry each):",
            *(f"  {name:<{width}}{'n/a' if v is None else f'{v:.4f}':>8}   ({n} page{'s' * (n != 1)})"
              for name, v, n in rows)]
