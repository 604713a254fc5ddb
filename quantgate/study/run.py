"""``quantgate study STUDY.yaml``: quantize → serve → score → compare → report, resumable.

Each step writes its files before the next starts and is skipped when its inputs are unchanged:
variants are reused when their fingerprint (weights, recipe, calibration pages) matches, runs
resume request by request (and restart when the variant's weights changed), scores and verdicts
are recomputed from the records (seconds). Killing it anywhere and rerunning completes the study
with nothing lost or repeated. One study per output folder at a time (a lock file).

Each variant's server is started once for its page runs and its lm-eval run (``SharedServer``); each
step is one console stage and one line of ``timings.jsonl`` (``quantgate.study.timings``)."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from contextlib import ExitStack, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from quantgate.io.console import Console, console_for
from quantgate.io.fileio import atomic_write_json, exclusive_lock
from quantgate.study.lmeval import LmEvalPlan, lmeval_runs, plan_lmeval, run_variant_lmeval
from quantgate.study.spec import Study, VariantSpec, load_study, resolve_path
from quantgate.study.timings import Clock, time_budget
from quantgate.study.verdicts import relative_inside, score_file, study_verdicts, verdict_inputs
from quantgate.study.worst import worst_pages

JUDGED_PAGES = "judged-pages.jsonl"


def study_lock(out: Path):
    """One study per output folder at a time."""
    return exclusive_lock(Path(out) / ".lock", f"{out}: another quantgate study is running on this folder; wait "
                          "for it or use another -o")


def study_output(study_path: Path, out: Path | None = None, st: Study | None = None) -> Path:
    """The folder a study writes to: ``-o``, else the study's ``output`` (relative to the study file), else
    ``<name>-out`` beside it. ``st``: the study, already loaded."""
    st = st or load_study(study_path)
    return Path(out) if out else resolve_path(Path(study_path).resolve().parent, st.output or f"{st.name}-out")


def variant_levels(st: Study) -> tuple[dict[str, list[int]], int | None]:
    """Concurrency levels per variant, and the noise level: every variant at the study's levels (the
    first is where verdicts are made); the baseline also at the noise level, its second run."""
    levels = list(st.concurrency)
    noise = st.noise_concurrency or (levels[1] if len(levels) > 1 else None)
    return ({v.name: sorted(set(levels + ([noise] if v.name == st.baseline and noise else []))) for v in st.variants},
            noise)


@dataclass
class _Ctx:
    st: Study
    out: Path
    pages_dir: Path
    variants: dict[str, Path]
    clock: Clock
    lm: LmEvalPlan | None
    n_pages: int  # pages each level sends
    backend: Any  # the study's backend block, its compile cache resolved (with_compile_cache)
    ps: Any = None  # the page set
    plan: Any = None  # a sequential study's Plan (quantgate.study.sequential)
    placement: Any = None  # issue 31: each variant's GPUs, wave and parallel settings (quantgate.study.placement)
    cluster: Any = None  # issue 31: the Ray cluster quantize and servers run on (quantgate.study.cluster), or None


def run_study(study_path: Path, out: Path | None = None, console: Console | None = None,
              stop_after: str | None = None, log: Callable[[str], None] | None = None, ray: str | None = None,
              prepared=None) -> dict:
    """Run (or resume) the study. ``stop_after`` (quantize|serve|score) ends early — for tests. ``log``:
    instead of a console, every line (stages and details) goes to this function. ``ray``: a Ray address
    (``--ray``), over the study's ``cluster:``. ``prepared``: the checks ``study.preflight`` made already."""
    from quantgate.pages import load_pageset
    from quantgate.report import build_report, write_reports
    from quantgate.score import load_predictions, parse_metric_list, score_pages, write_scores

    t_start = time.time()
    console = console or (console_for(log) if log else Console())
    study_path = Path(study_path)
    st = load_study(study_path)  # every field and number checked before any page, weight or server
    base = study_path.resolve().parent
    out = study_output(study_path, out, st)
    # issue 31: the placement (GPU pool, TP/DP, heads) and the cluster (address, every node's storage) are
    # checked before any work (study.preflight); a cluster is left when the study ends
    from quantgate.study.placement import describe
    from quantgate.study.preflight import prepare

    prepared = prepared or prepare(st, base, out, ray, console.detail)
    cluster, placement = prepared.cluster, prepared.placement
    for line in describe(placement):
        console.detail(line)
    with study_lock(out), (cluster or nullcontext()):
        atomic_write_json(out / "study.json", st.model_dump())
        clock = Clock(out, console, start=t_start)
        pages_dir = _pages(st, base, out, clock)
        ps = load_pageset(pages_dir)
        plan = None
        if st.sequential is not None:  # the page budget checked before anything is quantized or served
            from quantgate.study.sequential import judged_ids, make_plan

            plan = make_plan(st, judged_ids(judged_pages(pages_dir, out), st.split, st.limit))
        levels, noise_level = variant_levels(st)
        variants = {v.name: out / "variants" / v.name for v in st.variants}  # where _quantize_all writes each
        ctx = _Ctx(st, out, pages_dir, variants, clock, plan_lmeval(st, base, out, pages_dir) if st.lm_eval else None,
                   len(ps.split(st.split)[: st.limit or None]), with_compile_cache(st.backend, base, out), ps, plan,
                   placement, cluster)
        model = resolve_path(base, st.model)
        if stop_after == "quantize":
            _quantize_all(st, model, pages_dir, out, clock, cluster=cluster)
            return {}
        with ExitStack() as servers_open:
            servers = _servers(ctx, servers_open)
            # all_at_once: a variant's server starts as soon as its weights are written, beside the next
            # variant's quantization, so quantizing hides behind the starts instead of preceding them
            # (issue 31: of the first wave only; later waves start when the one before is done; not on a cluster,
            # where a server up early could hold the GPU or slot a later quantize task waits for)
            ready = (lambda v: ctx.placement.variants[v.name].wave == 0 and _prestart(ctx, v, levels, servers)) \
                if st.servers == "all_at_once" and cluster is None else None
            _quantize_all(st, model, pages_dir, out, clock, ready=ready, cluster=cluster)
            _serve_all(ctx, levels, servers)
        if stop_after == "serve":
            return {}
        # score (from the records; seconds)
        metrics = parse_metric_list(st.metrics)
        scores: dict[tuple[str, int], dict[str, dict]] = {}
        with clock.stage("score", "score", unit="run") as stage:
            for v in st.variants:
                rdir = out / "runs" / v.name
                for c in sorted({int(x["concurrency"]) for x in _levels(rdir)}):
                    preds = load_predictions(rdir, ps, st.split, c)
                    # a sequential pass scores the pages it served; the fixed design scores a missing page as empty
                    rows = score_pages(ps, preds, metrics, st.split, only=set(preds) if plan else None)
                    if st.limit:
                        rows = [r for r in rows if r["page_id"] in preds]
                    write_scores(out / score_file(v.name, c), rows)
                    scores[(v.name, c)] = {r["page_id"]: r for r in rows}
                    stage.advance()
        if stop_after == "score":
            return {}
        # compare at the first concurrency level (the baseline's other level is its noise run), report. The
        # verdicts are made from the score files just written, the way the gate makes them again.
        c0 = st.concurrency[0]
        with clock.stage("report", "compare and report", unit=None):
            decisions: dict = {}
            verdicts, lm_verdicts = study_verdicts(st, out, pages_file=judged_pages(pages_dir, out), decisions=decisions)
            lm = {"verdicts": lm_verdicts, "runs": lmeval_runs(st, out)} if st.lm_eval else None
            inputs = verdict_inputs(st, out, judged_pages(pages_dir, out))
            worst = worst_pages(st, ps, out, scores, c0)
            report = build_report(st.model_dump(), out, ps.sha256, variants, verdicts, c0, noise_level, worst,
                                  lm_eval=lm, inputs=inputs, sequential=decisions or None,
                                  time_budget=time_budget(st, out, clock))
            write_reports(report, out)
        return report


