"""The GPU run behind ``quantgate speed-profile``: one variant served by ``vllm serve`` with vLLM's own torch
profiler (``--profiler-config``: not part of vLLM's compile-cache key, so a study's compiled graphs still load),
and at each concurrency c: one short warm-up request (first-request JIT stays out of the trace), then c streaming
requests of the same pages with ``ignore_eos``; once every one of them has its first token (all c are decoding),
``POST /start_profile`` — vLLM skips ``delay`` steps, records ``steps`` steps and stops — and ``POST
/stop_profile`` after the requests end. The worker's trace becomes a ``StepProfile``
(``quantgate.speed.trace``) beside it. ``VLLM_TORCH_PROFILER_DIR`` is not used: vLLM's source deprecates it for
``--profiler-config``, with which the committed 2026-11-30 profiles were taken."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from quantgate.errors import InputError, ServerError, UsageError
from quantgate.io.fileio import atomic_write_json
from quantgate.schema.base import read_record_file
from quantgate.schema.run import DEFAULT_PROMPT
from quantgate.schema.speed import StepProfile
from quantgate.schema.variant import VariantManifest

WARMUP_TOKENS = 16


def profiler_config(trace_dir: Path, delay: int, steps: int) -> dict:
    return {"profiler": "torch", "torch_profiler_dir": str(Path(trace_dir).resolve()), "torch_profiler_with_stack": False,
            "ignore_frontend": True, "delay_iterations": delay, "max_iterations": steps}


def check_args(variant_dir: Path, levels: Sequence[int], *, steps: int, delay: int, max_tokens: int,
               server_args: Sequence[str]) -> VariantManifest:
    """Everything that can be refused before a server starts; returns the variant's manifest (its plan)."""
    if not levels or any(not isinstance(c, int) or isinstance(c, bool) or c < 1 for c in levels):
        raise UsageError(f"--concurrency {list(levels)}: give one or more whole numbers of at least 1")
    if len(set(levels)) != len(levels):
        raise UsageError(f"--concurrency {list(levels)}: each level once")
    if steps < 1 or delay < 0:
        raise UsageError(f"--steps {steps} / --delay {delay}: profile at least 1 step after 0 or more skipped")
    if max_tokens < delay + steps + 8:
        raise UsageError(f"--max-tokens {max_tokens}: the requests must still be decoding after the {delay} skipped "
                         f"and {steps} profiled steps; give at least {delay + steps + 8}")
    if any(a == "--profiler-config" or a.startswith("--profiler-config") for a in server_args):
        raise UsageError("--server-arg --profiler-config: speed-profile sets vLLM's profiler itself; drop it")
    manifest = read_record_file(VariantManifest, Path(variant_dir) / "quantgate.json",
                                missing="speed-profile reads the variant's plan from it: build the variant with "
                                "`quantgate quantize` (BF16 too: recipe bf16)")
    return manifest


def _newest_trace(trace_dir: Path, before: set[Path], timeout_s: float) -> Path:
    """The worker trace written since ``before``, once its size stops changing (vLLM writes it after stopping)."""
    deadline, last = time.time() + timeout_s, None
    while time.time() < deadline:
        new = sorted(p for p in trace_dir.glob("*.pt.trace.json*") if p not in before and "async_llm" not in p.name)
        if new:
            size = new[-1].stat().st_size
            if size and size == last:
                return new[-1]
            last = size
        time.sleep(0.5)
    raise ServerError(f"{trace_dir}: no complete worker trace {timeout_s:.0f} s after /stop_profile; see the server log")


async def _profiled_level(base_url: str, model: str, images: list[str], c: int, max_tokens: int,
                          api_key: str | None, timeout_s: float) -> None:
    import aiohttp

    from quantgate.serve.client import RequestSpec, chat_body

    root = base_url.removesuffix("/v1")
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    first = asyncio.Event()
    started = [0]

    async def one(session, image: str, tokens: int, count: bool) -> None:
        spec = RequestSpec(base_url=base_url, model=model, prompt=DEFAULT_PROMPT, max_tokens=tokens,
                           extra_body={"ignore_eos": True})
        async with session.post(f"{base_url}/chat/completions", json=chat_body(spec, image)) as r:
            if r.status != 200:
                raise ServerError(f"{base_url}: HTTP {r.status} for a profiled request: {(await r.text())[:300]}")
            seen = False
            async for line in r.content:
                if not seen and line.startswith(b"data: ") and not line.startswith(b"data: [DONE]"):
                    seen = True  # vLLM streams its first chunk with the first output token: prefill is done
                    if count:
                        started[0] += 1
                        if started[0] == c:
                            first.set()

    timeout = aiohttp.ClientTimeout(total=timeout_s)
    async with aiohttp.ClientSession(headers=headers, timeout=timeout) as s:
        await one(s, images[0], WARMUP_TOKENS, False)
        tasks = [asyncio.create_task(one(s, images[i % len(images)], max_tokens, True)) for i in range(c)]
        waiter = asyncio.create_task(first.wait())
        done, _ = await asyncio.wait([waiter, *tasks], return_when=asyncio.FIRST_COMPLETED, timeout=timeout_s)
        if waiter not in done:  # a request ended (or failed) before all c were decoding
            for t in tasks:
                if t.done() and t.exception():
                    raise t.exception()
            raise ServerError(f"{base_url}: the {c} requests were not all decoding at once (max_tokens {max_tokens} "
                              "too small, or the server's --max-num-seqs below the level)")
        async with s.post(f"{root}/start_profile") as r:
            r.raise_for_status()
        await asyncio.gather(*tasks)
        async with s.post(f"{root}/stop_profile") as r:
            r.raise_for_status()


