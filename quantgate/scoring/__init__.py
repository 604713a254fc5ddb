"""Scoring: the metric registry and per-page scores (the verdicts made from them: ``quantgate.judge``)."""

from quantgate.io.scores import read_scores, write_scores
from quantgate.scoring.metrics import REGISTRY, get_metric, parse_metric_list
from quantgate.scoring.scores import Output, load_predictions, not_scored, score_pages

__all__ = ["REGISTRY", "Output", "get_metric", "load_predictions", "not_scored", "parse_metric_list", "read_scores",
           "score_pages", "write_scores"]
