"""``quantgate serve``: one server per variant, every page of the split at each concurrency level,
one record per request, resumable."""

from __future__ import annotations

import asyncio
import math
import os
import uuid
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Protocol

from quantgate.errors import InputError, ServerError, UsageError
from quantgate.io.chain import Chain, run_anchor, verify_chain
from quantgate.io.fileio import atomic_write_json, read_jsonl, recorded_path
from quantgate.io.fingerprint import weights_fingerprint
from quantgate.io.modeldir import check_model_dir
from quantgate.schema.base import parse_record
from quantgate.schema.load import load_json
from quantgate.schema.placement import same_placement
from quantgate.schema.run import (
    DEFAULT_PROMPT,
    RequestRecord,
    RunManifest,
    SequentialStop,
    ServeOptions,
    ServerLayout,
    SpeedLevel,
)
from quantgate.schema.speed import SpeedWaves
from quantgate.serve.backends import Backend
from quantgate.serve.client import RequestSpec, run_level
from quantgate.serve.server import ManagedServer, SharedServer, log_tail
from quantgate.serve.stats import level_stats, max_concurrency_within_slo

REQUESTS = "requests.jsonl"
SPEED = "speed.jsonl"  # the speed levels' waves, apart from the page runs that are scored
RUN = "run.json"


class PageBatches(Protocol):
    """One level served in batches (a sequential accuracy pass, ``quantgate.study.passes``)."""

    record: SequentialStop | None  # what run.json records about the pass so far

    def next(self) -> list[str] | None:
        """The page ids (in serving order) to have served once the next batch is done, or None when finished;
        called again after each batch, its records appended."""


def load_records(run_dir: Path, *, latest: bool = True, file: str = REQUESTS,
                 anchor: str | None = None) -> list[RequestRecord]:
    """Records so far. A torn last line (a crash mid-append) is cut off, never mixed in. A failed
    request is re-sent on resume and its new record appended; with ``latest`` only the last record
    per (page, concurrency) is kept, so nothing is counted twice. ``file=SPEED``: the speed waves, every
    record (a wave is kept or re-sent whole, by ``speed_levels``). The record chain is verified (``io.chain``;
    ``anchor``: the run the first record must belong to) and a broken one refused, naming the file."""
    return _read_records(Path(run_dir), latest, anchor, file)[0]


def _read_records(run_dir: Path, latest: bool, anchor: str | None,
                  file: str = REQUESTS) -> tuple[list[RequestRecord], str | None]:
    path = run_dir / file
    if not path.is_file():
        return [], anchor
    lines = list(read_jsonl(path, repair_torn_tail=True))
    head = verify_chain(path, lines, anchor)
    recs = [parse_record(RequestRecord, obj, where=f"{path}:{no}") for no, obj in lines]
    if not latest or file == SPEED:
        return recs, head
    last = {(r.page_id, r.concurrency): r for r in recs}
    return [r for r in recs if last[(r.page_id, r.concurrency)] is r], head


def run_anchor_of(manifest: RunManifest) -> str:
    """The digest a run's first record points back to: what ``_resume`` takes as the same run — the variant by
    content (by its folder's name for a backend that serves no local weights, so a moved study keeps it), the
    backend, the pages, the prompt and the output length."""
    m = manifest
    return run_anchor({"variant": m.variant_fingerprint or Path(m.variant).name, "backend": m.backend,
                       "pageset_sha256": m.pageset_sha256, "split": m.split, "prompt": m.prompt,
                       "max_tokens": m.max_tokens, "ignore_eos": m.ignore_eos})


def speed_anchor_of(manifest: RunManifest) -> str:
    """The digest speed.jsonl's first record points back to: the run's anchor, as the run's speed waves."""
    return run_anchor({"speed_waves_of": run_anchor_of(manifest)})


