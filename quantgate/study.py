"""``quantgate study STUDY.yaml``: quantize → serve → score → compare → report, resumable.

Each step writes its files before the next starts and is skipped when its inputs are unchanged:
variants are reused when their fingerprint (weights, recipe, calibration pages) matches, runs
resume request by request (and restart when the variant's weights changed), scores and verdicts
are recomputed from the records (seconds). Killing it anywhere and rerunning completes the study
with nothing lost or repeated. One study per output folder at a time (a lock file)."""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, model_validator

from quantgate.errors import InputError
from quantgate.fileio import atomic_write_json
from quantgate.records import parse_record


class _S(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SynthPages(_S):
    n: int = Field(ge=2)
    seed: int = 0
    profile: Literal["doc", "simple", "reader"] = "doc"
    calibration_fraction: float = 0.2
    noise: float = 0.03


class PagesSpec(_S):
    path: str | None = None
    synth: SynthPages | None = None

    @model_validator(mode="after")
    def _one(self):
        if (self.path is None) == (self.synth is None):
            raise ValueError("give exactly one of 'path' (an existing page set) or 'synth'")
        return self


class VariantSpec(_S):
    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
    recipe: str
    server_args: list[str] = Field(default_factory=list)  # e.g. ["--kv-cache-dtype", "fp8"]


class BackendSpec(_S):
    name: Literal["transformers", "vllm", "openai"] = "transformers"
    device: str = "cpu"
    vllm_cmd: str | None = None
    endpoint: str | None = None
    api_key_env: str | None = None
    tensor_parallel_size: int = 1
    data_parallel_size: int = 1
    max_model_len: int | None = None
    gpu_memory_utilization: float | None = None
    extra_args: list[str] = Field(default_factory=list)


class LmEvalSpec(_S):
    tasks: list[str] = Field(default_factory=list)  # lm-eval task names
    include_path: str | None = None  # folder of local task YAML (offline: dataset_path: json + data_files)
    page_task: bool = True  # add quantgate_page_heading, built from the study's page set
    limit: int | None = None  # documents per task
    concurrent: int = 1
    margin: float = 0.02  # equivalence margin in each metric's units
    margins: dict[str, float] = Field(default_factory=dict)  # per "metric" or "task/metric"

    @model_validator(mode="after")
    def _some(self):
        if not self.tasks and not self.page_task:
            raise ValueError("lm_eval needs tasks, or page_task: true")
        return self


class Study(_S):
    schema_version: int = 1
    name: str
    model: str
    prompt: str = "Convert this page to markdown. Output only the markdown."
    pages: PagesSpec
    split: str = "heldout"
    limit: int | None = None
    variants: list[VariantSpec] = Field(min_length=2)
    baseline: str = "bf16"
    calibration_samples: int = 32
    backend: BackendSpec = Field(default_factory=BackendSpec)
    concurrency: list[int] = Field(default_factory=lambda: [1, 8], min_length=1)
    noise_concurrency: int | None = None  # the baseline's second level, used as its noise run
    max_tokens: int = 1024
    timeout_s: float = 600.0
    slo_s: float = 10.0
    metrics: list[str] = Field(default_factory=lambda: ["ned", "cer", "bow_f1"])
    margins: dict[str, float] = Field(default_factory=dict)
    seed: int = 0
    resamples: int = 10_000
    output: str | None = None
    lm_eval: LmEvalSpec | None = None

    @model_validator(mode="after")
    def _check(self):
        names = [v.name for v in self.variants]
        if len(set(names)) != len(names):
            raise ValueError(f"variant names must be unique: {names}")
        if self.baseline not in names:
            raise ValueError(f"baseline {self.baseline!r} is not one of the variants {names}")
        return self


def load_study(path: Path) -> Study:
    path = Path(path)
    try:
        obj = yaml.safe_load(path.read_text("utf-8"))
    except (OSError, yaml.YAMLError, UnicodeDecodeError) as e:
        raise InputError(f"{path}: cannot read the study ({e})") from None
    if not isinstance(obj, dict):
        raise InputError(f"{path}: a study is a YAML mapping")
    st = parse_record(Study, obj, where=str(path))
    from quantgate.scoring import get_metric

    for m in st.metrics:
        try:
            get_metric(m)
        except InputError as e:
            raise InputError(f"{path}: metrics: {e}") from None
    for m in st.margins:
        if m not in st.metrics:
            raise InputError(f"{path}: margins.{m}: not one of the study's metrics {st.metrics}")
    return st


@contextmanager
def study_lock(out: Path):
    out.mkdir(parents=True, exist_ok=True)
    fh = open(out / ".lock", "w")
    try:
        fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        fh.close()
        raise InputError(f"{out}: another quantgate study is running on this folder; wait for it or use another -o") from None
    try:
        fh.write(str(os.getpid()))
        fh.flush()
        yield
    finally:
        fcntl.flock(fh, fcntl.LOCK_UN)
        fh.close()


def _rel(base: Path, p: str) -> Path:
    q = Path(p)
    return q if q.is_absolute() else (base / q)


def run_study(study_path: Path, out: Path | None = None, log: Callable[[str], None] = print,
              stop_after: str | None = None) -> dict:
    """Run (or resume) the study. ``stop_after`` (quantize|serve|score) ends early — for tests."""
    from quantgate.heldout import load_pageset
    from quantgate.heldout.synth import synth_pages
    from quantgate.quantize import quantize
    from quantgate.reports import build_report, write_reports
    from quantgate.scoring import compare_scores, load_predictions, parse_metric_list, score_pages, write_scores
    from quantgate.serve import make_backend, serve_variant

    study_path = Path(study_path)
    st = load_study(study_path)
    base = study_path.resolve().parent
    out = Path(out) if out else _rel(base, st.output or f"{st.name}-out")
    with study_lock(out):
        atomic_write_json(out / "study.json", st.model_dump())
        # 1. pages
        if st.pages.synth:
            pages_dir = out / "pages"
            sy = st.pages.synth
            if not (pages_dir / "pages.jsonl").exists():
                log(f"synthesizing {sy.n} pages ({sy.profile}) → {pages_dir}")
                synth_pages(pages_dir, sy.n, seed=sy.seed, calibration_fraction=sy.calibration_fraction,
                            profile=sy.profile, noise=sy.noise)
        else:
            pages_dir = _rel(base, st.pages.path)
        ps = load_pageset(pages_dir)
        model = _rel(base, st.model)
        # 2. variants
        variants: dict[str, Path] = {}
        for v in st.variants:
            vdir = out / "variants" / v.name
            log(f"[quantize] {v.name} ({v.recipe})")
            quantize(model, v.recipe, vdir, calibration=pages_dir, samples=st.calibration_samples, prompt=st.prompt,
                     overwrite=True, log=log)
            variants[v.name] = vdir
        if stop_after == "quantize":
            return {}
        # 3. serve
        levels = list(st.concurrency)
        noise_level = st.noise_concurrency or (levels[1] if len(levels) > 1 else None)
        def backend_for(v: VariantSpec):
            b = st.backend
            return make_backend(b.name, device=b.device, endpoint=b.endpoint, served_model=str(variants[v.name]),
                                api_key_env=b.api_key_env, vllm_cmd=b.vllm_cmd,
                                tensor_parallel_size=b.tensor_parallel_size, data_parallel_size=b.data_parallel_size,
                                max_model_len=b.max_model_len, gpu_memory_utilization=b.gpu_memory_utilization,
                                extra_args=list(b.extra_args) + list(v.server_args))

        for v in st.variants:
            lv = sorted(set(levels + ([noise_level] if v.name == st.baseline and noise_level else [])))
            backend = backend_for(v)
            log(f"[serve] {v.name} at concurrency {lv}")
            serve_variant(variants[v.name], pages_dir, backend, out / "runs" / v.name, split=st.split, concurrency=lv,
                          max_tokens=st.max_tokens, prompt=st.prompt, slo_s=st.slo_s, timeout_s=st.timeout_s,
                          limit=st.limit, overwrite=True, log=log)
        if st.lm_eval:
            _run_lmeval(st, base, out, pages_dir, variants, backend_for, log)
        if stop_after == "serve":
            return {}
        # 4. score (from the records; seconds)
        metrics = parse_metric_list(st.metrics)
        scores: dict[tuple[str, int], dict[str, dict]] = {}
        for v in st.variants:
            rdir = out / "runs" / v.name
            lv_all = sorted({int(x["concurrency"]) for x in _levels(rdir)})
            for c in lv_all:
                preds = load_predictions(rdir, ps, st.split, c)
                rows = score_pages(ps, preds, metrics, st.split)
                if st.limit:
                    rows = [r for r in rows if r["page_id"] in preds]
                write_scores(out / "scores" / f"{v.name}-c{c}.jsonl", rows)
                scores[(v.name, c)] = {r["page_id"]: r for r in rows}
        if stop_after == "score":
            return {}
        # 5. compare, at the first concurrency level; the baseline's other level is its noise run
        c0 = levels[0]
        verdicts = []
        for v in st.variants:
            if v.name == st.baseline:
                continue
            for m in st.metrics:
                verdict = compare_scores(scores[(st.baseline, c0)], scores[(v.name, c0)], m,
                                         noise=scores.get((st.baseline, noise_level)) if noise_level else None,
                                         margin=st.margins.get(m, 0.0), seed=st.seed, n_resamples=st.resamples,
                                         names=(f"{st.baseline}@c{c0}", f"{v.name}@c{c0}"))
                verdicts.append({"variant": v.name, **verdict.model_dump()})
        lm = _lmeval_verdicts(st, out) if st.lm_eval else None
        # 6. report
        worst = _worst_pages(st, ps, out, scores, c0)
        report = build_report(st.model_dump(), out, ps.sha256, variants, verdicts, c0, noise_level, worst, lm_eval=lm)
        write_reports(report, out)
        return report


def _run_lmeval(st: Study, base: Path, out: Path, pages_dir: Path, variants: dict[str, Path], backend_for,
                log) -> None:
    """lm-eval per variant through its own server; skipped when a finished run matches the weights."""
    from quantgate.lmeval import PAGE_TASK, run_lmeval, write_page_task
    from quantgate.lmeval.run import RESULT
    from quantgate.serve.run import weights_fingerprint

    spec = st.lm_eval
    # like every other path in a study, include_path is relative to the study file
    tasks, include = list(spec.tasks), (str(_rel(base, spec.include_path)) if spec.include_path else None)
    if spec.page_task:
        if include:
            raise InputError("lm_eval: page_task and include_path cannot be combined (lm-eval takes one include "
                             "path); set page_task: false or put your tasks beside the page task")
        include = str(write_page_task(pages_dir, out / "lmeval" / "task", prompt=st.prompt, split=st.split,
                                      limit=spec.limit, max_tokens=min(st.max_tokens, 64)))
        tasks.append(PAGE_TASK)
    for v in st.variants:
        d = out / "lmeval" / v.name
        if (d / RESULT).is_file():
            old = json.loads((d / RESULT).read_text("utf-8"))
            if (old.get("variant_fingerprint"), old.get("tasks"), old.get("limit")) == \
                    (weights_fingerprint(variants[v.name]), tasks, spec.limit):
                continue
        log(f"[lm-eval] {v.name}: {', '.join(tasks)}")
        run_lmeval(variants[v.name], backend_for(v), d, tasks=tasks, include_path=Path(include) if include else None,
                   limit=spec.limit, concurrent=spec.concurrent, log=log)


def _lmeval_verdicts(st: Study, out: Path) -> dict:
    from quantgate.lmeval import compare_lmeval
    from quantgate.lmeval.run import load_lmeval

    spec = st.lm_eval
    rows = []
    for v in st.variants:
        if v.name != st.baseline:
            rows += [{"variant": v.name, **r} for r in compare_lmeval(
                out / "lmeval" / st.baseline, out / "lmeval" / v.name, margins=spec.margins,
                default_margin=spec.margin, seed=st.seed, n_resamples=st.resamples, names=(st.baseline, v.name))]
    runs = {v.name: load_lmeval(out / "lmeval" / v.name)[0].model_dump() for v in st.variants}
    return {"verdicts": rows, "runs": runs}


def _worst_pages(st: Study, ps, out: Path, scores, c0: int, k: int = 3) -> dict[str, list[dict]]:
    """Per variant, the pages where it fell furthest behind the baseline on the first metric."""
    from quantgate.scoring import get_metric
    from quantgate.serve import load_records

    metric = get_metric(st.metrics[0])
    sign = 1 if metric.higher_is_better else -1
    outputs = {v.name: {r.page_id: r.output for r in load_records(out / "runs" / v.name) if r.concurrency == c0}
               for v in st.variants}
    base = scores[(st.baseline, c0)]
    res: dict[str, list[dict]] = {}
    for v in st.variants:
        if v.name == st.baseline:
            continue
        cand = scores[(v.name, c0)]
        rows = []
        for pid, row in cand.items():
            b, c = base.get(pid, {}).get(metric.name), row.get(metric.name)
            if b is None or c is None or sign * (c - b) >= 0:
                continue
            rows.append((sign * (c - b), pid, b, c))
        rows.sort()
        pages = ps.by_id()
        res[v.name] = [{"page_id": pid, "metric": metric.name, "baseline_value": b, "variant_value": c,
                        "truth": ps.truth_text(pages[pid]) if pid in pages else None,
                        "baseline_output": outputs[st.baseline].get(pid), "variant_output": outputs[v.name].get(pid)}
                       for _, pid, b, c in rows[:k]]
    return res


def _levels(rdir: Path) -> list[dict[str, Any]]:
    return json.loads((rdir / "run.json").read_text("utf-8"))["levels"]
