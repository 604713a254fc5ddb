"""A stand-in for vLLM's CLI on machines without a GPU: ``serve MODEL --port N [vLLM flags]`` prints the
start-up lines vLLM 0.26.0 prints (config, scheduler, compile-cache hit or miss, timings; formats read
from vLLM's source), keeps a compile cache under ``$VLLM_CACHE_ROOT`` the way vLLM keys it (by model and
settings, not by where the root is), then answers like ``tests.support.stub``. For tests of what
quantgate records from a vLLM start (engine settings, cold and warm starts); it never loads the model.

    python -m tests.support.fake_vllm serve MODEL --port 8011 [--max-num-seqs 64] [--kv-cache-dtype fp8]
                                          [--enforce-eager] [--profiler-config JSON] [--speculative-config JSON]
                                          [--linear-backend NAME]

``--speculative-config`` and ``--linear-backend`` show in the config line as 0.26 prints them (n-gram also
disables async scheduling), and a speculative server prints a ``SpecDecoding metrics`` line (0.26's format,
made-up counts) every ``FAKE_VLLM_STATS_S`` seconds (default 2); other vLLM flags are accepted and ignored.
``FAKE_VLLM_TOKEN_S``: seconds between streamed tokens (default 0), so requests sent together decode together.
``FAKE_VLLM_KV_SEQS=N``: a KV cache of N sequences — a request arriving while N are in flight counts one preemption
on ``/metrics`` (``vllm:num_preemptions_total``, always published, as vLLM does).
``FAKE_VLLM_REFUSE=--flag``: a start with that flag fails as an engine that cannot start (for the paths that
handle a server failure).

Also like 0.26: ``VLLM_BATCH_INVARIANT=1`` on a Gated DeltaNet model (config ``model_type`` qwen3_5) refuses to
start with vLLM's error; ``--profiler-config '{"profiler": "torch", "torch_profiler_dir": DIR, ...}'`` mounts
``/start_profile`` and ``/stop_profile``, and a stop writes a small synthetic worker trace (decode-step
annotations and kernel names as vLLM's traces have them; made-up durations) where vLLM would write its own.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from pathlib import Path

VERSION = "0.26.0"


def _opt(args: list[str], flag: str, default: str | None = None) -> str | None:
    for i, a in enumerate(args):
        if a == flag and i + 1 < len(args):
            return args[i + 1]
        if a.startswith(flag + "="):
            return a.split("=", 1)[1]
    return default


def capture_sizes(max_num_seqs: int, max_num_batched_tokens: int = 8192) -> list[int]:
    """vLLM 0.26's default CUDA-graph capture sizes (``VllmConfig._set_cudagraph_sizes``)."""
    top = min(max_num_seqs * 2, 512, max_num_batched_tokens)
    sizes = [s for s in (1, 2, 4) if s <= top] + list(range(8, min(top + 1, 256), 8)) + list(range(256, top + 1, 16))
    return sizes


