"""Issue 20 on the H200: where a decode step's time goes, per variant, under vLLM's production settings.

Per variant: ``vllm serve`` started by quantgate's vllm backend with ``--profiler-config`` (torch profiler,
no stacks, frontend ignored; profiler settings are not part of vLLM's compile-cache key, so after
``speed_sweep.py`` this start is warm), one short warm-up request (first-request Triton JITs stay out
of the trace), then one fixed streaming request (the first held-out page, greedy, ``--max-tokens`` with
ignore_eos): when its first token arrives, ``POST /start_profile``; vLLM skips ``--delay`` steps, records
``--steps`` decode steps and stops itself; ``POST /stop_profile`` is sent after ``--window`` seconds
anyway. The worker trace is classified (``kernel_classes.py``: GEMM, elementwise + copies, attention,
DeltaNet, sampling, activation quantization, other) into ms and kernels per decode step, and set
against the weight-read bound (decode weight bytes / the HBM copy bandwidth in speed.json, if given).

    python lab/2026-12-03-h200-session-scripts/profile_step.py --work /tmp/qgwork --pages .gpu-carry/p4mp \\
        --variants bf16,fp8-dynamic,fp8-all -o RESULTS [--speed RESULTS/speed.json] [--mode0]
    python lab/2026-12-03-h200-session-scripts/profile_step.py --classify TRACE.json.gz      # one trace, no GPU

Writes RESULTS/profile-<variant>[-mode0]/{server.log,trace/…pt.trace.json.gz}, RESULTS/profile.json
(per variant: the classes, the audit lists, the engine settings, the request) and prints the table.
"""

from __future__ import annotations

import argparse
import base64
import json
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # kernel_classes, speed_sweep: this folder

from kernel_classes import classify_trace, format_table, load_trace  # noqa: E402
from speed_sweep import decode_bytes, server_args, setting_label, start, variant_key  # noqa: E402

from quantgate.io.fileio import atomic_write_json  # noqa: E402
from quantgate.schema.run import DEFAULT_PROMPT  # noqa: E402


def profiler_config(trace_dir: Path, delay: int, steps: int) -> dict:
    return {"profiler": "torch", "torch_profiler_dir": str(trace_dir.resolve()), "torch_profiler_with_stack": False,
            "ignore_frontend": True, "delay_iterations": delay, "max_iterations": steps}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--classify", type=Path, help="classify one trace file and print it (no server)")
    ap.add_argument("--work", type=Path, help="holds q4b-<variant> checkpoints")
    ap.add_argument("--pages", type=Path)
    ap.add_argument("--variants", default="bf16,fp8-dynamic,fp8-all")
    ap.add_argument("--speed", type=Path, help="speed.json of speed_sweep.py: its HBM copy bandwidth gives the bound")
    ap.add_argument("--mode0", action="store_true", help="the old no-compile override (labelled 'mode 0')")
    ap.add_argument("--max-num-seqs", type=int, help="as speed_sweep.py was run (same compile-cache key)")
    ap.add_argument("--compile-cache", help="vLLM compile cache (default WORK/vllm-cache, as speed_sweep.py)")
    ap.add_argument("--delay", type=int, default=16, help="decode steps vLLM skips after /start_profile (default 16)")
    ap.add_argument("--steps", type=int, default=32, help="decode steps profiled (default 32)")
    ap.add_argument("--max-tokens", type=int, default=512, help="output tokens of the profiled request (default 512)")
    ap.add_argument("--window", type=float, default=3.0, help="seconds between /start_profile and /stop_profile")
    ap.add_argument("-o", "--out", type=Path)
    a = ap.parse_args(argv)
    if a.classify is None and (a.work is None or a.pages is None or a.out is None):
        ap.error("--work, --pages and -o are required (or --classify TRACE)")
    if a.steps + a.delay + 8 > a.max_tokens:
        ap.error(f"--max-tokens {a.max_tokens} leaves no room for --delay {a.delay} + --steps {a.steps} decode steps")
    a.variants = [v for v in a.variants.split(",") if v]
    if a.compile_cache is None and a.work is not None:
        a.compile_cache = str(a.work / "vllm-cache")
    return a


def _request(base: str, model: str, image: bytes, max_tokens: int, first: threading.Event | None = None) -> dict:
    """One greedy streaming chat request with the page; sets ``first`` at the first content token."""
    import httpx

    url = "data:image/png;base64," + base64.b64encode(image).decode()
    body = {"model": model, "stream": True, "max_tokens": max_tokens, "temperature": 0, "ignore_eos": True,
            "messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": url}},
                                                      {"type": "text", "text": DEFAULT_PROMPT}]}]}
    t0, ttft, chunks = time.time(), None, 0
    with httpx.stream("POST", f"{base}/v1/chat/completions", json=body, timeout=600) as r:
        r.raise_for_status()
        for line in r.iter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            chunks += 1
            if ttft is None:  # vLLM streams its first chunk with the first output token: prefill is done
                ttft = time.time() - t0
                if first is not None:
                    first.set()
    return {"ttft_s": ttft, "latency_s": time.time() - t0, "chunks": chunks}


def _wait_for_trace(trace_dir: Path, timeout_s: float = 120.0) -> Path:
    """The worker's trace, once its size stops changing (vLLM writes it after the profiler stops)."""
    deadline, last = time.time() + timeout_s, None
    while time.time() < deadline:
        found = sorted(trace_dir.glob("*.pt.trace.json*"))
        workers = [p for p in found if "async_llm" not in p.name]
        if workers:
            size = workers[-1].stat().st_size
            if size and size == last:
                return workers[-1]
            last = size
        time.sleep(2.0)
    raise TimeoutError(f"no complete worker trace in {trace_dir} after {timeout_s:.0f} s")


