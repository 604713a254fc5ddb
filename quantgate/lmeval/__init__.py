"""Standard benchmarks beside the pages: lm-eval against the variant's own OpenAI-compatible server,
per-sample results logged so variants can be paired, and verdicts with quantgate's statistics."""

from quantgate.lmeval.compare import compare_lmeval
from quantgate.lmeval.run import LmEvalRun, run_lmeval
from quantgate.lmeval.tasks import PAGE_TASK, write_page_task

__all__ = ["PAGE_TASK", "LmEvalRun", "compare_lmeval", "run_lmeval", "write_page_task"]