def _lines(model: str, args: list[str], env: dict[str, str]) -> tuple[list[str], Path | None]:
    eager = "--enforce-eager" in args
    seqs = _opt(args, "--max-num-seqs")
    kv = _opt(args, "--kv-cache-dtype", "auto")
    spec = json.loads(_opt(args, "--speculative-config") or "null")
    linear = _opt(args, "--linear-backend", "auto")
    spec_text = "None" if not spec else (f"SpeculativeConfig(method={spec.get('method')!r}, "
                                         f"model=None, num_spec_tokens={spec.get('num_speculative_tokens')})")
    ngram = bool(spec) and spec.get("method") == "ngram"
    prefix = "--no-enable-prefix-caching" not in args
    sizes = [] if eager else capture_sizes(int(seqs or 1024))
    mode, cg = ("NONE: 0", "NONE: 0") if eager else ("VLLM_COMPILE: 3", "FULL_AND_PIECEWISE: (2, 1)")
    api, core = "(APIServer pid=4102) INFO 11-30 14:02:11", "(EngineCore pid=4171) INFO 11-30 14:02:37"
    nd = f"'max_num_seqs': {seqs}, " if seqs else ""
    out = [f"{api} [api_utils.py:273] non-default args: {{'model_tag': '{model}', 'host': '127.0.0.1', {nd}"
           f"'enable_prefix_caching': {prefix}}}",
           f"{api} [scheduler.py:252] Chunked prefill is enabled with max_num_batched_tokens=8192.",
           f"{api} [vllm.py:1109] Asynchronous scheduling is {'disabled' if ngram else 'enabled'}.",
           f"{core} [core.py:116] Initializing a V1 LLM engine (v{VERSION}) with config: model='{model}', "
           f"speculative_config={spec_text}, tokenizer='{model}', skip_tokenizer_init=False, dtype=torch.bfloat16, "
           f"max_seq_len=8192, quantization=None, quantization_config=None, enforce_eager={eager}, "
           f"kv_cache_dtype={kv}, device_config=cuda, seed=0, served_model_name={model}, "
           f"enable_prefix_caching={prefix}, enable_chunked_prefill=True, pooler_config=None, "
           f"compilation_config={{'mode': <CompilationMode.{mode}>, 'cache_dir': '', 'backend': 'inductor', "
           f"'cudagraph_mode': <CUDAGraphMode.{cg}>, 'cudagraph_capture_sizes': {sizes}, "
           f"'max_cudagraph_capture_size': {max(sizes, default=0)}}}, kernel_config=KernelConfig(linear_backend='{linear}')",
           f"{core} [cuda.py:482] Using FLASH_ATTN attention backend out of potential backends: ['FLASH_ATTN'].",
           f"{core} [default_loader.py:430] Loading weights took 0.01 seconds"]
    cache = None
    if not eager:
        if env.get("VLLM_DISABLE_COMPILE_CACHE") == "1":
            out += [f"{core} [backends.py:1092] vLLM's torch.compile cache is disabled.",
                    f"{core} [backends.py:394] Compiling a graph for compile range (1, 8192) takes 0.21 s"]
        else:
            root = env.get("VLLM_CACHE_ROOT")
            if root is None:  # vLLM would use ~/.cache/vllm; a test never writes there
                raise SystemExit("fake vllm: set VLLM_CACHE_ROOT (or VLLM_DISABLE_COMPILE_CACHE=1)")
            if not os.path.isabs(root):
                raise SystemExit(f"fake vllm: VLLM_CACHE_ROOT must be absolute, got {root!r}")
            key = hashlib.sha256(repr((model, sizes, kv, spec, linear)).encode()).hexdigest()[:10]
            cache = Path(root) / "torch_compile_cache" / key / "rank_0_0" / "backbone"
            out.append(f"{core} [backends.py:1095] Using cache directory: {cache} for vLLM's torch.compile")
            if (cache / "vllm_compile_cache.py").is_file():
                out.append(f"{core} [backends.py:292] Directly load the compiled graph(s) for compile range (1, 8192) "
                           "from the cache, took 0.052 s")
                cache = None
            else:
                out += [f"{core} [backends.py:378] Cache the graph of compile range (1, 8192) for later use",
                        f"{core} [backends.py:394] Compiling a graph for compile range (1, 8192) takes 0.21 s"]
        out.append(f"{core} [monitor.py:53] torch.compile took 0.30 s in total")
        out.append(f"{core} [gpu_model_runner.py:6844] Graph capturing finished in 0 secs, took 0.01 GiB")
    out.append(f"{core} [core.py:347] init engine (profile, create kv cache, warmup model) took 0.42 s")
    return out, cache


SPEC_LINE = ("(EngineCore pid=4171) INFO 11-30 14:03:{sec:02d} [metrics.py:120] SpecDecoding metrics: Mean acceptance "
             "length: 1.10, Accepted throughput: 1.50 tokens/s, Drafted throughput: 45.00 tokens/s, Accepted: 3 tokens, "
             "Drafted: 90 tokens, Per-position acceptance rate: 0.067, 0.033, 0.000, Avg Draft acceptance rate: 3.3%")


def _spec_stats(every_s: float) -> None:
    """Like vLLM's periodic stats logger (counters reset per interval); the counts are made up."""
    n = 0
    while True:
        time.sleep(every_s)
        print(SPEC_LINE.format(sec=n % 60), flush=True)
        n += 1