def _pages(st: Study, base: Path, out: Path, clock: Clock) -> Path:
    """The study's page set: its folder, or the synthetic set under ``out/pages``, rebuilt when the recorded
    spec differs from the study's (``heldout.synth_reuse``)."""
    from quantgate.pages.synth_reuse import ensure_synth_pages

    if not st.pages.synth:
        return resolve_path(base, st.pages.path)
    pages_dir, sy = out / "pages", st.pages.synth
    with clock.stage("pages", f"pages: {sy.n} synthetic ({sy.profile})", unit=None) as stage:
        if not ensure_synth_pages(pages_dir, **sy.model_dump(), log=clock.console.detail):
            stage.reused = True
            stage.set_note("reused")
    return pages_dir


def _quantize_all(st: Study, model: Path, pages_dir: Path, out: Path, clock: Clock,
                  ready: Callable[[VariantSpec], None] | None = None, cluster=None) -> None:
    """Every variant's weights under ``out/variants/<name>`` (reused when their inputs match); ``ready(v)``
    is called as each one is written. ``cluster``: each quantize runs as a Ray task on a node (issue 31)."""
    from quantgate.quantize import quantize

    quantize = cluster.quantize if cluster else quantize

    for v in st.variants:
        vdir = out / "variants" / v.name
        with clock.stage("quantize", f"quantize {v.name} ({v.recipe})", unit=None, variant=v.name) as stage:
            def log(msg: str, stage=stage) -> None:
                if "reusing it" in msg:
                    stage.reused = True
                    stage.set_note("reused")
                elif msg.startswith("calibrating on"):
                    stage.set_note(msg.split(" from ")[0])
                clock.console.detail(msg)

            quantize(model, v.recipe, vdir, calibration=pages_dir, samples=st.calibration_samples, prompt=st.prompt,
                     overwrite=True, record_root=out, log=log)
        if ready is not None:
            ready(v)


