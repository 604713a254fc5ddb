"""A page's ParseBench semantic-formatting score, as upstream's evaluator computes it
(``evaluation/evaluators/parse.py``, ``semantic_formatting``), from the page's formatting rules:

- text styling: bold, strikeout, superscript and subscript rules; the mean score of the positive rules (``is_*``)
  and of the negative ones (``is_not_*``), each 1 when the page has none, combined as an F-beta with beta = 1/2
  with the positive score in precision's place, so a missed style costs more than a style written where there is
  none (upstream's comment claims the reverse; its formula, followed here, does this);
- title accuracy: the mean over ``is_title`` and ``title_hierarchy_percent`` of each type's mean;
- LaTeX: the ``is_latex`` rules' mean; code blocks: the ``is_code_block`` rules' mean;
- the page: the weighted mean of the categories it has, styling and titles weighing 1, LaTeX and code 1/5.

Italic, underline, mark, mark colour and page header/footer rules are scored (their pass rates are part of the
dimension's breakdown) but, as upstream, do not enter the page score."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from statistics import fmean

from quantgate.scoring.parsebench.formatting import score

STYLING_PAIRS = (("is_bold", "is_not_bold"), ("is_strikeout", "is_not_strikeout"), ("is_sup", "is_not_sup"),
                 ("is_sub", "is_not_sub"))
POSITIVE, NEGATIVE = frozenset(p for p, _ in STYLING_PAIRS), frozenset(n for _, n in STYLING_PAIRS)
BETA = 0.5
# category → (its rule types, its weight in the page score)
CATEGORIES: dict[str, tuple[frozenset[str], float]] = {
    "text_styling": (POSITIVE | NEGATIVE, 1.0),
    "title_accuracy": (frozenset({"is_title", "title_hierarchy_percent"}), 1.0),
    "latex": (frozenset({"is_latex"}), 1 / 5),
    "code_block": (frozenset({"is_code_block"}), 1 / 5),
}


def rule_scores(rules: Sequence, markdown: str) -> list[tuple[str, float]]:
    """(type, score) per rule. An empty output fails every rule (upstream's evaluator does not run them on it);
    one of only whitespace is run through them, as upstream runs it."""
    return [(r.type, score(r, markdown) if markdown else 0.0) for r in rules]


def _f_beta(pos: float, neg: float) -> float:
    return (1 + BETA ** 2) * pos * neg / (BETA ** 2 * pos + neg) if pos + neg > 0 else 0.0


def categories(scored: Sequence[tuple[str, float]]) -> dict[str, float]:
    """Each category's value on the page, for the categories whose rule types the page has."""
    by_type: dict[str, list[float]] = defaultdict(list)
    for kind, value in scored:
        by_type[kind].append(value)
    out: dict[str, float] = {}
    pos = [v for k, v in scored if k in POSITIVE]
    neg = [v for k, v in scored if k in NEGATIVE]
    if pos or neg:
        out["text_styling"] = _f_beta(fmean(pos) if pos else 1.0, fmean(neg) if neg else 1.0)
    for name, (types, _) in CATEGORIES.items():
        if name != "text_styling" and (means := [fmean(by_type[t]) for t in sorted(types) if t in by_type]):
            out[name] = fmean(means)
    return out


def page_score(rules: Sequence, markdown: str) -> float | None:
    """The page's semantic formatting in [0, 1]; None when none of its rules enters the score."""
    cats = categories(rule_scores(rules, markdown))
    if not cats:
        return None
    return sum(v * CATEGORIES[c][1] for c, v in cats.items()) / sum(CATEGORIES[c][1] for c in cats)


def headline(page_scores: Iterable[float | None]) -> float | None:
    """The dimension's leaderboard number: the mean over the pages that have a score (upstream's
    ``avg_semantic_formatting``)."""
    values = [v for v in page_scores if v is not None]
    return fmean(values) if values else None
