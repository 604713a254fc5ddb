"""``quantgate demo``: a complete study on the embedded default (CPU, transformers serve) with the
bundled tiny reader — a Qwen3.5 VLM trained to read `--profile reader` pages (assets/reader/CARD.json)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

if TYPE_CHECKING:
    from quantgate.io.console import Console
    from quantgate.schema.study import StudyOutcome

READER = Path(__file__).resolve().parents[1] / "assets" / "reader"
MARGINS = {"ned": 0.01, "cer": 0.01, "bow_f1": 0.02}
LMEVAL: dict[str, Any] = {"page_task": True, "limit": 32, "margin": 0.05}


def demo_study(pages: int, variants: list[str], min_pages: int | None = None) -> dict[str, Any]:
    """The demo's study YAML, as a user would write it. ``min_pages``: lowered only for smoke tests on a few pages
    (the study's default is the calibrated 30)."""
    return {
        "name": "demo", "model": str(READER),
        "pages": {"synth": {"n": pages, "seed": 1, "profile": "reader", "calibration_fraction": 0.2}},
        "variants": [{"name": v, "recipe": v} for v in variants], "baseline": variants[0],
        # one torch thread: the tiny reader answers a page faster that way on a 2-core CPU, with identical
        # outputs, and the other core stays free for the client and lm-eval (benchmarks/demo_threads.py)
        "calibration_samples": 8, "backend": {"name": "transformers", "device": "cpu", "threads": 1},
        # transformers serve answers one request at a time, so a second speed level would only repeat the
        # first: every variant is served at concurrency 1, the baseline again at 2 as its noise run
        "concurrency": [1], "noise_concurrency": 2, "max_tokens": 48, "metrics": ["ned", "cer", "bow_f1"],
        "margins": MARGINS, "bootstrap_seed": 0, "resamples": 10000,
        # 32 held-out pages, each its own document, cannot rule out a rare failure at the default worst
        # page damage (the range: 299 pages at a 0.01 margin). The demo declares that no page is damaged by more
        # than 0.1 (29 pages at 0.01, 14 at 0.02); every verdict says so, and a page damaged by more refutes it
        "worst_page_damage": {"ned": 0.1, "cer": 0.1, "bow_f1": 0.1},
        # lm-eval beside the pages: the offline page-heading task, exact match, through the same server
        # (32 documents: at 40 pages, every held-out page, and at least the 30 a verdict needs)
        "lm_eval": LMEVAL,
    } | (_smoke(min_pages) if min_pages else {})


def _smoke(min_pages: int) -> dict[str, Any]:
    """A smoke test on a few pages, deliberately below the calibrated minimums (the report and the gate say so):
    as few documents as pages, and the worst page damage that ``min_pages`` pages rule out — D with
    ⌈ln α / ln(1 − m/D)⌉ = min_pages, i.e. D = m / (1 − α^(1/min_pages)), 1.9 margins at 4 pages — so that
    identical outputs can still pass on the few held-out pages of `--pages 8`."""
    from quantgate.judge.clustered import ALPHA

    per_margin = 0.9995 / (1 - ALPHA ** (1 / min_pages))  # a hair below the bound: n_rare never rounds up past it
    return {"min_pages": min_pages, "min_documents": max(2, min_pages),
            "worst_page_damage": {m: round(per_margin * v, 6) for m, v in MARGINS.items()},
            "lm_eval": {**LMEVAL, "worst_sample_damage": round(per_margin * LMEVAL["margin"], 6)}}


def run_demo(out: Path, pages: int = 40, variants: list[str] | None = None, console: Console | None = None,
             min_pages: int | None = None) -> StudyOutcome:
    from quantgate.study import run_study

    variants = variants or ["bf16", "fp8-dynamic", "nvfp4", "mixed", "harmful-int2"]
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / "study.yaml"
    text = yaml.safe_dump(demo_study(pages, variants, min_pages), sort_keys=False)
    if not path.exists() or path.read_text() != text:
        path.write_text(text)
    return run_study(path, out, console=console)
