"""OmniDocBench's end-to-end protocol (v1.0, as upstream's code at commit 24e6428 computes it) as a
quantgate metric family: docs/metrics.md."""

from quantgate.schema.omnidoc import PageScore, TruthBlock, TruthPage
from quantgate.scoring.omnidoc.page import METRICS, OmniMetric, aggregate, score_page, scored_counts
from quantgate.scoring.omnidoc.truth import load_truth, parse_truth, truth_from_markdown, truth_markdown

__all__ = ["METRICS", "OmniMetric", "PageScore", "TruthBlock", "TruthPage", "aggregate", "load_truth",
           "parse_truth", "score_page", "scored_counts", "truth_from_markdown", "truth_markdown"]