def failed_levels(run_dir: Path, manifest: RunManifest) -> str | None:
    """One line naming the levels where every request failed (nothing was measured there) and the first error,
    or None. ``quantgate serve`` exits non-zero on it."""
    failed = [lv.concurrency for lv in manifest.levels if lv.n_requests and lv.n_errors == lv.n_requests]
    if not failed:
        return None
    first = next(r.error for r in load_records(run_dir) if r.concurrency == failed[0] and r.error)
    return (f"every request failed at concurrency {', '.join(map(str, failed))} (the first: {first}); the records "
            f"are in {Path(run_dir) / REQUESTS} — fix the server and rerun the same command to resend them")


def level_pages(pages: list, concurrency: int, waves: float | None) -> list:
    """The pages one level sends: all of them, or ``waves`` × concurrency (at least 3, for a p90)."""
    if waves is None:
        return pages
    return pages[: max(3, math.ceil(waves * concurrency))]


def _wave_groups(records: list[RequestRecord], c: int, k: int) -> list[list[RequestRecord]]:
    """Wave ``k`` of level ``c`` as each session sent it (a re-sent wave is a new session's group)."""
    by: dict[str | None, list[RequestRecord]] = {}
    for r in records:
        if r.concurrency == c and r.wave == k:
            by.setdefault(r.session, []).append(r)
    return sorted(by.values(), key=lambda g: min(r.start for r in g))


def _complete(group: list[RequestRecord], per_wave: int) -> bool:
    return len(group) == per_wave and all(r.error is None for r in group)


def speed_levels(records: list[RequestRecord], waves: SpeedWaves) -> list[SpeedLevel]:
    """Each speed level's complete waves (the last complete send of each), each wave's own ``level_stats``."""
    out = []
    for c in waves.levels:
        per, stats, incomplete = waves.per_wave(c), [], 0
        for k in range(waves.repeats):
            done = [g for g in _wave_groups(records, c, k) if _complete(g, per)]
            if done:
                stats.append(level_stats(done[-1], c))
            elif _wave_groups(records, c, k):
                incomplete += 1
        if stats or incomplete:
            out.append(SpeedLevel(concurrency=c, per_wave=per, ignore_eos=waves.ignore_eos, waves=stats,
                                  incomplete_waves=incomplete))
    return out


def speed_waves_left(records: list[RequestRecord], waves: SpeedWaves) -> list[tuple[int, int]]:
    """(level, wave) pairs not yet sent whole without an error."""
    return [(c, k) for c in waves.levels for k in range(waves.repeats)
            if not any(_complete(g, waves.per_wave(c)) for g in _wave_groups(records, c, k))]


@dataclass
class ServeHooks:
    """What a caller plugs into a run (a study: its console stages, its shared server, its sequential pass).

    ``on_level(c, n)`` is called before a level with the number of pages to send (None when served in
    batches) and may return a callback for each finished record; ``level_done(c)`` after it. ``server``: a
    shared server of this variant (started on first use, left running for its other users); without it one is
    started here, only when something is left to send, and stopped at the end. ``layout``: how a study placed
    this server, recorded when a server is started here (a resumed run with nothing to send keeps the layout it
    was served with). ``batches``: levels served batch by batch instead of all pages at once (``PageBatches``)."""

    on_level: Callable[[int, int | None], Callable[[RequestRecord], None] | None] | None = None
    # the speed waves of a level (``ServeOptions.speed``), called as on_level; without it, on_level is called
    on_speed_level: Callable[[int, int], Callable[[RequestRecord], None] | None] | None = None
    level_done: Callable[[int], None] | None = None
    server: SharedServer | None = None
    layout: ServerLayout | None = None
    batches: dict[int, PageBatches] = field(default_factory=dict)
    log: Callable[[str], None] = print


