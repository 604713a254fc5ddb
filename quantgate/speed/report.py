"""The study report's "Decode step" section: beside each variant's pages/s at each level, its
GPU ms per decode step, kernels per step and the share of the weight-read bound, from the decode profiles
``quantgate speed-profile -o STUDY/speed`` writes (``speed/<variant>/c<C>.profile.json``, ``speed/copy-bandwidth
.json``), and one sentence on what bounds it (``quantgate.speed.explain``). A level without a profile says "not
measured". The report imports no speed: this module registers itself (``report.sections``), as the tune does."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from statistics import mean

from quantgate.recipes.model import BITS_PER_WEIGHT
from quantgate.reports.sections import register_section
from quantgate.schema.run import KernelTime
from quantgate.schema.speed import StepProfile, load_copy_bandwidth, load_step_profile
from quantgate.schema.summary import SUMMARY, load_summary
from quantgate.serve.kernels import gemm_time
from quantgate.speed.explain import StepBound, explain_step

SPEED_DIR = "speed"
COPY_BANDWIDTH = "copy-bandwidth.json"
NOT_MEASURED = "not measured"


def gemm_by_kernel(p: StepProfile) -> dict[str, KernelTime]:
    """The step's GEMM-class GPU time per vLLM linear kernel (or library), heaviest first (which
    kernels really ran the layers, measured — vLLM's log names each kernel class once per process, not per layer)."""
    rows = [{"name": p.names[s.name], "ms_total": s.us / 1e3, "count": 1} for s in p.step if s.cls == "gemm"]
    return gemm_time(rows, 1) if rows else {}


def decode_weight_bytes(p: StepProfile) -> int:
    """The bytes one decode step reads as weights: the profile's decode modules (projections and the LM head) at
    their formats' bits per weight, scales included (the plan's own estimate); norms and the embedding lookup,
    which read a row, are left out."""
    return int(sum(r.params * BITS_PER_WEIGHT[r.format] / 8 for r in p.plan))


@dataclass(frozen=True)
class StepRow:
    variant: str
    concurrency: int
    pages_per_s: float
    profile: StepProfile | None  # None: this level was not profiled
    bound: StepBound | None  # None: no profile, or no copy bandwidth


def step_rows(out: Path) -> list[StepRow]:
    """One row per variant and speed level of the study's summary (its waves' levels when it has any, else its page
    runs'), with its profile's numbers and bound."""
    out = Path(out)
    s = load_summary(out)
    root = out / SPEED_DIR
    gbs = load_copy_bandwidth(root / COPY_BANDWIDTH).gbs if (root / COPY_BANDWIDTH).is_file() else None
    rows = []
    for v in s.variants:
        # a `speed:` study's speed is its waves (their mean pages/s), at every speed level; else the page runs
        levels = [(sl.concurrency, mean(w.pages_per_s for w in sl.waves)) for sl in v.speed if sl.waves] if v.speed \
            else [(lv.concurrency, lv.pages_per_s) for lv in v.levels]
        for c, pages_per_s in levels:
            f = root / v.name / f"c{c}.profile.json"
            p = load_step_profile(f) if f.is_file() else None
            b: StepBound | None = None
            if p is not None and gbs is not None:
                b = explain_step(p.gpu_ms_per_step, p.kernels_per_step, decode_weight_bytes(p), gbs, concurrency=c)
            rows.append(StepRow(v.name, c, pages_per_s, p, b))
    return rows


def _cells(r: StepRow) -> list[str]:
    p, b = r.profile, r.bound
    ms = f"{p.gpu_ms_per_step:.3f}" if p else NOT_MEASURED
    kernels = f"{p.kernels_per_step:.0f}" if p else NOT_MEASURED
    share = f"{b.share:.0%}" if b else NOT_MEASURED if p is None else "not measured (no copy bandwidth)"
    why = b.sentence if b else NOT_MEASURED if p is None else ("what bounds it: not measured (no copy bandwidth: "
                                                               "`speed-profile --copy-gbs`)")
    by_kernel = ", ".join(f"{k} {t.share_of_gemm:.0%}" for k, t in gemm_by_kernel(p).items()) if p else NOT_MEASURED
    return [r.variant, str(r.concurrency), f"{r.pages_per_s:.3f}", ms, kernels, share, by_kernel or "no GEMM", why]


HEAD = ["variant", "concurrency", "pages/s", "GPU ms per decode step", "kernels per step",
        "weight-read bound (share of the step)", "GEMM time by kernel", "what bounds it"]


def markdown_lines(out: Path) -> list[str]:
    if not (Path(out) / SUMMARY).is_file() or not (Path(out) / SPEED_DIR).is_dir():
        return []  # no profile taken into this study: nothing to add beside the speed table
    rows = step_rows(out)
    if not rows:
        return []
    return ["", "## Decode step", "", "From decode profiles (the study's `speed.profile`, on the server that measured "
            "the speed, or `quantgate speed-profile`: one pure-decode step per level, vLLM's torch profiler); the "
            "weight-read bound is the decode weights read once at the measured copy bandwidth.", "",
            "| " + " | ".join(HEAD) + " |", "|" + "---|" * len(HEAD),
            *("| " + " | ".join(_cells(r)) + " |" for r in rows)]


def html_sections(out: Path) -> list:
    from markupsafe import Markup, escape

    if not (Path(out) / SUMMARY).is_file() or not (Path(out) / SPEED_DIR).is_dir():
        return []
    rows = step_rows(out)
    if not rows:
        return []
    head = "".join(f"<th>{escape(h)}</th>" for h in HEAD)
    body = "".join("<tr>" + "".join(f"<td>{escape(c)}</td>" for c in _cells(r)) + "</tr>\n" for r in rows)
    return [Markup(f"<h2>Decode step</h2>\n<table>\n<tr>{head}</tr>\n{body}</table>\n")]


register_section("decode_step", markdown_lines, html_sections)  # the report imports no speed: speed adds itself
