"""A page's ParseBench content-faithfulness score and the dimension's headline, as upstream computes them
(``evaluation/evaluators/parse.py`` per page, ``evaluation/runner.py`` across pages): each rule type's mean
score on the page; text correctness = the mean over the correctness types present; order = the order rules'
mean; the page = (correctness + order / 2) / (1 + 1/2), or whichever of the two it has. The headline is the mean
over the pages that carry content rules (upstream's ``avg_content_faithfulness``)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from statistics import fmean

from quantgate.scoring.parsebench.rules import Order, score

# upstream's weights: omission and hallucination count fully, reading order half
CORRECTNESS_WEIGHT = 1.0
ORDER_WEIGHT = 0.5


def type_means(rules: Iterable, markdown: str) -> dict[str, float]:
    """Each rule type's mean score on this output (upstream's per-type pass rate)."""
    by_type: dict[str, list[float]] = defaultdict(list)
    for rule in rules:
        by_type[rule.type].append(score(rule, markdown))
    return {t: fmean(v) for t, v in by_type.items()}


def page_score(rules: Sequence, markdown: str) -> float | None:
    """The page's content-faithfulness in [0, 1]; None when it carries no content rule. An empty output fails
    every rule (upstream's evaluator does not run them on it: a parser that wrote nothing read nothing), though
    one of only whitespace is run through them as upstream runs it."""
    if not rules:
        return None
    means = type_means(rules, markdown) if markdown else {r.type: 0.0 for r in rules}
    order = means.pop(Order.model_fields["type"].annotation.__args__[0], None)  # type: ignore[union-attr]
    parts = [(fmean(means.values()), CORRECTNESS_WEIGHT)] if means else []
    if order is not None:
        parts.append((order, ORDER_WEIGHT))
    if not parts:
        return None
    return sum(v * w for v, w in parts) / sum(w for _, w in parts)


def headline(page_scores: Iterable[float | None]) -> float | None:
    """The dimension's leaderboard number: the mean of the pages' scores (pages without content rules left
    out, as upstream leaves out pages with no such metric)."""
    values = [v for v in page_scores if v is not None]
    return fmean(values) if values else None