def serve_variant(variant: Path, pageset_dir: Path, backend: Backend, out: Path,
                  options: ServeOptions | None = None, hooks: ServeHooks | None = None) -> RunManifest:
    """Send every page of the split at each concurrency level; records are appended as requests finish, and
    ``run.json`` rewritten after each level (``options.record_root``: its paths relative to that folder when they
    lie inside it — a study passes its own; see ``fileio.recorded_path``)."""
    from quantgate.io.pageset import load_pageset

    o, h = options or ServeOptions(), hooks or ServeHooks()
    variant, out = Path(variant), Path(out)
    _check(o, h, backend, variant)
    ps = load_pageset(pageset_dir)
    pages = ps.split(o.split)[: o.limit or None]
    if not pages:
        raise InputError(f"{pageset_dir}: no pages in split {o.split!r}")
    out.mkdir(parents=True, exist_ok=True)
    manifest = _manifest(o, h, backend, variant, Path(pageset_dir), ps.sha256)
    _resume(manifest, out, o.overwrite, h.layout, o.speed)
    _set_numerics(manifest, backend, variant)
    run = _Run(variant, backend, out, o, h, manifest, {p.id: p for p in pages}, ps.image_bytes)
    with run:
        for c in o.concurrency:
            if c in h.batches:
                if run.serve_batches(c, h.batches[c]) and h.level_done:
                    h.level_done(c)
                continue
            todo = [p for p in level_pages(pages, c, o.waves) if (p.id, c) not in run.done]
            if not todo:
                continue
            run.request_spec()  # a server start is its own stage, not part of the level's
            run.send(c, todo, h.on_level(c, len(todo)) if h.on_level else None)
            if h.level_done:
                h.level_done(c)
        if o.speed is not None:
            run.send_speed(o.speed, pages)
    return _finish(manifest, run.records, o.concurrency, out)


def _check(o: ServeOptions, h: ServeHooks, backend: Backend, variant: Path) -> None:
    if backend.serves_local_weights:
        check_model_dir(variant)
    if not o.concurrency or any(c < 1 for c in o.concurrency):
        raise UsageError(f"--concurrency must list positive integers, got {list(o.concurrency)}")
    if o.waves is not None and o.waves <= 0:
        raise UsageError(f"--waves must be positive, got {o.waves}")
    unknown = sorted(set(h.batches) - set(o.concurrency))
    if unknown:
        raise InputError(f"batches for concurrency {unknown}, which is not among the levels {list(o.concurrency)}")


def neighbour_notes(layout: ServerLayout | None) -> list[str]:
    """A study's run measured while the other servers of its wave were up and idle (``servers: all_at_once``) says
    so beside its speed, with what was measured about it."""
    if layout is None or layout.servers != "all_at_once" or layout.servers_in_study < 2:
        return []
    p = layout.placement
    if p is not None and p.placed_by == "study" and not p.shares_gpu_with:
        return []  # a GPU of its own
    return ["speed measured with the study's other servers of this wave up and idle beside it (servers: all_at_once); "
            "on an H200 (2026-12-04) bf16 and fp8-dynamic measured alone and beside three idle servers gave "
            "speed-ups that agree with those measured alone within their 90 % intervals, the median wave's tok/s "
            "-4 % to +9 % of alone's, the drift between studies (lab/2026-12-04-ten-minutes/neighbours.json)"]


def _manifest(o: ServeOptions, h: ServeHooks, backend: Backend, variant: Path, pageset_dir: Path,
              pageset_sha256: str) -> RunManifest:
    """This run's ``run.json`` before anything is sent: what serves which pages, and how."""
    local = backend.serves_local_weights
    # a variant inside the study folder by its relative path, local weights or not: a moved study resumes
    return RunManifest(variant=recorded_path(variant, o.record_root),
                       variant_fingerprint=weights_fingerprint(variant) if local else None, backend=backend.name,
                       pageset=recorded_path(pageset_dir, o.record_root), pageset_sha256=pageset_sha256, split=o.split,
                       prompt=o.prompt or DEFAULT_PROMPT, max_tokens=o.max_tokens, slo_p90_latency_s=o.slo_s,
                       ignore_eos=o.ignore_eos, waves=o.waves, server_version=backend.server_version(),
                       notes=backend.notes(variant) + neighbour_notes(h.layout),
                       server_args=list(getattr(backend.options, "extra_args", [])),
                       server_env=dict(h.layout.env) if h.layout else {})


