"""Scoring: the metric registry and per-page scores (the verdicts made from them: ``quantgate.judge``)."""

from quantgate.io.scores import read_scores, write_scores
from quantgate.score.metrics import REGISTRY, get_metric, parse_metric_list
from quantgate.score.scores import load_predictions, score_pages

__all__ = ["REGISTRY", "get_metric", "load_predictions", "parse_metric_list", "read_scores", "score_pages",
           "write_scores"]
