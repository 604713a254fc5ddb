"""``quantgate study STUDY.yaml``: quantize → serve → score → compare → report, resumable.

Each step writes its files before the next starts and is skipped when its inputs are unchanged:
variants are reused when their fingerprint (weights, recipe, calibration pages) matches, runs
resume request by request (and restart when the variant's weights changed), scores and verdicts
are recomputed from the records (seconds). Killing it anywhere and rerunning completes the study
with nothing lost or repeated. One study per output folder at a time (a lock file).

This module orchestrates the stages only: each is a library function called with records and returning
records (``quantize`` → ``QuantizeResult``, ``serve_variant`` → ``RunManifest``, ``score_pages`` →
``ScoreRow``s, the verdicts, ``build_summary`` → ``Summary``); the study's outcome is a ``StudyOutcome``.
Each variant's server is started once for its page runs and its lm-eval run (``SharedServer``); each step is
one console stage and one line of ``timings.jsonl`` (``quantgate.study.timings``)."""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import ExitStack, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from quantgate.io.console import Console, console_for
from quantgate.io.fileio import atomic_write_json, exclusive_lock
from quantgate.io.pageset import PageSet
from quantgate.judge.replay import Plan
from quantgate.schema.base import read_record_file
from quantgate.schema.placement import Placement
from quantgate.schema.run import RunManifest
from quantgate.schema.scores import ScoreRow
from quantgate.schema.sequential import SequentialDecision
from quantgate.schema.study import StudyOutcome, VariantSpec
from quantgate.schema.summary import STUDY_AS_RUN, LmEvalSection, Summary
from quantgate.serve.backends import BackendOptions
from quantgate.serve.server import SharedServer
from quantgate.study.lmeval import LmEvalPlan, lmeval_runs, plan_lmeval, run_variant_lmeval
from quantgate.study.spec import Study, load_study, resolve_path
from quantgate.study.timings import Clock, time_budget
from quantgate.study.verdicts import (
    EMPTY_SCORES,
    LOCK,
    empty_output_scores,
    relative_inside,
    score_file,
    speed_intervals,
    study_verdicts,
    verdict_inputs,
)
from quantgate.study.worst import worst_pages

if TYPE_CHECKING:
    from quantgate.study.cluster import Cluster
    from quantgate.study.preflight import Prepared

Scores = dict[tuple[str, int], dict[str, ScoreRow]]


def study_lock(out: Path):
    """One study per output folder at a time (``gate`` refuses while it is held: ``study_writing``)."""
    return exclusive_lock(Path(out) / LOCK, f"{out}: another quantgate study is running on this folder; wait "
                          "for it or use another -o")


def study_output(study_path: Path, out: Path | None = None, st: Study | None = None) -> Path:
    """The folder a study writes to: ``-o``, else the study's ``output`` (relative to the study file), else
    ``<name>-out`` beside it. ``st``: the study, already loaded."""
    st = st or load_study(study_path)
    return Path(out) if out else resolve_path(Path(study_path).resolve().parent, st.output or f"{st.name}-out")


@dataclass
class _Ctx:
    """A study run: its settings and folders, and what the steps before serving settled."""

    st: Study
    out: Path
    pages_dir: Path
    ps: PageSet
    clock: Clock
    lm: LmEvalPlan | None
    backend: BackendOptions  # the study's backend block, its paths resolved against the study
    plan: Plan | None  # a sequential study's plan
    placement: Placement | None = None  # each variant's GPUs, wave and parallel settings (study.placement)
    cluster: Cluster | None = None  # the Ray cluster quantize and servers run on (study.cluster), or None

    @property
    def n_pages(self) -> int:
        """Pages each level sends."""
        return len(self.ps.split(self.st.split)[: self.st.limit or None])

    def variant_dir(self, name: str) -> Path:
        return self.out / "variants" / name

    def run_dir(self, name: str) -> Path:
        return self.out / "runs" / name