def _resume(manifest: RunManifest, out: Path, overwrite: bool, layout: ServerLayout | None = None,
            speed: SpeedWaves | None = None) -> None:
    """An earlier run in ``out`` of the same variant (by content), backend, pages, prompt and server flags is
    resumed: its records are kept and what its start recorded carries over. Another run is refused, or with
    ``overwrite`` its records discarded."""
    if not (out / RUN).is_file():
        return
    old = parse_record(RunManifest, load_json(out / RUN, "run manifest"), where=str(out / RUN))  # the loader's limits
    # Identity by content, not path: a moved study folder resumes instead of re-serving.
    ident = old.variant_fingerprint or old.variant
    m = manifest
    same = (ident, old.backend, old.pageset_sha256, old.split, old.prompt, old.max_tokens, old.ignore_eos) == \
           (m.variant_fingerprint or m.variant, m.backend, m.pageset_sha256, m.split, m.prompt, m.max_tokens,
            m.ignore_eos)
    # the server's own flags and environment are part of what was measured (an FP8 KV cache, a batch-invariant
    # mode); a run.json from before they were recorded (None) is taken as it is
    same = same and all(getattr(old, k) is None or getattr(old, k) == getattr(m, k) for k in ("server_args", "server_env"))
    # so are its parallel settings and the GPUs a study placed it on (schema.placement.same_placement)
    same = same and same_placement(old.layout, layout)
    # a speed level's waves measured with another wave size or output-length rule are another measurement
    if speed is not None:
        same = same and all((lv.per_wave, lv.ignore_eos) == (speed.per_wave(lv.concurrency), speed.ignore_eos)
                            for lv in old.speed if lv.concurrency in speed.levels)
    if not same and not overwrite:
        raise InputError(f"{out}: holds a run of {old.variant} ({old.backend}, split {old.split}, max_tokens "
                         f"{old.max_tokens}); choose another -o, or --overwrite to discard it")
    if not same:
        (out / REQUESTS).unlink(missing_ok=True)
        (out / SPEED).unlink(missing_ok=True)
    else:
        _keep_server_facts(m, old)