def profile_running(base: str, model: str, image: bytes, trace_dir: Path, *, max_tokens: int, window: float,
                    warmup: bool = True) -> tuple[dict | None, dict, Path]:
    """Profile decode steps on a running server started with ``profiler_config(trace_dir, …)``: an optional
    short warm-up request, then one streaming request; /start_profile at its first token, /stop_profile
    ``window`` s later. Returns (warm-up request, profiled request, the worker trace)."""
    import httpx

    warm = _request(base, model, image, 16) if warmup else None
    first = threading.Event()
    box: dict = {}
    t = threading.Thread(target=lambda: box.update(_request(base, model, image, max_tokens, first)))
    t.start()
    if not first.wait(300):
        raise TimeoutError(f"{model}: no first token in 300 s")
    httpx.post(f"{base}/start_profile", timeout=120).raise_for_status()
    time.sleep(window)
    httpx.post(f"{base}/stop_profile", timeout=300).raise_for_status()
    t.join(600)
    return warm, box, _wait_for_trace(trace_dir)


def profile_variant(a: argparse.Namespace, v: str, image: bytes) -> dict:
    key = variant_key(v, a.mode0)
    model = a.work / f"q4b-{v}"
    run_dir = a.out / (f"profile-{v}-mode0" if a.mode0 else f"profile-{v}")
    trace_dir = run_dir / "trace"
    trace_dir.mkdir(parents=True, exist_ok=True)
    pcfg = profiler_config(trace_dir, a.delay, a.steps)
    args = server_args(a.mode0, a.max_num_seqs, ["--profiler-config", json.dumps(pcfg)])
    server, backend, engine, text = start(model, run_dir, args, a.compile_cache)
    try:
        warm, box, trace = profile_running(server.base_url.removesuffix("/v1"), str(model), image, trace_dir,
                                           max_tokens=a.max_tokens, window=a.window)
    finally:
        server.stop()
    result = classify_trace(load_trace(trace))
    return {"setting": setting_label(a.mode0), "variant": v, "key": key, "trace": str(trace.relative_to(a.out)),
            "profiler_config": pcfg, "server_args": args, "warmup_request": warm, "request": box,
            "engine": engine.model_dump(), "kernels": backend.read_log(text).kernels or {}, **result}


def bound(entry: dict, model: Path, hbm_gbs: float | None) -> None:
    """The weight-read bound of one decode step beside the measured step, and the GEMMs' effective bandwidth
    (decode weight bytes / GEMM ms: the LM head included, by bytes, since graph replays hide shapes)."""
    b = decode_bytes(model)
    entry["decode_weight_bytes"] = b["decode_weight_bytes"]
    gemm_ms = entry["classes"]["gemm"]["ms_per_step"]
    entry["gemm_effective_gbs"] = b["decode_weight_bytes"] / (gemm_ms / 1e3) / 1e9 if gemm_ms else None
    if hbm_gbs:
        entry["hbm_copy_gbs"] = hbm_gbs
        entry["bound_ms_per_step"] = b["decode_weight_bytes"] / (hbm_gbs * 1e9) * 1e3
        entry["fraction_of_bound"] = entry["bound_ms_per_step"] / entry["span_ms_per_step"] \
            if entry.get("span_ms_per_step") else None


def main(argv: list[str] | None = None) -> int:
    a = parse_args(argv)
    if a.classify:
        r = classify_trace(load_trace(a.classify))
        print(format_table({a.classify.name: r}))
        print(json.dumps({"decode_steps": r["decode_steps"], "top_other": r["top_other"][:10]}, indent=1))
        return 0
    import os

    from quantgate.io.pageset import load_pageset

    os.environ.setdefault("CUDA_VISIBLE_DEVICES", "0")  # as speed_sweep.py: the same compile-cache conditions
    a.out.mkdir(parents=True, exist_ok=True)
    ps = load_pageset(a.pages)
    image = ps.image_bytes(ps.split("heldout")[0])
    hbm = json.loads(a.speed.read_text()).get("hbm_copy_gbs") if a.speed and a.speed.is_file() else None
    out_path = a.out / "profile.json"
    results = json.loads(out_path.read_text()) if out_path.is_file() else {}
    for v in a.variants:
        key = variant_key(v, a.mode0)
        if key in results:
            print(f"{key}: done", flush=True)
            continue
        entry = profile_variant(a, v, image)
        bound(entry, a.work / f"q4b-{v}", hbm)
        results[key] = entry
        atomic_write_json(out_path, results)
        print(f"{key}: {entry['decode_steps']} decode steps, {entry['gpu_ms_per_step']:.3f} GPU ms/step, "
              f"span {entry['span_ms_per_step']:.3f} ms/step", flush=True)
    print(format_table(results))
    for k, e in results.items():
        print(f"{k}: bound {e.get('bound_ms_per_step') or float('nan'):.3f} ms/step, "
              f"{e.get('fraction_of_bound') or float('nan'):.0%} of it reached; GEMM effective "
              f"{e.get('gemm_effective_gbs') or float('nan'):.0f} GB/s; top other: "
              + ", ".join(f"{o['name'][:40]} {o['ms_total']:.2f} ms" for o in e["top_other"][:3]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
