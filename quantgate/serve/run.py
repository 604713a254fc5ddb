"""``quantgate serve``: one server per variant, every page of the split at each concurrency level,
one record per request, resumable."""

from __future__ import annotations

import asyncio
import json
import math
import os
import uuid
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Protocol

from quantgate.errors import InputError, ServerError
from quantgate.io.fileio import atomic_write_json, read_jsonl, recorded_path
from quantgate.io.fingerprint import weights_fingerprint
from quantgate.io.modeldir import check_model_dir
from quantgate.schema.placement import same_placement
from quantgate.schema.run import RequestRecord, RunManifest, SequentialStop, ServerLayout, parse_record
from quantgate.serve.backends import Backend
from quantgate.serve.client import RequestSpec, run_level
from quantgate.serve.server import SharedServer, log_tail
from quantgate.serve.stats import level_stats, max_concurrency_within_slo

REQUESTS = "requests.jsonl"
RUN = "run.json"
DEFAULT_MAX_TOKENS = 1024


class PageBatches(Protocol):
    """One level served in batches (a sequential accuracy pass, ``quantgate.study.sequential``)."""

    record: SequentialStop | None  # what run.json records about the pass so far

    def next(self) -> list[str] | None:
        """The page ids (in serving order) to have served once the next batch is done, or None when finished;
        called again after each batch, its records appended."""


def load_records(run_dir: Path, *, latest: bool = True) -> list[RequestRecord]:
    """Records so far. A torn last line (a crash mid-append) is cut off, never mixed in. A failed
    request is re-sent on resume and its new record appended; with ``latest`` only the last record
    per (page, concurrency) is kept, so nothing is counted twice."""
    path = Path(run_dir) / REQUESTS
    if not path.is_file():
        return []
    recs = [parse_record(RequestRecord, obj, where=f"{path}:{no}") for no, obj in read_jsonl(path, repair_torn_tail=True)]
    if not latest:
        return recs
    last = {(r.page_id, r.concurrency): r for r in recs}
    return [r for r in recs if last[(r.page_id, r.concurrency)] is r]


def level_pages(pages: list, concurrency: int, waves: float | None) -> list:
    """The pages one level sends: all of them, or ``waves`` × concurrency (at least 3, for a p90)."""
    if waves is None:
        return pages
    return pages[: max(3, math.ceil(waves * concurrency))]