def run_study(study_path: Path, out: Path | None = None, console: Console | None = None,
              stop_after: Literal["quantize", "serve", "score"] | None = None,
              log: Callable[[str], None] | None = None, ray: str | None = None,
              prepared: Prepared | None = None) -> StudyOutcome:
    """Run (or resume) the study. ``stop_after`` ends early — for tests. ``log``: instead of a console, every
    line (stages and details) goes to this function. ``ray``: a Ray address (``--ray``), over the study's
    ``cluster:``. ``prepared``: the checks ``study.preflight`` made already."""
    t_start = time.time()
    console = console or (console_for(log) if log else Console())
    study_path = Path(study_path)
    st = load_study(study_path)  # every field and number checked before any page, weight or server
    base = study_path.resolve().parent
    out = study_output(study_path, out, st)
    # the placement (GPU pool, TP/DP, heads) and the cluster (address, every node's storage) are
    # checked before any work (study.preflight); a cluster is left when the study ends
    from quantgate.study.placement import describe
    from quantgate.study.preflight import prepare

    prepared = prepared or prepare(st, base, out, ray, console.detail)
    cluster, placement = prepared.cluster, prepared.placement
    for line in [*(prepared.overlap.lines() if prepared.overlap else []), *describe(placement)]:
        console.detail(line)
    with study_lock(out), (cluster or nullcontext()):
        atomic_write_json(out / STUDY_AS_RUN, st.model_dump())
        ctx = _prepare(st, base, out, Clock(out, console, start=t_start))
        ctx.placement, ctx.cluster = placement, cluster
        model = resolve_path(base, st.model)
        if stop_after == "quantize":
            _quantize_all(ctx, model)
            return StudyOutcome(out=str(out), stopped_after="quantize")
        with ExitStack() as servers_open:
            servers = _servers(ctx, servers_open)
            # all_at_once: a variant's server starts as soon as its weights are written, beside the next
            # variant's quantization, so quantizing hides behind the starts instead of preceding them
            # (of the first wave only; later waves start when the one before is done; not on a cluster,
            # where a server up early could hold the GPU or slot a later quantize task waits for)
            ready = (lambda v: ctx.placement.variants[v.name].wave == 0 and _prestart(ctx, v, servers)) \
                if placement.request.servers == "all_at_once" and cluster is None else None
            if cluster is None:  # FlashInfer's JIT build beside the quantizations, not inside a server start
                from quantgate.study.warm import warm_in_background

                warm_in_background(ctx.backend, ctx.clock.console.detail)
            _quantize_all(ctx, model, ready=ready)
            _serve_all(ctx, servers)
        if stop_after == "serve":
            return StudyOutcome(out=str(out), stopped_after="serve")
        scores = _score_all(ctx)
        if stop_after == "score":
            return StudyOutcome(out=str(out), stopped_after="score")
        return StudyOutcome(out=str(out), summary=_report(ctx, scores))


def _prepare(st: Study, base: Path, out: Path, clock: Clock) -> _Ctx:
    """The page set (synthesized when the study asks), a sequential study's plan (its page budget checked
    before anything is quantized or served), the lm-eval tasks, and the backend's paths resolved."""
    from quantgate.io.pageset import load_pageset, verify_page_files
    from quantgate.study.plan import study_plan

    pages_dir, verified = _pages(st, base, out, clock)
    ps = load_pageset(pages_dir)
    if not verified:  # on every start: nothing is reused, served or scored from a page that changed
        verify_page_files(ps)
        _draw_stands(st, ps)  # (a set copied in was checked where the user keeps it, before the copy)
    plan = study_plan(st, judged_pages(pages_dir, out)) if st.sequential else None
    return _Ctx(st, out, pages_dir, ps, clock, plan_lmeval(st, base, out, pages_dir) if st.lm_eval else None,
                st.backend.resolved(base, out), plan)


def _draw_stands(st: Study, ps) -> None:
    """An edited or stale labeling draw stops the study before anything is served, by the rule its verdicts apply
    (``heldout.label.checked_sample_status``; ``study.judged``), naming the set's pageset.json."""
    from quantgate.heldout.label import checked_sample_status
    from quantgate.study.judged import judges_without_truth

    if judges_without_truth(st, ps):  # (only then is the draw read)
        checked_sample_status(ps)


