"""Scoring: metric registry, per-page scores, paired statistics and verdicts."""

from quantgate.scoring.compare import compare_files, compare_scores
from quantgate.scoring.metrics import REGISTRY, get_metric, parse_metric_list
from quantgate.scoring.scores import load_predictions, read_scores, score_pages, summarize, write_scores

__all__ = ["REGISTRY", "compare_files", "compare_scores", "get_metric", "load_predictions", "parse_metric_list",
           "read_scores", "score_pages", "summarize", "write_scores"]
