"""Issues 9 and 20 on the H200: accuracy-free speed of every variant of a 4B-class Qwen3.5 VLM, under vLLM's
production settings (torch.compile + CUDA graphs, vLLM's defaults; ``--mode0`` opts into the old
no-compile override, labelled "mode 0" everywhere it is written).

For each variant, one at a time (uncontended): the server is started ``--starts`` times against one compile
cache (``--compile-cache``, exported as VLLM_CACHE_ROOT): on a fresh cache the first start compiles (cold)
and the second loads (warm); each start's seconds and its cold/warm state come from its own log. The last
start serves quantgate's client at each concurrency on ~4 MP pages with a fixed output length
(``ignore_eos``). Recorded per variant: the engine settings vLLM printed, the kernel path, the checkpoint
size, and the single-stream decode rate against the weight-read bound (decode-time weight bytes / HBM
bandwidth measured here with a device-to-device copy). On one variant's server it also runs
``vllm bench serve`` on the same pages and output length (the client's own weight).

    python lab/2026-12-03-h200-session-scripts/speed_sweep.py --work /tmp/qgwork --pages .gpu-carry/p4mp \\
        --variants bf16,fp8-dynamic,fp8-all,nvfp4,mixed --levels 1,8,32,64 --harness-on fp8-dynamic -o RESULTS
    python lab/2026-12-03-h200-session-scripts/speed_sweep.py --report-only -o RESULTS      # the tables again, from RESULTS/speed.json

Writes RESULTS/sweep-<variant>[-mode0]/{requests.jsonl,run.json,server.log}, RESULTS/speed.json and prints the
tables. Rerunning resumes (a variant whose levels are all done is skipped; finished levels are kept).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

from quantgate.errors import ServerError
from quantgate.io.fileio import atomic_write_json
from quantgate.reports.engine import COMPARED
from quantgate.schema.run import DEFAULT_PROMPT
from quantgate.serve.run import ServeHooks, ServeOptions

BASE_ARGS = ["--gdn-prefill-backend=triton",  # Triton GDN prefill: no FlashInfer JIT through nvcc at start
             "--no-enable-prefix-caching"]  # a page repeated across levels is not served from cache
# The previous periods' override: CUDA graphs for decode without torch.compile. Opt-in only (--mode0).
MODE0_ARGS = ['--compilation-config={"mode": 0, "cudagraph_mode": "FULL_DECODE_ONLY", "max_cudagraph_capture_size": 64}']


def setting_label(mode0: bool) -> str:
    return "mode 0" if mode0 else "vLLM default"


def server_args(mode0: bool = False, max_num_seqs: int | None = None, extra: list[str] = ()) -> list[str]:
    args = list(BASE_ARGS) + (list(MODE0_ARGS) if mode0 else [])
    if max_num_seqs:
        args.append(f"--max-num-seqs={max_num_seqs}")
    return args + list(extra)


def variant_key(variant: str, mode0: bool) -> str:
    """The name a variant's results carry: ``fp8-dynamic`` or ``fp8-dynamic (mode 0)``."""
    return f"{variant} (mode 0)" if mode0 else variant