GDN_REFUSAL = "RuntimeError: VLLM batch_invariant mode is not supported for GDN_ATTN."


def _refuses(model: str, env: dict[str, str]) -> bool:
    if env.get("VLLM_BATCH_INVARIANT") != "1":
        return False
    try:
        cfg = json.loads((Path(model) / "config.json").read_text())
    except (OSError, ValueError):
        return False
    types = {cfg.get("model_type"), (cfg.get("text_config") or {}).get("model_type")}
    return any(str(t).startswith("qwen3_5") for t in types if t)


def synthetic_trace(steps: int) -> dict:
    """A worker trace shaped like vLLM's: ``steps`` pure-decode step annotations, each with a few kernels."""
    kernels = [("nvjet_tst_64x8_64x16_4x1_v_bz_TNT", "kernel", 900.0),
               ("void cutlass::device_kernel<flash::enable_sm90_or_later<flash::FlashAttnFwdSm90<>>>(int)", "kernel",
                20.0), ("fused_recurrent_gated_delta_rule_packed_decode_kernel", "kernel", 60.0),
               ("triton_poi_fused_add_mul_rsqrt_0", "kernel", 50.0), ("Memcpy DtoD (Device -> Device)", "gpu_memcpy", 5.0)]
    ev, t = [], 0.0
    for _ in range(steps):
        ev.append({"ph": "X", "cat": "user_annotation", "name": "execute_context_0(0)_generation_1(1)", "ts": t,
                   "dur": 1200.0, "pid": 1, "tid": 1})
        for name, cat, dur in kernels:
            ev.append({"ph": "X", "cat": cat, "name": name, "ts": t, "dur": dur, "pid": 1, "tid": 7})
            t += dur + 1.0
        t += 100.0
    return {"traceEvents": ev}


