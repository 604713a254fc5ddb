"""The family as the metric registry calls a metric: ``fn(prediction, truth_text) -> float | None``, where
``truth_text`` is the page's truth file (a TruthPage record as JSON, or markdown). One page's matching
serves all six metrics: the last pages scored are cached."""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache

from quantgate.score.omnidoc.page import METRICS, PageScore, score_page
from quantgate.score.omnidoc.truth import parse_truth


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