class _Run:
    """One invocation's sending: the records so far, the server (started on the first request that needs
    it), and each level or batch sent through the client."""

    def __init__(self, variant: Path, backend: Backend, out: Path, o: ServeOptions, h: ServeHooks,
                 manifest: RunManifest, by_id: dict, image_bytes: Callable):
        self.variant, self.backend, self.out, self.o, self.h = variant, backend, out, o, h
        self.manifest, self.by_id, self.image_bytes = manifest, by_id, image_bytes
        self.records, head = _read_records(out, True, run_anchor_of(manifest))
        self.chain = Chain(head or run_anchor_of(manifest))
        self.done = {(r.page_id, r.concurrency) for r in self.records if r.error is None}  # failed ones are re-sent
        self.session = uuid.uuid4().hex[:12]
        self.manifest.sequential = None
        self._stack = ExitStack()
        self._server: ManagedServer | None = None
        self._spec: RequestSpec | None = None

    def __enter__(self) -> _Run:
        return self

    def __exit__(self, *exc) -> None:
        self._stack.close()

    def request_spec(self) -> RequestSpec:
        """Where requests go; the server starts here, only when a level has something to send (a resumed study
        may have nothing)."""
        if self._spec is None:
            srv = self.h.server if self.h.server is not None else self._stack.enter_context(
                SharedServer(self.backend, self.variant, self.out / "server.log", self.h.log))
            ep = srv.endpoint()
            self._server = ep.server
            if ep.server is not None:
                self.manifest.server_command = ep.server.command
                self.manifest.layout = self.h.layout
            o = self.o
            self._spec = RequestSpec(base_url=ep.base_url, model=ep.model, prompt=o.prompt or DEFAULT_PROMPT,
                                     max_tokens=o.max_tokens, timeout_s=o.timeout_s, api_key=ep.api_key,
                                     extra_body={"ignore_eos": True} if o.ignore_eos else None)
        return self._spec

    def send(self, c: int, pending: list, cb, warmup: bool = True, batch: int | None = None) -> None:
        """Send ``pending`` at concurrency ``c``, append their records, and rewrite run.json."""
        # each batch its own session id: the level's speed (level_stats) then leaves out the looks between them
        loads = [(p.id, (lambda p=p: self.image_bytes(p))) for p in pending]
        spec = self.request_spec()
        before = self.backend.preemptions(spec.base_url)
        new = asyncio.run(run_level(spec, loads, c, self.out / REQUESTS,
                                    self.session if batch is None else f"{self.session}.{batch}", warmup=warmup,
                                    on_done=cb, chain=self.chain))
        self._count_preemptions(c, before, spec)
        retried = {(r.page_id, r.concurrency) for r in new}
        self.records = [r for r in self.records if (r.page_id, r.concurrency) not in retried] + new
        self._after_send()

    def _count_preemptions(self, c: int, before: int | None, spec: RequestSpec) -> None:
        """Add the server's preemptions over one send to level ``c``'s count (the counter is read before and after
        it, from the same server, so a restart between sends loses nothing)."""
        after = self.backend.preemptions(spec.base_url) if before is not None else None
        if after is None:
            return
        counts = dict(self.manifest.preemptions or {})
        counts[c] = counts.get(c, 0) + max(0, after - before)
        self.manifest.preemptions = counts

    def _after_send(self) -> None:
        srv = self._server
        if srv is not None and not srv.alive():
            raise ServerError(f"{srv.name} died during the run; log {srv.log_path} ends with:\n"
                              f"{log_tail(srv.log_path)}")
        _read_server_log(self.manifest, self.backend, srv)
        _set_numerics(self.manifest, self.backend, self.variant)  # vLLM: from the kernels this start's log names
        _finish(self.manifest, self.records, self.o.concurrency, self.out)

    def send_speed(self, sw: SpeedWaves, pages: list) -> None:
        """Each speed level's waves not yet recorded whole: wave k of level c is ``sw.per_wave(c)`` pages (cycled
        from page k × per_wave) sent together by one client call into speed.jsonl, its own session
        (``<session>.c<c>.w<k>``), so a wave never overlaps another and ``judge.speed.split_waves`` finds it from
        the records alone. Only the level's first wave has a warm-up request."""
        # speed.jsonl is chained like requests.jsonl, from its own anchor (the run's, marked as its speed file)
        anchor = speed_anchor_of(self.manifest)
        recs, head = _read_records(self.out, False, anchor, SPEED)
        chain = Chain(head or anchor)
        left = speed_waves_left(recs, sw)
        for c in sw.levels:
            todo = [k for (lc, k) in left if lc == c]
            if not todo:
                continue
            per = sw.per_wave(c)
            spec = self.request_spec()  # the server's start is not part of the level's stage
            if sw.ignore_eos != self.o.ignore_eos:
                spec = replace(spec, extra_body={"ignore_eos": True} if sw.ignore_eos else None)
            on = self.h.on_speed_level or self.h.on_level
            cb = on(c, per * len(todo)) if on else None
            for i, k in enumerate(todo):
                wave = [pages[(k * per + j) % len(pages)] for j in range(per)]
                loads = [(p.id, (lambda p=p: self.image_bytes(p))) for p in wave]
                before = self.backend.preemptions(spec.base_url)
                recs += asyncio.run(run_level(spec, loads, c, self.out / SPEED, f"{self.session}.c{c}.w{k}",
                                              warmup=i == 0, on_done=cb, wave=k, chain=chain))
                self._count_preemptions(c, before, spec)
                self.manifest.speed = speed_levels(recs, sw)
                self._after_send()
            if self.h.level_done:
                self.h.level_done(c)
        self.manifest.speed = speed_levels(recs, sw)

    def served(self, c: int) -> set[str]:
        return {r.page_id for r in self.records if r.concurrency == c and r.error is None}

    def serve_batches(self, c: int, batches: PageBatches) -> bool:
        """One level served batch by batch: ``batches.next()`` names the pages to have served by the end of the
        next batch (or None: the level is finished); after each, its ``record`` goes into run.json. Whether any
        page was sent."""
        cb, sent, n = None, False, 0
        while True:
            ids = batches.next()
            self.manifest.sequential = batches.record
            if ids is None:
                return sent
            unknown = [i for i in ids if i not in self.by_id]
            if unknown:
                raise InputError(f"batch pages {unknown[:5]} are not pages of the split being served")
            have = self.served(c)
            pending = [self.by_id[i] for i in ids if i not in have]
            if not pending:
                raise RuntimeError(f"concurrency {c}: the next batch names only pages already served; it would "
                                   "never end")
            if not sent:
                self.request_spec()  # the server, started before the level's stage opens
                cb = self.h.on_level(c, None) if self.h.on_level else None
            self.send(c, pending, cb, warmup=not sent, batch=n)  # later batches find the server warm: no warm-up
            sent, n = True, n + 1