def _profile_run(build_s: float) -> None:
    """vLLM 0.26's memory-profiling run as its log shows it, with now's stamps: the encoder-cache line, the
    profiling forward's warm-up line, then the first sampler call — which builds FlashInfer's sampling module under
    a file lock in $FLASHINFER_WORKSPACE_BASE (default $HOME) unless it is there already, taking ``build_s``; a
    process that finds the lock held waits for it, then loads the built module — then the KV-cache lines."""
    import fcntl

    def line(text: str) -> None:
        print(f"(EngineCore pid={os.getpid()}) INFO {time.strftime('%m-%d %H:%M:%S')} {text}", flush=True)

    line("[gpu_model_runner.py:6396] Encoder cache will be initialized with a budget of 8192 tokens, and profiled "
         "with 1 image items of the maximum feature size.")
    line("[monitor.py:81] Initial profiling/warmup run took 0.20 s")
    d = Path(os.environ.get("FLASHINFER_WORKSPACE_BASE") or os.environ["HOME"]) / ".cache" / "flashinfer" / "fake"
    d.mkdir(parents=True, exist_ok=True)
    with open(d / "sampling.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (d / "sampling.so").is_file():
            time.sleep(build_s)
            (d / "sampling.so").write_bytes(b"built")
        fcntl.flock(lock, fcntl.LOCK_UN)
    line("[gpu_worker.py:479] Initial free memory 130.00 GiB, reserved 2.0 GiB memory for KV Cache as specified by "
         "kv_cache_memory_bytes config and skipped memory profiling.")
    line("[kv_cache_utils.py:2177] GPU KV cache size: 1,000,000 tokens")


def _add_profiler(app, cfg: dict) -> None:
    import gzip

    from starlette.responses import Response

    state = {"on": False}

    async def start(request):
        state["on"] = True
        return Response("")

    async def stop(request):
        if state["on"]:
            d = Path(cfg["torch_profiler_dir"])
            d.mkdir(parents=True, exist_ok=True)
            name = f"dp0_pp0_tp0_dcp0_ep0_rank0.{time.time_ns()}.pt.trace.json.gz"
            (d / name).write_bytes(gzip.compress(json.dumps(synthetic_trace(int(cfg.get("max_iterations") or 8)))
                                                 .encode()))
            state["on"] = False
        return Response("")

    app.add_route("/start_profile", start, methods=["POST"])
    app.add_route("/stop_profile", stop, methods=["POST"])


def _with_metrics(app, model: str, slots: int | None):
    """``/metrics`` as vLLM publishes it (prometheus_client's text format; ``vllm:num_preemptions`` per engine and
    model), and a KV cache of ``slots`` sequences (``FAKE_VLLM_KV_SEQS``): each request that arrives while
    ``slots`` are in flight counts one preemption, as vLLM evicts a running request when its cache is full."""
    from prometheus_client import CollectorRegistry, Counter, generate_latest

    registry = CollectorRegistry()
    preempted = Counter("vllm:num_preemptions", "Cumulative number of preemption from the engine.",
                        ["engine", "model_name"], registry=registry).labels(engine="0", model_name=model)
    state = {"in_flight": 0}

    async def wrapped(scope, receive, send):
        path = scope.get("path") if scope["type"] == "http" else None
        if path == "/metrics":
            await send({"type": "http.response.start", "status": 200,
                        "headers": [(b"content-type", b"text/plain; version=0.0.4; charset=utf-8")]})
            await send({"type": "http.response.body", "body": generate_latest(registry)})
            return
        if path != "/v1/chat/completions":
            await app(scope, receive, send)
            return
        state["in_flight"] += 1
        if slots is not None and state["in_flight"] > slots:
            preempted.inc()
        try:
            await app(scope, receive, send)
        finally:
            state["in_flight"] -= 1

    return wrapped


def main(argv: list[str] | None = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["--version"]:
        print(VERSION)
        return
    if args[:1] != ["serve"] or len(args) < 2:
        raise SystemExit("usage: fake_vllm serve MODEL --port N [flags]")
    model, port = args[1], int(_opt(args, "--port") or 8000)
    lines, cache = _lines(model, args, dict(os.environ))
    bad = os.environ.get("FAKE_VLLM_REFUSE")
    if bad and any(a == bad or a.startswith(bad + "=") for a in args):
        print("\n".join(lines[:5]), flush=True)
        print(f"(EngineCore pid=4171) ERROR 11-30 14:02:38 [core.py:1108] EngineCore failed to start.\n"
              f"ValueError: fake vllm: {bad} refused (FAKE_VLLM_REFUSE)", flush=True)
        raise SystemExit(1)
    if _refuses(model, dict(os.environ)):
        print("\n".join(lines[:5]), flush=True)
        print(f"(EngineCore pid=4171) ERROR 11-30 14:02:38 [core.py:1108] EngineCore failed to start.\n{GDN_REFUSAL}\n"
              "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}",
              flush=True)
        raise SystemExit(1)
    print("\n".join(lines), flush=True)
    if os.environ.get("FAKE_VLLM_FLASHINFER_BUILD_S"):
        _profile_run(float(os.environ["FAKE_VLLM_FLASHINFER_BUILD_S"]))
    if cache is not None:  # stored like vLLM: a later start with the same key loads it
        cache.mkdir(parents=True, exist_ok=True)
        (cache / "vllm_compile_cache.py").write_text("{}\n")
    if os.environ.get("TRITON_CACHE_DIR"):
        Path(os.environ["TRITON_CACHE_DIR"]).mkdir(parents=True, exist_ok=True)
    # so a start takes measurable time; FAKE_VLLM_START_S: longer, for tests of starts that overlap
    time.sleep(float(os.environ.get("FAKE_VLLM_START_S", "0.2")))

    import uvicorn

    from tests.support.stub import make_app

    if _opt(args, "--speculative-config"):
        import threading

        threading.Thread(target=_spec_stats, args=(float(os.environ.get("FAKE_VLLM_STATS_S", "2")),),
                         daemon=True).start()
    app = make_app(token_delay=float(os.environ.get("FAKE_VLLM_TOKEN_S", "0")))
    pcfg = json.loads(_opt(args, "--profiler-config") or "{}")
    if pcfg.get("profiler") == "torch":  # routes go on the app itself, before /metrics wraps it
        _add_profiler(app, pcfg)
    slots = os.environ.get("FAKE_VLLM_KV_SEQS")
    app = _with_metrics(app, model, int(slots) if slots else None)
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", access_log=False)


if __name__ == "__main__":
    main()