def copy_bandwidth_gbs(gib: float = 4.0, iters: int = 20) -> float:
    """HBM bandwidth from a device-to-device copy: bytes read + bytes written per second."""
    import torch

    n = int(gib * 2**30)
    src = torch.empty(n, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    for _ in range(3):
        dst.copy_(src)
    torch.cuda.synchronize()
    t0, t1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    t0.record()
    for _ in range(iters):
        dst.copy_(src)
    t1.record()
    torch.cuda.synchronize()
    secs = t0.elapsed_time(t1) / 1e3
    del src, dst
    torch.cuda.empty_cache()
    return 2 * n * iters / secs / 1e9


def decode_bytes(model: Path) -> dict:
    """Bytes a decode step reads: every language-model tensor (scales included), not the vision
    encoder; the embedding table only as the LM head (a lookup reads one row)."""
    from quantgate.quantize.verify import checkpoint_tensors

    cfg = json.loads((model / "config.json").read_text())
    tied = cfg.get("tie_word_embeddings") or cfg.get("text_config", {}).get("tie_word_embeddings")
    total = vision = embed = 0
    for name, info in checkpoint_tensors(model).items():
        nbytes = info["data_offsets"][1] - info["data_offsets"][0]
        total += nbytes
        if ".visual." in f".{name}" or name.startswith("visual."):
            vision += nbytes
        elif name.endswith("embed_tokens.weight"):
            embed += nbytes
    lm = total - vision - (0 if tied else embed)
    return {"checkpoint_bytes": total, "vision_bytes": vision, "decode_weight_bytes": lm, "tied_embeddings": bool(tied)}


def vllm_bench(base_url: str, model: Path, pages, ps, concurrency: int, n: int, max_tokens: int, out: Path) -> dict:
    """vLLM's own load generator on the same page images, prompt and output length."""
    data = out / "bench-pages.jsonl"
    data.write_text("".join(json.dumps({"prompt": DEFAULT_PROMPT, "image_files": [str(ps.image_path(p).resolve())]})
                            + "\n" for p in pages[:n]))
    res = f"bench-c{concurrency}-{int(time.time())}.json"
    cmd = shlex.split(os.environ["QUANTGATE_VLLM"]) + [
        "bench", "serve", "--backend", "openai-chat", "--endpoint", "/v1/chat/completions",
        "--base-url", base_url.removesuffix("/v1"), "--model", str(model), "--tokenizer", str(model),
        "--dataset-name", "custom_image", "--dataset-path", str(data), "--custom-ensure-client-side-data",
        "--custom-output-len", str(max_tokens), "--ignore-eos", "--temperature", "0", "--disable-shuffle",
        "--num-prompts", str(n), "--max-concurrency", str(concurrency),
        "--save-result", "--result-dir", str(out), "--result-filename", res]
    with open(out / "bench.log", "a") as log:
        subprocess.run(cmd, check=True, stdout=log, stderr=subprocess.STDOUT)
    r = json.loads((out / res).read_text())
    return {k: r.get(k) for k in ("completed", "duration", "total_output_tokens", "output_throughput",
                                  "request_throughput", "median_ttft_ms", "p99_ttft_ms", "median_tpot_ms")}


def start(model: Path, run_dir: Path, args: list[str], compile_cache: str | None, *,
          gpu_memory_utilization: float = 0.85, env: dict[str, str] | None = None,
          startup_timeout_s: float = 1200.0):
    """A started vLLM server and the engine settings of this start, read from the part of server.log this
    start wrote (the log is appended to across starts). ``env`` adds variables for this server only (e.g.
    ``VLLM_PORT`` when several start at once)."""
    from quantgate.serve import make_backend
    from quantgate.serve.run import engine_settings

    backend = make_backend("vllm", max_model_len=8192, gpu_memory_utilization=gpu_memory_utilization,
                           compile_cache=compile_cache, extra_args=args, startup_timeout_s=startup_timeout_s)
    server = backend.server(model, run_dir / "server.log")
    server.env.update(env or {})
    server.start()
    text = server.log_text()  # this start's lines only
    return server, backend, engine_settings(backend, server, text), text


def measure_levels(model: Path, pages: Path, server, backend, engine, text: str, run_dir: Path, *, levels: list[int],
                   max_tokens: int, waves: float, setting: str, server_args_used: list[str], starts: list[dict]):
    """Every concurrency level on a running server (quantgate's client, ignore_eos, ``waves`` per level): the
    run's manifest (written as run_dir/run.json, with the kernels, command and engine settings of the start
    that serves) and the variant's speed.json entry."""
    from quantgate.serve import serve_variant
    from quantgate.serve.backends.openai import OpenAIBackend

    client = OpenAIBackend(endpoint=server.base_url, model=str(model))
    m = serve_variant(model, pages, client, run_dir,
                      ServeOptions(concurrency=levels, max_tokens=max_tokens, ignore_eos=True, waves=waves, timeout_s=600),
                      ServeHooks(log=lambda s: print(s, flush=True)))
    facts = backend.read_log(text)
    m.kernels, m.server_command, m.engine = facts.kernels or {}, server.command, engine
    m.server_version = facts.server_version or m.server_version
    m.notes += [n for n in facts.notes if n not in m.notes]
    m.notes.append(f"served by quantgate's vllm backend ({setting}); requests sent with its openai client")
    atomic_write_json(run_dir / "run.json", m.model_dump())
    entry = {"setting": setting, "server_args": server_args_used, "starts": starts,
             "server_start_s": starts[-1]["start_s"] if starts else None, "engine": engine.model_dump(),
             **decode_bytes(model), "kernels": m.kernels, "levels": [lv.model_dump() for lv in m.levels],
             "max_concurrency_within_slo": m.max_concurrency_within_slo}
    return m, entry


START_KEYS = ("start_s", "compile_start", "compile_s", "init_engine_s", "graph_capture_s")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--work", type=Path, help="holds q4b-<variant> checkpoints")
    ap.add_argument("--pages", type=Path)
    ap.add_argument("--variants", default="bf16,fp8-dynamic,fp8-all,nvfp4,mixed")
    ap.add_argument("--levels", default="1,8,32,64")
    ap.add_argument("--waves", type=float, default=1.0)
    ap.add_argument("--max-tokens", type=int, default=1000)
    ap.add_argument("--mode0", action="store_true", help="the old override (no torch.compile, decode-only CUDA "
                    "graphs up to 64) instead of vLLM's defaults; results are labelled 'mode 0'")
    ap.add_argument("--max-num-seqs", type=int, help="pass --max-num-seqs (fewer CUDA-graph capture sizes: a faster "
                    "start; a non-default, recorded); default: vLLM's own")
    ap.add_argument("--compile-cache", help="vLLM compile cache shared by every start (default WORK/vllm-cache; "
                    "'none': vLLM's cache off)")
    ap.add_argument("--starts", type=int, default=2, help="starts per variant, one after another, all against the "
                    "compile cache: 2 = cold then warm on a fresh cache (default 2); the last one serves")
    ap.add_argument("--server-arg", action="append", default=[], help="extra vllm serve argument (repeatable)")
    ap.add_argument("--harness-on", default="", help="variant whose server also runs vllm bench serve")
    ap.add_argument("--harness-concurrency", type=int, default=32)
    ap.add_argument("--harness-repeats", type=int, default=2)
    ap.add_argument("--report-only", action="store_true", help="print the tables from OUT/speed.json; no GPU")
    ap.add_argument("-o", "--out", type=Path, required=True)
    a = ap.parse_args(argv)
    if not a.report_only and (a.work is None or a.pages is None):
        ap.error("--work and --pages are required unless --report-only")
    if a.starts < 1:
        ap.error("--starts must be at least 1")
    a.levels = [int(x) for x in a.levels.split(",")]
    a.variants = [v for v in a.variants.split(",") if v]
    if a.compile_cache is None and a.work is not None:
        a.compile_cache = str(a.work / "vllm-cache")
    return a


def main(argv: list[str] | None = None) -> int:
    a = parse_args(argv)
    speed_path = a.out / "speed.json"
    speed = json.loads(speed_path.read_text()) if speed_path.is_file() else {"variants": {}}
    if a.report_only:
        finish(speed)
        return 0
    from quantgate.io.pageset import load_pageset

    # Always set, and the same for every start: the device index must not differ between runs of a variant.
    os.environ.setdefault("CUDA_VISIBLE_DEVICES", "0")
    a.out.mkdir(parents=True, exist_ok=True)
    if "hbm_copy_gbs" not in speed:
        speed["hbm_copy_gbs"] = round(copy_bandwidth_gbs(), 1)
        print(f"HBM copy bandwidth: {speed['hbm_copy_gbs']} GB/s", flush=True)
    ps = load_pageset(a.pages)
    held = ps.split("heldout")
    args = server_args(a.mode0, a.max_num_seqs, a.server_arg)
    for v in a.variants:
        key = variant_key(v, a.mode0)
        done = speed["variants"].get(key)
        if done and {lv["concurrency"] for lv in done.get("levels", [])} >= set(a.levels):
            print(f"{key}: done", flush=True)
            continue
        model = a.work / f"q4b-{v}"
        run_dir = a.out / (f"sweep-{v}-mode0" if a.mode0 else f"sweep-{v}")
        run_dir.mkdir(parents=True, exist_ok=True)
        starts, setting, used = [], setting_label(a.mode0), args
        for i in range(a.starts):
            try:
                server, backend, engine, text = start(model, run_dir, used, a.compile_cache)
            except ServerError as e:  # keep measuring, eagerly, and say so
                print(f"{key}: start failed ({str(e)[:300]}); retrying with --enforce-eager", flush=True)
                setting, used = f"{setting_label(a.mode0)}, failed: eager fallback", BASE_ARGS + ["--enforce-eager"]
                server, backend, engine, text = start(model, run_dir, used, a.compile_cache)
            starts.append({k: getattr(engine, k) for k in START_KEYS})
            print(f"{key}: start {i + 1}: {engine.start_s:.0f} s to healthy, compile cache {engine.compile_start}, "
                  f"compile {engine.compile_s} s, engine init {engine.init_engine_s} s", flush=True)
            if i < a.starts - 1:
                server.stop()
        try:
            m, entry = measure_levels(model, a.pages, server, backend, engine, text, run_dir, levels=a.levels,
                                      max_tokens=a.max_tokens, waves=a.waves, setting=setting, server_args_used=used,
                                      starts=starts)
            if v == a.harness_on:
                from quantgate.serve.backends.openai import OpenAIBackend

                client = OpenAIBackend(endpoint=server.base_url, model=str(model))
                entry["harness"] = harness(a, server, model, held, ps, client)
            speed["variants"][key] = entry
            atomic_write_json(speed_path, speed)
        finally:
            server.stop()
    finish(speed)
    atomic_write_json(speed_path, speed)
    return 0


def harness(a, server, model, held, ps, client) -> dict:
    from quantgate.serve import serve_variant

    n = a.harness_concurrency * 2
    rows = []
    for rep in range(a.harness_repeats):
        b = vllm_bench(server.base_url, model, held, ps, a.harness_concurrency, n, a.max_tokens, a.out)
        hq = serve_variant(model, a.pages, client, a.out / f"harness-qg-{rep}", ServeOptions(concurrency=[a.harness_concurrency], max_tokens=a.max_tokens, ignore_eos=True, limit=n, timeout_s=600, overwrite=True), hooks=ServeHooks(log=lambda s: print(s, flush=True)))
        q = hq.levels[0].output_tokens_per_s
        rows.append({"vllm_bench_output_tok_s": b["output_throughput"], "quantgate_output_tok_s": q,
                     "ratio": q / b["output_throughput"], "vllm_bench": b})
        print(f"harness rep {rep}: vllm bench {b['output_throughput']:.0f} tok/s, quantgate {q:.0f} tok/s", flush=True)
    return {"concurrency": a.harness_concurrency, "requests": n, "runs": rows,
            "mean_ratio": sum(r["ratio"] for r in rows) / len(rows)}


def _baseline(speed: dict, key: str) -> dict | None:
    """BF16 under the same setting as ``key``."""
    return speed["variants"].get("bf16 (mode 0)" if key.endswith("(mode 0)") else "bf16")


def finish(speed: dict) -> None:
    """Speedups over BF16 (same setting), the weight-read bound and the fraction of it reached at
    concurrency 1, start-up seconds, the engine settings; the tables."""
    bw = (speed.get("hbm_copy_gbs") or 0) * 1e9  # none measured (a failed step, a dry run): no bound
    hdr = (f"{'variant':<22}{'size GB':>8}{'c':>4}{'pages/s':>9}{'out tok/s':>10}{'req tok/s':>10}{'TTFT p50':>9}"
           f"{'p90 lat':>8}{'speedup':>8}")
    print(hdr)
    for v, e in speed["variants"].items():
        if bw:
            e["roofline_tok_s"] = bw / e["decode_weight_bytes"]
            e["bound_ms_per_token"] = 1e3 / e["roofline_tok_s"]
        c1 = next((lv for lv in e["levels"] if lv["concurrency"] == 1), None)
        if c1 and c1["per_request_tokens_per_s_p50"]:
            e["ms_per_token_c1"] = 1e3 / c1["per_request_tokens_per_s_p50"]
            if bw:
                e["roofline_fraction_c1"] = c1["per_request_tokens_per_s_p50"] / e["roofline_tok_s"]
        base = _baseline(speed, v)
        for lv in e["levels"]:
            b = next((x for x in (base or {}).get("levels", []) if x["concurrency"] == lv["concurrency"]), None)
            lv["speedup_vs_bf16"] = lv["output_tokens_per_s"] / b["output_tokens_per_s"] if b else None
            sp = f"{lv['speedup_vs_bf16']:.2f}x" if lv["speedup_vs_bf16"] else "-"
            print(f"{v:<22}{e['checkpoint_bytes'] / 1e9:>8.2f}{lv['concurrency']:>4}{lv['pages_per_s']:>9.2f}"
                  f"{lv['output_tokens_per_s']:>10.0f}{lv['per_request_tokens_per_s_p50'] or math.nan:>10.1f}"
                  f"{lv['ttft_s']['p50'] or math.nan:>9.2f}{lv['latency_s']['p90'] or math.nan:>8.2f}{sp:>8}")
    print(f"\nweight-read bound (decode weight bytes / {speed['hbm_copy_gbs']} GB/s copy bandwidth), concurrency 1:")
    print(f"{'variant':<22}{'GB/token':>9}{'bound tok/s':>12}{'bound ms':>9}{'c=1 tok/s':>10}{'ms/token':>9}"
          f"{'of bound':>9}  starts (s, compile cache)")
    for v, e in speed["variants"].items():
        frac = e.get("roofline_fraction_c1", math.nan)
        starts = ", ".join(f"{s['start_s'] or math.nan:.0f} {s['compile_start']}" for s in e.get("starts", [])) or \
            f"{e.get('server_start_s') or math.nan:.0f}"
        c1_tok_s = 1e3 / e["ms_per_token_c1"] if e.get("ms_per_token_c1") else math.nan
        print(f"{v:<22}{e['decode_weight_bytes'] / 1e9:>9.2f}{e.get('roofline_tok_s', math.nan):>12.1f}"
              f"{e.get('bound_ms_per_token', math.nan):>9.2f}{c1_tok_s:>10.1f}{e.get('ms_per_token_c1', math.nan):>9.2f}"
              f"{frac:>9.0%}  {starts}")
        if "harness" in e:
            print(f"  harness on {v}: quantgate / vllm bench output tok/s = {e['harness']['mean_ratio']:.3f}")
    print("\nengine settings (from each variant's serving start):")
    for v, e in speed["variants"].items():
        eng = e.get("engine") or {}
        sizes = eng.get("cudagraph_capture_sizes")
        print(f"  {v:<22}{e.get('setting', '?')}: compilation {eng.get('compilation')}, CUDA graphs "
              f"{eng.get('cudagraph_mode')}{' -> ' + eng['cudagraph_mode_effective'] if eng.get('cudagraph_mode_effective') else ''}"
              f" ({len(sizes) if sizes is not None else '?'} sizes), prefix cache {eng.get('prefix_caching')}, "
              f"max batched tokens {eng.get('max_num_batched_tokens')}, max seqs {eng.get('max_num_seqs') or 'default'}, "
              f"KV {eng.get('kv_cache_dtype')}; kernels {e.get('kernels')}")
    for note in engine_differences(speed):
        print(f"NOTE: {note}")


def engine_differences(speed: dict) -> list[str]:
    """Settings that differ between variants of the same setting label (their speed ratios mix them in)."""
    notes = []
    groups: dict[str, dict[str, dict]] = {}
    for v, e in speed["variants"].items():
        if e.get("engine"):
            groups.setdefault(e.get("setting", "?"), {})[v] = e["engine"]
    for label, engines in groups.items():
        diffs = [f for f in COMPARED if len({json.dumps(x.get(f)) for x in engines.values()}) > 1]
        if diffs:
            notes.append(f"under '{label}' the variants differ in " + ", ".join(
                f"{f} (" + "; ".join(f"{v}: {x.get(f)}" for v, x in engines.items()) + ")" for f in diffs))
    return notes


if __name__ == "__main__":
    sys.exit(main())