def _servers(ctx: _Ctx, stack: ExitStack) -> dict:
    """One (not yet started) server per variant, each stopped when ``stack`` closes, whatever happens."""
    from quantgate.schema.run import ServerLayout
    from quantgate.serve.backends.derive import backend_from_spec
    from quantgate.serve.server import SharedServer
    from quantgate.study.placement import placement_env, variant_backend

    st, clock = ctx.st, ctx.clock
    at_once = st.servers == "all_at_once"

    def server_for(i: int, v: VariantSpec) -> SharedServer:
        def starting(name: str, background: bool):
            if at_once:
                beside = " (with the others)"
            else:
                beside = " (beside the previous variant's lm-eval)" if ctx.lm is not None else " (begun in the background)"
            label = f"{v.name}: {name} start" + (beside if background else "")
            return clock.stage("server_start", label, unit=None, variant=v.name, background=background)

        # issue 31: the variant's GPUs from the placement, its own backend options (TP/DP), a Ray actor on a cluster
        placed = ctx.placement.variants[v.name]
        env = {**v.server_env, **placement_env(placed)}
        gpu = env.get("CUDA_VISIBLE_DEVICES") if placed.placed_by == "study" else None
        layout = ServerLayout(servers=st.servers, servers_in_study=len(st.variants), gpu=gpu, env=dict(v.server_env),
                              placement=placed.model_copy(deep=True))
        server_class = ctx.cluster.server_class if ctx.cluster else SharedServer
        return server_class(backend_from_spec(variant_backend(ctx.backend, v), v.server_args), ctx.variants[v.name],
                            ctx.out / "runs" / v.name / "server.log", clock.console.detail, starting, env=env,
                            layout=layout)

    servers = {v.name: server_for(i, v) for i, v in enumerate(st.variants)}
    for server in servers.values():
        stack.enter_context(server)
    return servers


def _prestart(ctx: _Ctx, v: VariantSpec, levels: dict[str, list[int]], servers: dict) -> None:
    if _needs_server(ctx, v, levels[v.name]):
        servers[v.name].prestart()


def _serve_all(ctx: _Ctx, levels: dict[str, list[int]], servers: dict) -> None:
    """Each variant through its server (``_servers``) for its page runs and then its lm-eval run; the variants'
    pages one variant at a time (a speed level is measured with only its own server busy).

    ``servers: one_at_a_time``: the next variant's server starts in the background during this one's
    lm-eval (never during page runs). ``all_at_once``: every server that has anything to serve has been
    started as its variant was quantized (``_quantize_all``'s ``ready``), so the starts (vLLM's compiles)
    overlap each other and the later quantizations; page runs begin once every start has ended, and each
    server is stopped when its variant is done."""
    st = ctx.st
    # sequential: the baseline first, to the whole page budget, so every page a candidate is judged on has its score
    order = sorted(st.variants, key=lambda v: v.name != st.baseline) if st.sequential else list(st.variants)
    if st.servers == "all_at_once":  # issue 31: wave by wave (quantgate.study.placement)
        for wave in ctx.placement.waves:
            here = [v for v in order if v.name in wave]
            for v in here:
                _prestart(ctx, v, levels, servers)  # no-op for those started during quantization
            for v in here:
                servers[v.name].wait_started()  # no page is timed while another server compiles
            for v in here:
                _serve_on(ctx, v, levels[v.name], servers[v.name], None)
                servers[v.name].close()
        return
    for i, v in enumerate(order):
        nxt = order[i + 1] if i + 1 < len(order) else None
        beside = nxt is not None and _may_share_device(st, ctx.backend, v, nxt, ctx.placement)
        prestart = servers[nxt.name].prestart if beside and _needs_server(ctx, nxt, levels[nxt.name]) else None
        _serve_on(ctx, v, levels[v.name], servers[v.name], prestart)
        servers[v.name].close()


