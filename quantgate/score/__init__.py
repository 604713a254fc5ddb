"""Scoring: the metric registry and per-page scores (the verdicts made from them: ``quantgate.judge``)."""

from quantgate.score.metrics import REGISTRY, get_metric, parse_metric_list
from quantgate.score.scores import load_predictions, read_scores, score_pages, summarize, write_scores

__all__ = ["REGISTRY", "get_metric", "load_predictions", "parse_metric_list",
           "read_scores", "score_pages", "summarize", "write_scores"]
