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
from typing import Any

from quantgate.errors import InputError
from quantgate.fileio import atomic_write_json
from quantgate.study.lmeval import lmeval_runs, run_lmeval_per_variant
from quantgate.study.spec import VariantSpec, load_study, resolve_path
from quantgate.study.verdicts import relative_inside, score_file, study_verdicts, verdict_inputs
from quantgate.study.worst import worst_pages

JUDGED_PAGES = "judged-pages.jsonl"


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


def run_study(study_path: Path, out: Path | None = None, log: Callable[[str], None] = print,
              stop_after: str | None = None) -> dict:
    """Run (or resume) the study. ``stop_after`` (quantize|serve|score) ends early — for tests."""
    from quantgate.heldout import load_pageset
    from quantgate.heldout.synth_reuse import ensure_synth_pages
    from quantgate.quantize import quantize
    from quantgate.reports import build_report, write_reports
    from quantgate.scoring import load_predictions, parse_metric_list, score_pages, write_scores
    from quantgate.serve import serve_variant
    from quantgate.serve.backends.derive import backend_from_spec

    study_path = Path(study_path)
    st = load_study(study_path)  # every field and number checked before any page, weight or server
    base = study_path.resolve().parent
    out = study_output(study_path, st, out)
    with study_lock(out):
        atomic_write_json(out / "study.json", st.model_dump())
        # 1. pages
        if st.pages.synth:
            pages_dir = out / "pages"
            # rebuilt when the recorded spec differs from the study's (heldout.synth_reuse)
            ensure_synth_pages(pages_dir, **st.pages.synth.model_dump(), log=log)
        else:
            pages_dir = resolve_path(base, st.pages.path)
        ps = load_pageset(pages_dir)
        model = resolve_path(base, st.model)
        # 2. variants
        variants: dict[str, Path] = {}
        for v in st.variants:
            vdir = out / "variants" / v.name
            log(f"[quantize] {v.name} ({v.recipe})")
            quantize(model, v.recipe, vdir, calibration=pages_dir, samples=st.calibration_samples, prompt=st.prompt,
                     overwrite=True, record_root=out, log=log)
            variants[v.name] = vdir
        if stop_after == "quantize":
            return {}
        # 3. serve
        levels = list(st.concurrency)
        noise_level = st.noise_concurrency or (levels[1] if len(levels) > 1 else None)

        spec = with_compile_cache(st.backend, base, out)

        def backend_for(v: VariantSpec):
            return backend_from_spec(spec, v.server_args)

        for v in st.variants:
            lv = sorted(set(levels + ([noise_level] if v.name == st.baseline and noise_level else [])))
            backend = backend_for(v)
            log(f"[serve] {v.name} at concurrency {lv}")
            serve_variant(variants[v.name], pages_dir, backend, out / "runs" / v.name, split=st.split, concurrency=lv,
                          max_tokens=st.max_tokens, prompt=st.prompt, slo_s=st.slo_s, timeout_s=st.timeout_s,
                          limit=st.limit, overwrite=True, record_root=out, log=log)
        if st.lm_eval:
            run_lmeval_per_variant(st, base, out, pages_dir, variants, backend_for, log)
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
                write_scores(out / score_file(v.name, c), rows)
                scores[(v.name, c)] = {r["page_id"]: r for r in rows}
        if stop_after == "score":
            return {}
        # 5. compare, at the first concurrency level; the baseline's other level is its noise run. The
        # verdicts are made from the score files just written, the way the gate makes them again.
        verdicts, lm_verdicts = study_verdicts(st, out)
        lm = {"verdicts": lm_verdicts, "runs": lmeval_runs(st, out)} if st.lm_eval else None
        inputs = verdict_inputs(st, out, judged_pages(pages_dir, out))
        # 6. report
        c0 = levels[0]
        worst = worst_pages(st, ps, out, scores, c0)
        report = build_report(st.model_dump(), out, ps.sha256, variants, verdicts, c0, noise_level, worst, lm_eval=lm,
                              inputs=inputs)
        write_reports(report, out)
        return report


def study_output(study_path: Path, st, out: Path | None = None) -> Path:
    """The study's output folder: ``-o``, else its ``output`` (relative to the study file), else NAME-out."""
    return Path(out) if out else resolve_path(Path(study_path).resolve().parent, st.output or f"{st.name}-out")


def judged_pages(pages_dir: Path, out: Path) -> Path:
    """The judged page set's pages.jsonl inside the study folder: the set's own when it lies there (synthetic
    pages), else a copy (``judged-pages.jsonl``), so the gate can re-hash it wherever the folder goes."""
    from quantgate.fileio import atomic_write_bytes

    src = Path(pages_dir) / "pages.jsonl"
    if relative_inside(src, out) is not None:
        return src
    copy = out / JUDGED_PAGES
    data = src.read_bytes()
    if not copy.is_file() or copy.read_bytes() != data:
        atomic_write_bytes(copy, data)
    return copy


def with_compile_cache(spec, base: Path, out: Path):
    """The study's backend block with its compile cache resolved, for backends that have one (vLLM): every
    server of the study shares ``<out>/.vllm-cache`` unless the study names a folder (relative to the study
    file) or ``none``, so each variant compiles once and later starts (a resumed study, a rerun) load it."""
    if "compile_cache" not in type(spec).model_fields:
        return spec
    cc = spec.compile_cache
    if cc is None:
        cc = str((out / ".vllm-cache").resolve())
    elif cc.lower() != "none":
        cc = str(resolve_path(base, os.path.expanduser(cc)).resolve())
    return spec.model_copy(update={"compile_cache": cc})


def _levels(rdir: Path) -> list[dict[str, Any]]:
    return json.loads((rdir / "run.json").read_text("utf-8"))["levels"]