def profile_levels(base_url: str, model: str, api_key: str | None, manifest: VariantManifest,
                   levels: Sequence[int], out: Path, trace_dir: Path, images: list[str], *, max_tokens: int,
                   request_timeout_s: float = 600.0, trace_timeout_s: float = 300.0,
                   log: Callable[[str], None] = print) -> dict[int, StepProfile]:
    """On a running vLLM server started with ``--profiler-config`` :func:`profiler_config` (``trace_dir``): each
    of ``levels`` profiled in turn into ``out/c<level>.profile.json`` (a StepProfile whose ``source`` is its trace,
    relative to ``out``). ``speed_profile`` and a study's ``speed.profile`` both come here."""
    from quantgate.speed.trace import load_trace, step_profile

    out.mkdir(parents=True, exist_ok=True)
    trace_dir.mkdir(parents=True, exist_ok=True)
    results: dict[int, StepProfile] = {}
    for c in levels:
        before = set(trace_dir.glob("*"))
        asyncio.run(_profiled_level(base_url, model, images, c, max_tokens, api_key, request_timeout_s))
        trace = _newest_trace(trace_dir, before, trace_timeout_s)
        prof = step_profile(load_trace(trace), manifest.plan.modules, variant=manifest.name, concurrency=c,
                            source=str(Path(os.path.relpath(trace, out))))
        atomic_write_json(out / f"c{c}.profile.json", prof.model_dump(mode="json"))
        log(f"[speed-profile] {manifest.name}: c={c}, {prof.gpu_ms_per_step:.3f} GPU ms per decode step, "
            f"{prof.kernels_per_step:.0f} kernels")
        results[c] = prof
    return results


def speed_profile(variant_dir: Path, levels: Sequence[int], out: Path, vllm_cmd: str | None = None, *,
                  pages: Path, steps: int = 32, delay: int = 16, max_tokens: int = 512,
                  server_args: Sequence[str] = (), compile_cache: str | None = None, startup_timeout_s: float = 1200.0,
                  request_timeout_s: float = 600.0, trace_timeout_s: float = 300.0,
                  log: Callable[[str], None] = print) -> list[StepProfile]:
    """Profile ``variant_dir``'s decode step at each of ``levels``; writes ``out/server.log``, the traces under
    ``out/trace/`` and ``out/c<level>.profile.json`` (a StepProfile each; a level already written is kept)."""
    from quantgate.io.pageset import load_pageset
    from quantgate.serve.backends.vllm import VllmBackend
    from quantgate.serve.client import data_url
    from quantgate.serve.server import started

    variant_dir, out = Path(variant_dir), Path(out)
    manifest = check_args(variant_dir, levels, steps=steps, delay=delay, max_tokens=max_tokens, server_args=server_args)
    trace_dir = out / "trace"
    todo = [c for c in levels if not (out / f"c{c}.profile.json").is_file()]
    results: dict[int, StepProfile] = {}
    if todo:
        backend = VllmBackend(vllm_cmd=vllm_cmd, compile_cache=compile_cache, startup_timeout_s=startup_timeout_s,
                              extra_args=[*server_args, "--profiler-config",
                                          json.dumps(profiler_config(trace_dir, delay, steps))])
        prefix = backend.command_prefix()  # refuses a missing --vllm-cmd / $QUANTGATE_VLLM before anything starts
        if shutil.which(prefix[0]) is None:
            raise InputError(f"vLLM command {prefix[0]!r} not found (from --vllm-cmd or $QUANTGATE_VLLM)")
        ps = load_pageset(pages)
        chosen = ps.split("heldout")[: max(todo)] or ps.split("all")[: max(todo)]
        if not chosen:
            raise InputError(f"{pages}: no pages to send")
        images = [data_url(ps.image_bytes(p)) for p in chosen]
        trace_dir.mkdir(parents=True, exist_ok=True)
        with started(backend, variant_dir, out / "server.log", log=log) as ep:
            log(f"[speed-profile] {manifest.name}: levels {todo}, {steps} decode steps after {delay} each")
            results = profile_levels(ep.base_url, ep.model, ep.api_key, manifest, todo, out, trace_dir, images,
                                     max_tokens=max_tokens, request_timeout_s=request_timeout_s,
                                     trace_timeout_s=trace_timeout_s, log=log)
    from quantgate.schema.speed import load_step_profile

    return [results.get(c) or load_step_profile(out / f"c{c}.profile.json") for c in levels]
