"""The family as the metric registry calls a metric: ``fn(prediction, truth_text) -> float | None``, where
``truth_text`` is the page's truth file (a TruthPage record as JSON, or markdown). One page's matching
serves all six metrics: the last pages scored are cached."""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache

from quantgate.schema.omnidoc import SetScores
from quantgate.scoring.omnidoc.page import METRICS, PageScore, score_page
from quantgate.scoring.omnidoc.truth import parse_truth


@lru_cache(maxsize=64)
def _scores(prediction: str, truth_text: str) -> PageScore:
    return score_page(prediction, parse_truth(truth_text, image="page", source="page truth"))


def metric_fn(name: str) -> Callable[[str, str], float | None]:
    if name not in METRICS:
        raise KeyError(f"{name!r} is not an OmniDocBench metric; known: {', '.join(METRICS)}")

    def fn(prediction: str, truth_text: str) -> float | None:
        return _scores(prediction or "", truth_text).values[name]

    fn.__name__ = name
    return fn


def set_scores(preds: dict[str, str | None], truths: dict[str, str | None]) -> SetScores:
    """Whole-set values as upstream aggregates them (TEDS per table, edit distances per page) over the pages
    with truth, how many pages each metric was scored on, and the notes (skipped blocks, tables TEDS could not
    read), each naming its page: what ``quantgate score`` prints beside the page means."""
    from quantgate.scoring.omnidoc.page import aggregate, scored_counts

    pages = {pid: _scores(preds.get(pid) or "", t) for pid, t in truths.items() if t is not None}
    return SetScores(set_values=aggregate(list(pages.values())), pages_scored=scored_counts(list(pages.values())),
                     pages_with_truth=len(pages), notes=[f"{pid}: {n}" for pid, s in pages.items() for n in s.notes])