def _may_share_device(st: Study, backend, a: VariantSpec, b: VariantSpec, placement=None) -> bool:
    """Whether b's server may start while a's still runs: not when both are GPU servers that each take most of
    one GPU's memory by default (vLLM refuses to start below its memory fraction) — unless the study sets the
    fractions, or places them on different GPUs (``placement.may_run_together``)."""
    from quantgate.study.placement import may_run_together, plan_placement

    return may_run_together(placement or plan_placement(st), a.name, b.name)


def _serve_on(ctx: _Ctx, v: VariantSpec, levels: list[int], server, prestart_next) -> None:
    """``_serve_variant``; on a cluster, started again on another node when its server's node is lost (issue 31)."""
    if ctx.cluster is None:
        return _serve_variant(ctx, v, levels, server, prestart_next)
    from quantgate.study.cluster_server import survive

    survive(lambda: _serve_variant(ctx, v, levels, server, prestart_next), server, ctx.clock.console.detail)


def _needs_server(ctx: _Ctx, v: VariantSpec, levels: list[int]) -> bool:
    """Whether a variant has anything left to send — a guess from its files that decides only whether
    its server is started ahead of time; the page runs and lm-eval decide for themselves."""
    if ctx.lm is not None and not ctx.lm.done(ctx.variants[v.name], ctx.out / "lmeval" / v.name):
        return True
    run = ctx.out / "runs" / v.name / "run.json"
    if not run.is_file():
        return True
    man = json.loads(run.read_text("utf-8"))
    have = {lv["concurrency"]: lv for lv in man.get("levels", [])}
    c0 = ctx.st.concurrency[0]
    if ctx.plan is not None and c0 in have:
        seq = man.get("sequential") or {}
        finished = seq.get("stop") if v.name != ctx.st.baseline else have[c0]["n_requests"] >= ctx.plan.n_max
        if not finished:
            return True
        levels = [c for c in levels if c != c0]
    return any(c not in have or have[c]["n_requests"] < ctx.n_pages or have[c]["n_errors"] for c in levels)


def _serve_variant(ctx: _Ctx, v: VariantSpec, levels: list[int], server, prestart_next) -> None:
    """One variant's page runs at its levels, then its lm-eval run, through ``server`` (started on first
    use: not at all when everything is recorded). ``prestart_next`` starts the next variant's server
    once the page runs are done."""
    from quantgate.serve import serve_variant
    from quantgate.study.sequential import accuracy_pass

    st, clock, vdir = ctx.st, ctx.clock, ctx.variants[v.name]
    rdir = ctx.out / "runs" / v.name
    noise = variant_levels(st)[1]
    stages = ExitStack()

    def on_level(c: int, n: int | None):
        what = " (noise run)" if v.name == st.baseline and c == noise else ""
        if ctx.plan is not None and c == st.concurrency[0]:
            what = " (sequential)" if v.name != st.baseline else " (sequential page budget)"
        stage = stages.enter_context(clock.stage("pages_run", f"{v.name}: pages at concurrency {c}{what}", n,
                                                 variant=v.name, concurrency=c))
        return lambda rec: stage.advance()

    with stages:
        serve_variant(vdir, ctx.pages_dir, server.backend, rdir, split=st.split, concurrency=levels,
                      max_tokens=st.max_tokens, prompt=st.prompt, slo_s=st.slo_s, timeout_s=st.timeout_s,
                      limit=st.limit, overwrite=True, on_level=on_level, level_done=lambda c: stages.close(),
                      server=server, record_root=ctx.out, layout=server.layout, log=clock.console.detail,
                      batches=None if ctx.plan is None else {st.concurrency[0]: accuracy_pass(
                          st, ctx.plan, ctx.ps, ctx.out, v.name, variant_levels(st)[1], clock.console.detail)})
    if prestart_next:
        prestart_next()
    lm_out = ctx.out / "lmeval" / v.name
    if ctx.lm is not None and not ctx.lm.done(vdir, lm_out):
        server.endpoint()  # a start (a resumed study's) is its own stage, not lm-eval's time
        with clock.stage("lmeval", f"{v.name}: lm-eval {', '.join(ctx.lm.tasks)}", unit="request",
                         variant=v.name) as stage:
            run_variant_lmeval(ctx.lm, vdir, server.backend, lm_out, server=server, on_response=stage.advance,
                               record_root=ctx.out, log=clock.console.detail)


def _levels(rdir: Path) -> list[dict[str, Any]]:
    return json.loads((rdir / "run.json").read_text("utf-8"))["levels"]


def judged_pages(pages_dir: Path, out: Path) -> Path:
    """The judged page set's pages.jsonl inside the study folder: the set's own when it lies there (synthetic
    pages), else a copy (``judged-pages.jsonl``), so the gate can re-hash it wherever the folder goes."""
    from quantgate.io.fileio import atomic_write_bytes

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