def serve_variant(variant: Path, pageset_dir: Path, backend: Backend, out: Path, *, split: str = "heldout",
                  concurrency: list[int] = (1,), max_tokens: int = DEFAULT_MAX_TOKENS, prompt: str | None = None,
                  slo_s: float = 10.0, timeout_s: float = 600.0, limit: int | None = None, overwrite: bool = False,
                  ignore_eos: bool = False, waves: float | None = None,
                  on_level: Callable[[int, int | None], Callable[[RequestRecord], None]] | None = None,
                  level_done: Callable[[int], None] | None = None, server: SharedServer | None = None,
                  record_root: Path | None = None, layout: ServerLayout | None = None,
                  batches: dict[int, PageBatches] | None = None,
                  log: Callable[[str], None] = print) -> RunManifest:
    """Send every page of ``split`` at each concurrency level; records are appended as requests finish.

    ``on_level(c, n)`` is called before a level with the number of pages to send and may return a
    callback for each finished record; ``level_done(c)`` after it. ``server``: a shared server of this
    variant (started on first use, left running for its other users); without it one is started
    here, only when something is left to send, and stopped at the end. ``record_root``: run.json
    records the variant and page-set paths relative to it when they lie inside it (a study passes its
    folder; see ``fileio.recorded_path``). ``layout``: how a study placed this server, recorded when a
    server is started here (a resumed run with nothing to send keeps the layout it was served with). ``batches``: levels
    served batch by batch instead of all pages at once (``PageBatches``; ``on_level`` then gets None for the count)."""
    from quantgate.pages import load_pageset
    from quantgate.schema.run import DEFAULT_PROMPT

    variant, out = Path(variant), Path(out)
    prompt = prompt or DEFAULT_PROMPT
    if backend.serves_local_weights:
        check_model_dir(variant)
    if not concurrency or any(c < 1 for c in concurrency):
        raise InputError(f"--concurrency must list positive integers, got {list(concurrency)}")
    if waves is not None and waves <= 0:
        raise InputError(f"--waves must be positive, got {waves}")
    ps = load_pageset(pageset_dir)
    pages = ps.split(split)[: limit or None]
    if not pages:
        raise InputError(f"{pageset_dir}: no pages in split {split!r}")
    ps_sha = ps.sha256
    out.mkdir(parents=True, exist_ok=True)
    fingerprint = weights_fingerprint(variant) if backend.serves_local_weights else None
    shown = recorded_path(variant, record_root) if backend.serves_local_weights else str(variant)
    manifest = RunManifest(variant=shown, variant_fingerprint=fingerprint, backend=backend.name,
                           pageset=recorded_path(pageset_dir, record_root), pageset_sha256=ps_sha, split=split, prompt=prompt,
                           max_tokens=max_tokens, slo_p90_latency_s=slo_s, ignore_eos=ignore_eos, waves=waves,
                           server_version=backend.server_version(), notes=backend.notes(variant),
                           server_args=list(getattr(backend.options, "extra_args", [])),
                           server_env=dict(layout.env) if layout else {})
    if (out / RUN).is_file():
        old = parse_record(RunManifest, json.loads((out / RUN).read_text("utf-8")), where=str(out / RUN))
        # Identity by content, not path: a moved study folder resumes instead of re-serving.
        ident = old.variant_fingerprint or old.variant
        same = (ident, old.backend, old.pageset_sha256, old.split, old.prompt, old.max_tokens, old.ignore_eos) == \
               (fingerprint or manifest.variant, manifest.backend, ps_sha, split, prompt, max_tokens, ignore_eos)
        # the server's own flags and environment are part of what was measured (an FP8 KV cache, a batch-invariant
        # mode); a run.json from before they were recorded (None) is taken as it is
        same = same and all(getattr(old, k) is None or getattr(old, k) == getattr(manifest, k)
                            for k in ("server_args", "server_env"))
        # issue 31: so are its parallel settings and the GPUs a study placed it on (schema.placement.same_placement)
        same = same and same_placement(old.layout, layout)
        if not same and not overwrite:
            raise InputError(f"{out}: holds a run of {old.variant} ({old.backend}, split {old.split}, max_tokens "
                             f"{old.max_tokens}); choose another -o, or --overwrite to discard it")
        if not same:
            (out / REQUESTS).unlink(missing_ok=True)
        else:
            _keep_server_facts(manifest, old)
    _set_numerics(manifest, backend, variant)
    records = load_records(out)
    done = {(r.page_id, r.concurrency) for r in records if r.error is None}  # failed ones are re-sent
    batches = dict(batches or {})
    unknown = sorted(set(batches) - set(concurrency))
    if unknown:
        raise InputError(f"batches for concurrency {unknown}, which is not among the levels {list(concurrency)}")
    by_id = {p.id: p for p in pages}
    todo = {c: [p for p in level_pages(pages, c, waves) if (p.id, c) not in done] for c in concurrency if c not in batches}
    session = uuid.uuid4().hex[:12]
    manifest.sequential = None

    def loader(page):
        return lambda: ps.image_bytes(page)

    with ExitStack() as stack:
        conn: dict = {}

        def request_spec() -> RequestSpec:
            # the server starts only when a level has something to send (a resumed study may have nothing)
            if not conn:
                srv = server if server is not None else stack.enter_context(
                    SharedServer(backend, variant, out / "server.log", log))
                ep = srv.endpoint()
                conn["server"] = ep.server
                if ep.server is not None:
                    manifest.server_command = ep.server.command
                    manifest.layout = layout
                conn["spec"] = RequestSpec(base_url=ep.base_url, model=ep.model, prompt=prompt, max_tokens=max_tokens,
                                           timeout_s=timeout_s, api_key=ep.api_key,
                                           extra_body={"ignore_eos": True} if ignore_eos else None)
            return conn["spec"]

        def send(c: int, pending: list, cb, warmup: bool = True, batch: int | None = None) -> None:
            nonlocal records
            # each batch its own session id: the level's speed (level_stats) then leaves out the looks between them
            new = asyncio.run(run_level(request_spec(), [(p.id, loader(p)) for p in pending], c, out / REQUESTS,
                                        session if batch is None else f"{session}.{batch}", warmup=warmup, on_done=cb))
            retried = {(r.page_id, r.concurrency) for r in new}
            records = [r for r in records if (r.page_id, r.concurrency) not in retried] + new
            srv = conn["server"]
            if srv is not None and not srv.alive():
                raise ServerError(f"{srv.name} died during the run; log {srv.log_path} ends with:\n"
                                  f"{log_tail(srv.log_path)}")
            _read_server_log(manifest, backend, srv)
            _set_numerics(manifest, backend, variant)  # vLLM: from the kernels this start's log names
            _finish(manifest, records, concurrency, out)

        for c in concurrency:
            if c in batches:
                def served(c=c) -> set[str]:
                    return {r.page_id for r in records if r.concurrency == c and r.error is None}

                if _serve_batches(c, batches[c], by_id, served, request_spec, send, on_level, manifest):
                    if level_done:
                        level_done(c)
                continue
            if not todo[c]:
                continue
            request_spec()  # a server start is its own stage, not part of the level's
            send(c, todo[c], on_level(c, len(todo[c])) if on_level else None)
            if level_done:
                level_done(c)
    return _finish(manifest, records, concurrency, out)