def _pages(st: Study, base: Path, out: Path, clock: Clock) -> tuple[Path, bool]:
    """(the study's page set, whether its files were hashed already): its folder when it lies in the study folder;
    a set outside it copied into ``out/pages`` (``study.pagecopy``: the gate then binds its images and truths);
    or the synthetic set under ``out/pages``, rebuilt when the recorded spec differs (``pages.synth_reuse``)."""
    from quantgate.heldout.synth_reuse import ensure_synth_pages
    from quantgate.io.pageset import load_pageset
    from quantgate.study.pagecopy import COPY_DIR, ensure_page_copy

    if not st.pages.synth:
        src = resolve_path(base, st.pages.path or "")
        if relative_inside(src, out) is not None:
            return src, False
        _draw_stands(st, load_pageset(src))
        with clock.stage("pages", f"pages: {src} copied into {out / COPY_DIR}", unit=None) as stage:
            if ensure_page_copy(src, out, clock.console.detail):
                stage.reused = True
                stage.set_note("reused")
        return out / COPY_DIR, True
    pages_dir, sy = out / "pages", st.pages.synth
    with clock.stage("pages", f"pages: {sy.n} synthetic ({sy.profile})", unit=None) as stage:
        if not ensure_synth_pages(pages_dir, **sy.model_dump(), log=clock.console.detail):
            stage.reused = True
            stage.set_note("reused")
    return pages_dir, False


def _quantize_all(ctx: _Ctx, model: Path, ready: Callable[[VariantSpec], None] | None = None) -> None:
    """Every variant's weights under ``out/variants/<name>`` (reused when their inputs match); ``ready(v)``
    is called as each one is written. On a cluster each quantize runs as a Ray task on a node."""
    from quantgate.quantize import quantize

    quantize = ctx.cluster.quantize if ctx.cluster else quantize
    st, clock = ctx.st, ctx.clock
    for v in st.variants:
        with clock.stage("quantize", f"quantize {v.name} ({v.recipe})", unit=None, variant=v.name) as stage:
            result = quantize(model, v.recipe, ctx.variant_dir(v.name), calibration=ctx.pages_dir,
                              samples=st.calibration_samples, prompt=st.prompt, overwrite=True, record_root=ctx.out,
                              log=clock.console.detail, note=stage.set_note)
            if result.reused:
                stage.reused = True
                stage.set_note("reused")
        if ready is not None:
            ready(v)


def _servers(ctx: _Ctx, stack: ExitStack) -> dict[str, SharedServer]:
    """One (not yet started) server per variant, each stopped when ``stack`` closes, whatever happens."""
    from quantgate.quantize.store import serving_path
    from quantgate.schema.run import ServerLayout
    from quantgate.serve.backends.derive import backend_from_spec
    from quantgate.study.placement import placement_env, variant_backend
    from quantgate.study.profile import profiler_args

    st, clock = ctx.st, ctx.clock
    at_once = ctx.placement.request.servers == "all_at_once"  # servers: auto settled by its memory plan

    def server_for(i: int, v: VariantSpec) -> SharedServer:
        def starting(name: str, background: bool):
            if at_once:
                beside = " (with the others)"
            else:
                beside = " (beside the previous variant's lm-eval)" if ctx.lm is not None else " (begun in the background)"
            label = f"{v.name}: {name} start" + (beside if background else "")
            return clock.stage("server_start", label, unit=None, variant=v.name, background=background)

        # the variant's GPUs from the placement, its own backend options (TP/DP), a Ray actor on a cluster
        placed = ctx.placement.variants[v.name]
        env = {**v.server_env, **placement_env(placed)}
        gpu = env.get("CUDA_VISIBLE_DEVICES") if placed.placed_by == "study" else None
        layout = ServerLayout(servers=ctx.placement.request.servers, servers_in_study=len(st.variants), gpu=gpu,
                              env=dict(v.server_env),
                              placement=placed.model_copy(deep=True))
        server_class = ctx.cluster.server_class if ctx.cluster else SharedServer
        vb = variant_backend(ctx.backend, v)
        if placed.memory_fraction and getattr(vb, "gpu_memory_utilization", 0) is None:  # servers: auto's share
            vb = vb.model_copy(update={"gpu_memory_utilization": placed.memory_fraction})
        # speed.profile: vLLM's profiler armed at start (only /start_profile, after the waves, turns it on)
        args = [*v.server_args, *profiler_args(st, ctx.out, v, list(getattr(vb, "extra_args", [])))]
        # on this machine, a variant its store holds is served from the store's folder (vLLM's compile cache is
        # keyed by the served path: one path per variant, so a second study starts warm)
        local = {} if ctx.cluster else {"serve_from": serving_path}
        return server_class(backend_from_spec(vb, args), ctx.variant_dir(v.name),
                            ctx.run_dir(v.name) / "server.log", clock.console.detail, starting, env=env,
                            layout=layout, **local)

    servers = {v.name: server_for(i, v) for i, v in enumerate(st.variants)}
    for server in servers.values():
        stack.enter_context(server)
    return servers


