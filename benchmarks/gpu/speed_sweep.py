"""Issue 9, parts 2-4, on the H200: accuracy-free speed of every variant of a 4B-class Qwen3.5 VLM.

For each variant: one vLLM server (started by quantgate's vllm backend, kept up for every level),
quantgate's client at each concurrency on ~4 MP pages with a fixed output length (``ignore_eos``),
the kernel path vLLM chose, the checkpoint size, and the single-stream decode rate against the
roofline (decode-time weight bytes / HBM bandwidth measured here with a device-to-device copy).
On one variant's server it also runs ``vllm bench serve`` on the same pages and output length and
compares output tokens/s with quantgate's client (the harness's own weight).

    python benchmarks/gpu/speed_sweep.py --work /tmp/qgwork --pages .gpu-carry/p4mp \
        --variants bf16,fp8-dynamic,nvfp4,mixed --levels 1,8,32,64 --harness-on fp8-dynamic -o RESULTS

Writes RESULTS/sweep-<variant>/{requests.jsonl,run.json,server.log}, RESULTS/speed.json and prints
a table. Rerunning resumes (finished levels are kept).
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
from quantgate.fileio import atomic_write_json
from quantgate.heldout import load_pageset
from quantgate.quantize.verify import checkpoint_tensors
from quantgate.records import DEFAULT_PROMPT
from quantgate.serve import make_backend, serve_variant
from quantgate.serve.backends.openai import OpenAIBackend
from quantgate.serve.backends.vllm import kernels_from_log

SERVER_ARGS = ["--gdn-prefill-backend=triton", "--no-enable-prefix-caching",
               # CUDA graphs for decode without torch.compile: compile took >200 s per variant here,
               # while eager decode at concurrency 1 is CPU-launch bound and would hide the kernels.
               '--compilation-config={"mode": 0, "cudagraph_mode": "FULL_DECODE_ONLY", '
               '"max_cudagraph_capture_size": 64}']


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


def start(model: Path, run_dir: Path, args: list[str]):
    backend = make_backend("vllm", max_model_len=8192, gpu_memory_utilization=0.85, extra_args=args)
    server = backend.server(model, run_dir / "server.log")
    server.start()
    return server


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--work", type=Path, required=True, help="holds q4b-<variant> checkpoints")
    ap.add_argument("--pages", type=Path, required=True)
    ap.add_argument("--variants", default="bf16,fp8-dynamic,nvfp4,mixed")
    ap.add_argument("--levels", default="1,8,32,64")
    ap.add_argument("--waves", type=float, default=1.0)
    ap.add_argument("--max-tokens", type=int, default=1000)
    ap.add_argument("--harness-on", default="", help="variant whose server also runs vllm bench serve")
    ap.add_argument("--harness-concurrency", type=int, default=32)
    ap.add_argument("--harness-repeats", type=int, default=2)
    ap.add_argument("-o", "--out", type=Path, required=True)
    a = ap.parse_args(argv)
    a.out.mkdir(parents=True, exist_ok=True)
    levels = [int(x) for x in a.levels.split(",")]
    speed_path = a.out / "speed.json"
    speed = json.loads(speed_path.read_text()) if speed_path.is_file() else {"variants": {}}
    if "hbm_copy_gbs" not in speed:
        speed["hbm_copy_gbs"] = round(copy_bandwidth_gbs(), 1)
        print(f"HBM copy bandwidth: {speed['hbm_copy_gbs']} GB/s", flush=True)
    ps = load_pageset(a.pages)
    held = ps.split("heldout")
    for v in a.variants.split(","):
        model = a.work / f"q4b-{v}"
        run_dir = a.out / f"sweep-{v}"
        run_dir.mkdir(parents=True, exist_ok=True)
        t0, graphs = time.time(), True
        try:
            server = start(model, run_dir, SERVER_ARGS)
        except ServerError as e:  # keep measuring, eagerly, and say so
            print(f"{v}: start with decode CUDA graphs failed ({str(e)[:300]}); retrying with --enforce-eager", flush=True)
            graphs = False
            server = start(model, run_dir, SERVER_ARGS[:2] + ["--enforce-eager"])
        start_s = time.time() - t0
        print(f"{v}: server up in {start_s:.0f} s", flush=True)
        try:
            client = OpenAIBackend(endpoint=server.base_url, model=str(model))
            m = serve_variant(model, a.pages, client, run_dir, concurrency=levels, max_tokens=a.max_tokens,
                              ignore_eos=True, waves=a.waves, timeout_s=600, log=lambda s: print(s, flush=True))
            entry = {"server_start_s": round(start_s, 1), "decode_cuda_graphs": graphs, **decode_bytes(model)}
            text = server.log_path.read_text("utf-8", errors="replace")
            m.kernels = kernels_from_log(text)
            m.server_command = server.command
            m.notes.append("served by quantgate's vllm backend; requests sent with its openai client on that server")
            atomic_write_json(run_dir / "run.json", m.model_dump())
            entry.update(kernels=m.kernels, levels=[lv.model_dump() for lv in m.levels],
                         max_concurrency_within_slo=m.max_concurrency_within_slo)
            if v == a.harness_on:
                n = a.harness_concurrency * 2
                rows = []
                for rep in range(a.harness_repeats):
                    b = vllm_bench(server.base_url, model, held, ps, a.harness_concurrency, n, a.max_tokens, a.out)
                    hq = serve_variant(model, a.pages, client, a.out / f"harness-qg-{rep}",
                                       concurrency=[a.harness_concurrency], max_tokens=a.max_tokens, ignore_eos=True,
                                       limit=n, timeout_s=600, overwrite=True, log=lambda s: print(s, flush=True))
                    q = hq.levels[0].output_tokens_per_s
                    rows.append({"vllm_bench_output_tok_s": b["output_throughput"], "quantgate_output_tok_s": q,
                                 "ratio": q / b["output_throughput"], "vllm_bench": b})
                    print(f"harness rep {rep}: vllm bench {b['output_throughput']:.0f} tok/s, quantgate {q:.0f} tok/s",
                          flush=True)
                entry["harness"] = {"concurrency": a.harness_concurrency, "requests": n, "runs": rows,
                                    "mean_ratio": sum(r["ratio"] for r in rows) / len(rows)}
            speed["variants"][v] = entry
            atomic_write_json(speed_path, speed)
        finally:
            server.stop()
    finish(speed, a.max_tokens)
    atomic_write_json(speed_path, speed)
    return 0


def finish(speed: dict, max_tokens: int) -> None:
    """Speedups over BF16, roofline fractions, and the table."""
    bw = speed["hbm_copy_gbs"] * 1e9
    base = speed["variants"].get("bf16")
    hdr = (f"{'variant':<12}{'size GB':>8}{'c':>4}{'pages/s':>9}{'out tok/s':>10}{'req tok/s':>10}{'TTFT p50':>9}"
           f"{'p90 lat':>8}{'speedup':>8}")
    print(hdr)
    for v, e in speed["variants"].items():
        e["roofline_tok_s"] = bw / e["decode_weight_bytes"]
        c1 = next((lv for lv in e["levels"] if lv["concurrency"] == 1), None)
        if c1 and c1["per_request_tokens_per_s_p50"]:
            e["roofline_fraction_c1"] = c1["per_request_tokens_per_s_p50"] / e["roofline_tok_s"]
        for lv in e["levels"]:
            b = next((x for x in (base or {}).get("levels", []) if x["concurrency"] == lv["concurrency"]), None)
            lv["speedup_vs_bf16"] = lv["output_tokens_per_s"] / b["output_tokens_per_s"] if b else None
            sp = f"{lv['speedup_vs_bf16']:.2f}x" if lv["speedup_vs_bf16"] else "-"
            print(f"{v:<12}{e['checkpoint_bytes'] / 1e9:>8.2f}{lv['concurrency']:>4}{lv['pages_per_s']:>9.2f}"
                  f"{lv['output_tokens_per_s']:>10.0f}{lv['per_request_tokens_per_s_p50'] or math.nan:>10.1f}"
                  f"{lv['ttft_s']['p50'] or math.nan:>9.2f}{lv['latency_s']['p90'] or math.nan:>8.2f}{sp:>8}")
    print(f"\nroofline (decode weight bytes / {speed['hbm_copy_gbs']} GB/s copy bandwidth), concurrency 1:")
    for v, e in speed["variants"].items():
        print(f"  {v:<12} {e['decode_weight_bytes'] / 1e9:6.2f} GB/token -> bound {e['roofline_tok_s']:7.1f} tok/s; "
              f"measured {e.get('roofline_fraction_c1', math.nan) * e['roofline_tok_s']:7.1f} "
              f"({e.get('roofline_fraction_c1', math.nan):.0%}); kernels {e.get('kernels')}")
        if "harness" in e:
            print(f"  harness on {v}: quantgate / vllm bench output tok/s = {e['harness']['mean_ratio']:.3f}")


if __name__ == "__main__":
    sys.exit(main())