def _serve_batches(c: int, batches: PageBatches, by_id: dict, done, prepare, send, on_level,
                   manifest: RunManifest) -> bool:
    """One level served batch by batch: ``batches.next()`` names the pages to have served by the end of the next
    batch (or None: the level is finished); after each, its ``record`` goes into run.json. Whether any page was
    sent."""
    cb, sent, n = None, False, 0
    while True:
        ids = batches.next()
        manifest.sequential = batches.record
        if ids is None:
            return sent
        unknown = [i for i in ids if i not in by_id]
        if unknown:
            raise InputError(f"batch pages {unknown[:5]} are not pages of the split being served")
        have = done()
        pending = [by_id[i] for i in ids if i not in have]
        if not pending:
            raise RuntimeError(f"concurrency {c}: the next batch names only pages already served; it would never end")
        if not sent:
            prepare()  # the server, started before the level's stage opens
            cb = on_level(c, None) if on_level else None
        send(c, pending, cb, warmup=not sent, batch=n)  # later batches find the server warm: no warm-up request
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
    manifest.kernels = dict(old.kernels)
    manifest.engine = old.engine
    manifest.layout = old.layout
    manifest.numerics = old.numerics
    manifest.notes += [n for n in old.notes if n not in manifest.notes and not n.startswith(_RETRACTED)]


def _set_numerics(manifest: RunManifest, backend: Backend, variant: Path) -> None:
    """``numerics`` from the variant's formats, the backend and the kernels known now; its notes
    replace the ones an earlier value wrote (a vLLM run learns its kernels only after the start)."""
    from quantgate.serve.numerics import numerics_notes

    stale = set(numerics_notes(manifest.numerics)) if manifest.numerics else set()
    manifest.numerics = backend.numerics(variant, dict(manifest.kernels))
    fresh = numerics_notes(manifest.numerics) if manifest.numerics else []
    manifest.notes = [n for n in manifest.notes if n not in stale and n not in fresh] + fresh


def _read_server_log(manifest: RunManifest, backend: Backend, server) -> None:
    if server is None or not server.log_path.is_file():
        return
    text = server.log_text()  # this start's lines only: the file is appended across starts
    facts = backend.read_log(text)
    if facts.get("server_version"):
        manifest.server_version = facts["server_version"]
    if "kernels" in facts:
        manifest.kernels = dict(facts["kernels"])
    manifest.engine = engine_settings(backend, server, text)
    manifest.notes += [n for n in facts.get("notes", []) if n not in manifest.notes]


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