def _prestart(ctx: _Ctx, v: VariantSpec, servers: dict[str, SharedServer]) -> None:
    if _needs_server(ctx, v):
        servers[v.name].prestart()


def _serve_all(ctx: _Ctx, servers: dict[str, SharedServer]) -> None:
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
    if ctx.placement.request.servers == "all_at_once":  # wave by wave (quantgate.study.placement)
        for wave in ctx.placement.waves:
            here = [v for v in order if v.name in wave]
            for v in here:
                _prestart(ctx, v, servers)  # no-op for those started during quantization
            for v in here:
                servers[v.name].wait_started()  # no page is timed while another server compiles
            for v in here:
                _serve_on(ctx, v, servers[v.name], None)
                servers[v.name].close()
        return
    for i, v in enumerate(order):
        nxt = order[i + 1] if i + 1 < len(order) else None
        beside = nxt is not None and _may_share_device(ctx, v, nxt)
        prestart = servers[nxt.name].prestart if nxt is not None and beside and _needs_server(ctx, nxt) else None
        _serve_on(ctx, v, servers[v.name], prestart)
        servers[v.name].close()


def _may_share_device(ctx: _Ctx, a: VariantSpec, b: VariantSpec) -> bool:
    """Whether b's server may start while a's still runs: not when both are GPU servers that each take most of
    one GPU's memory as configured (vLLM refuses to start below its memory fraction) — unless the study places
    them on different GPUs (``placement.may_run_together``)."""
    from quantgate.study.placement import may_run_together

    return may_run_together(ctx.placement, a.name, b.name)


def _serve_on(ctx: _Ctx, v: VariantSpec, server: SharedServer, prestart_next: Callable[[], None] | None) -> None:
    """``_serve_variant``; on a cluster, started again on another node when its server's node is lost."""
    if ctx.cluster is None:
        return _serve_variant(ctx, v, server, prestart_next)
    from quantgate.study.cluster_server import survive

    survive(lambda: _serve_variant(ctx, v, server, prestart_next), server, ctx.clock.console.detail)


def _needs_server(ctx: _Ctx, v: VariantSpec) -> bool:
    """Whether a variant has anything left to send — a guess from its files that decides only whether
    its server is started ahead of time; the page runs and lm-eval decide for themselves."""
    if ctx.lm is not None and not ctx.lm.done(ctx.variant_dir(v.name), ctx.out / "lmeval" / v.name):
        return True
    path = ctx.run_dir(v.name) / "run.json"
    if not path.is_file():
        return True
    run = read_record_file(RunManifest, path)
    if _speed_left(ctx, v):
        return True
    from quantgate.study.profile import levels_left

    if levels_left(ctx.st, ctx.out, v.name):
        return True
    have = {lv.concurrency: lv for lv in run.levels}
    levels, c0 = ctx.st.levels_of(v.name), ctx.st.compare_level
    if ctx.plan is not None and c0 in have:
        finished = (run.sequential is not None and run.sequential.stop) if v.name != ctx.st.baseline \
            else have[c0].n_requests >= ctx.plan.n_max
        if not finished:
            return True
        levels = [c for c in levels if c != c0]
    return any(c not in have or have[c].n_requests < ctx.n_pages or have[c].n_errors for c in levels)


def _speed_left(ctx: _Ctx, v: VariantSpec) -> bool:
    """Whether a ``speed:`` study has waves of this variant not yet recorded whole."""
    from quantgate.serve.run import SPEED, load_records, speed_waves_left

    sw = ctx.st.speed_waves()
    return sw is not None and bool(speed_waves_left(load_records(ctx.run_dir(v.name), file=SPEED), sw))