# Notes an older quantgate wrote about numerics without measuring them (run.json before `numerics`);
# a resumed run drops them, and the measured ones (numerics_notes) take their place.
_RETRACTED = ("transformers serve decompresses compressed-tensors weights to BF16 at load",
              "NVFP4 ran through Marlin weight-only kernels")


def _keep_server_facts(manifest: RunManifest, old: RunManifest) -> None:
    """A resumed run keeps what an earlier start of the same run recorded (the command, the version and
    kernels read from the server's log, its notes); a start in this invocation replaces them."""
    manifest.server_command = old.server_command
    manifest.server_version = manifest.server_version or old.server_version
    manifest.kernels = {s: dict(k) for s, k in old.kernels.items()}
    manifest.engine = old.engine
    manifest.layout = old.layout
    manifest.numerics = old.numerics
    manifest.preemptions = old.preemptions  # counts of the records kept; a resumed send adds to them
    manifest.notes += [n for n in old.notes if n not in manifest.notes and not n.startswith(_RETRACTED)]


def _set_numerics(manifest: RunManifest, backend: Backend, variant: Path) -> None:
    """``numerics`` from the variant's formats, the backend and the kernels known now; its notes
    replace the ones an earlier value wrote (a vLLM run learns its kernels only after the start)."""
    from quantgate.serve.numerics import numerics_notes

    stale = set(numerics_notes(manifest.numerics)) if manifest.numerics else set()
    manifest.numerics = backend.numerics(variant, manifest.kernels)
    fresh = numerics_notes(manifest.numerics) if manifest.numerics else []
    manifest.notes = [n for n in manifest.notes if n not in stale and n not in fresh] + fresh


def _read_server_log(manifest: RunManifest, backend: Backend, server) -> None:
    if server is None or not server.log_path.is_file():
        return
    text = server.log_text()  # this start's lines only: the file is appended across starts
    facts = backend.read_log(text)
    if facts.server_version:
        manifest.server_version = facts.server_version
    if facts.kernels is not None:
        manifest.kernels = {s: dict(k) for s, k in facts.kernels.items()}
    manifest.engine = engine_settings(backend, server, text)
    manifest.notes += [n for n in facts.notes if n not in manifest.notes]


def engine_settings(backend: Backend, server, text: str):
    """The backend's engine settings for this start, with what only the starter saw: the environment the
    server got (the variables the backend names, when set) and the seconds it took to become healthy."""
    engine = backend.engine_settings(text)
    if engine is None:
        return None
    env = {**os.environ, **(server.env or {})}
    engine.env = {k: env[k] for k in backend.engine_env if k in env}
    engine.start_s = server.start_s
    return engine


def _finish(manifest: RunManifest, records, concurrency, out: Path) -> RunManifest:
    manifest.levels = [level_stats(records, c) for c in concurrency if any(r.concurrency == c for r in records)]
    manifest.max_concurrency_within_slo = max_concurrency_within_slo(manifest.levels, manifest.slo_p90_latency_s)
    atomic_write_json(out / RUN, manifest.model_dump())
    return manifest