def _serve_variant(ctx: _Ctx, v: VariantSpec, server: SharedServer, prestart_next: Callable[[], None] | None) -> None:
    """One variant's page runs at its levels, then its lm-eval run, through ``server`` (started on first
    use: not at all when everything is recorded). ``prestart_next`` starts the next variant's server
    once the page runs are done."""
    from quantgate.serve import ServeHooks, ServeOptions, serve_variant
    from quantgate.study.passes import accuracy_pass

    st, clock, vdir = ctx.st, ctx.clock, ctx.variant_dir(v.name)
    stages = ExitStack()

    def on_level(c: int, n: int | None):
        what = " (noise run)" if v.name == st.baseline and c == st.noise_level else ""
        if ctx.plan is not None and c == st.compare_level:
            what = " (sequential)" if v.name != st.baseline else " (sequential page budget)"
        stage = stages.enter_context(clock.stage("pages_run", f"{v.name}: pages at concurrency {c}{what}", n,
                                                 variant=v.name, concurrency=c))
        return lambda rec: stage.advance()

    def on_speed_level(c: int, n: int):  # the waves are speed, at any level (the accuracy level's too)
        stage = stages.enter_context(clock.stage("speed_waves", f"{v.name}: speed at concurrency {c} "
                                                 f"({st.speed.repeats} waves)", n, unit="request",
                                                 variant=v.name, concurrency=c))
        return lambda rec: stage.advance()

    options = ServeOptions(split=st.split, concurrency=st.levels_of(v.name), max_tokens=st.max_tokens,
                           prompt=st.prompt, slo_s=st.slo_s, timeout_s=st.timeout_s, limit=st.limit, overwrite=True,
                           record_root=ctx.out, speed=st.speed_waves())
    batches = {} if ctx.plan is None else {
        st.compare_level: accuracy_pass(st, ctx.plan, ctx.ps, ctx.out, v.name, clock.console.detail)}
    with stages:
        run = serve_variant(vdir, ctx.pages_dir, server.backend, ctx.run_dir(v.name), options,
                            ServeHooks(on_level=on_level, on_speed_level=on_speed_level,
                                       level_done=lambda c: stages.close(), server=server,
                                       layout=server.layout, batches=batches, log=clock.console.detail))
    stop_on_failed_level(v.name, ctx.run_dir(v.name), run)
    _profile(ctx, v, server)
    if prestart_next:
        prestart_next()
    lm_out = ctx.out / "lmeval" / v.name
    if ctx.lm is not None and not ctx.lm.done(vdir, lm_out):
        server.endpoint()  # a start (a resumed study's) is its own stage, not lm-eval's time
        with clock.stage("lmeval", f"{v.name}: lm-eval {', '.join(ctx.lm.tasks)}", unit="request",
                         variant=v.name) as stage:
            run_variant_lmeval(ctx.lm, vdir, server.backend, lm_out, server=server, on_response=stage.advance,
                               record_root=ctx.out, log=clock.console.detail)


def _profile(ctx: _Ctx, v: VariantSpec, server: SharedServer) -> None:
    """``speed.profile``: the variant's decode step at each listed level, on its own server after its waves
    (``quantgate.study.profile``), before the server is stopped or the next one starts."""
    from quantgate.study.profile import levels_left, profile_variant

    todo = levels_left(ctx.st, ctx.out, v.name)
    if not todo:
        return
    endpoint = server.endpoint()  # a resumed study whose waves were all recorded starts the server here
    label = f"{v.name}: decode profile at concurrency {', '.join(map(str, todo))}"
    with ctx.clock.stage("speed_profile", label, len(todo), unit="level", variant=v.name) as stage:
        profile_variant(ctx.st, ctx.out, ctx.ps, v, ctx.variant_dir(v.name), endpoint,
                        lambda line: (ctx.clock.console.detail(line), stage.advance()))


def stop_on_failed_level(variant: str, run_dir: Path, run: RunManifest) -> None:
    """A level where every request failed measured nothing: the study stops there (exit 4, as ``serve``), before
    anything is scored or a verdict is made from empty outputs; the rerun re-sends the failed pages."""
    from quantgate.errors import ServerError
    from quantgate.serve.run import failed_levels

    if failed := failed_levels(run_dir, run):
        raise ServerError(f"{variant}: {failed}")


def _score_all(ctx: _Ctx) -> Scores:
    """Every variant's records at every level it was served at, scored (from the records; seconds) and written
    to the score files the verdicts are made from."""
    from quantgate.io.scores import write_scores
    from quantgate.scoring import load_predictions, parse_metric_list, score_pages

    st, out, ps = ctx.st, ctx.out, ctx.ps
    from quantgate.study.judged import judged_pages, run_texts
    from quantgate.study.truthfree import write_bound_files

    metrics = parse_metric_list(st.metrics)
    scores: Scores = {}
    texts = {}  # (variant, level) -> page id -> output, for the truth-free bounds
    fill = None if ctx.plan or st.limit else [p.id for p in judged_pages(st, ps)]
    with ctx.clock.stage("score", "score", unit="run") as stage:
        for v in st.variants:
            rdir = ctx.run_dir(v.name)
            for c in sorted({lv.concurrency for lv in read_record_file(RunManifest, rdir / "run.json").levels}):
                preds = load_predictions(rdir, ps, st.split, c)
                texts[(v.name, c)] = run_texts(preds, fill)
                # a sequential pass scores the pages it served; the fixed design scores a missing page as empty
                rows = score_pages(ps, preds, metrics, st.split, only=set(preds) if ctx.plan else None)
                if st.limit:
                    rows = [r for r in rows if r.page_id in preds]
                write_scores(out / score_file(v.name, c), rows)
                scores[(v.name, c)] = {r.page_id: r for r in rows}
                stage.advance()
        # what an empty output scores on the judged pages: the mark every baseline must beat (study.verdicts)
        judged = [p.id for p in judged_pages(st, ps)]
        write_scores(out / EMPTY_SCORES, empty_output_scores(ps, metrics, st.split, judged))
        # pages with truth or without: what the outputs alone bound, beside the score files
        write_bound_files(st, out, texts, [m.name for m in metrics], {p.id: p.document for p in ps.pages})
    return scores


def _report(ctx: _Ctx, scores: Scores) -> Summary:
    """The verdicts at the first concurrency level (the baseline's other level is its noise run), made from the
    score files just written the way the gate makes them again, and the report."""
    from quantgate.reports import build_summary, write_reports
    from quantgate.study.truthfree import truth_claims

    st, out = ctx.st, ctx.out
    with ctx.clock.stage("report", "compare and report", unit=None):
        if ctx.st.speed is not None and ctx.st.speed.profile:
            from quantgate.study.profile import write_cost_table, write_prefill_table

            write_cost_table(out, ctx.clock.console.detail)
            write_prefill_table(out, [v.name for v in st.variants], st.baseline, ctx.clock.console.detail)
        decisions: dict[str, SequentialDecision] = {}
        pages_file = judged_pages(ctx.pages_dir, out)
        verdicts, lm_verdicts = study_verdicts(st, out, pages_file=pages_file, decisions=decisions)
        lm = LmEvalSection(verdicts=lm_verdicts or [], runs=lmeval_runs(st, out)) if st.lm_eval else None
        summary = build_summary(st, out, ctx.ps.sha256, {v.name: ctx.variant_dir(v.name) for v in st.variants},
                                verdicts, worst_pages(st, ctx.ps, out, scores, st.compare_level), lm_eval=lm,
                                inputs=verdict_inputs(st, out, pages_file), sequential=decisions or None,
                                time_budget=time_budget(st, out, ctx.clock), speed_intervals=speed_intervals(st, out),
                                **truth_claims(st, ctx.ps, out)._asdict())
        write_reports(summary, out)
        ctx.clock.console.detail(summary.truth.line())
    return summary


def judged_pages(pages_dir: Path, out: Path) -> Path:
    """The judged page set's pages.jsonl, inside the study folder (``_pages`` copies a set that lies outside it into
    ``out/pages``: ``study.pagecopy``), so the gate re-hashes it and its files wherever the folder goes."""
    src = Path(pages_dir) / "pages.jsonl"
    if relative_inside(src, out) is None:  # _pages never returns such a set; a caller that did is a bug
        raise AssertionError(f"{src} lies outside the study folder {out}")
    return src
