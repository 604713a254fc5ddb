"""GPU session, GPU0 after the 4B work (issue 22): does vLLM 0.26's batch-invariant mode make a model's greedy
tokens independent of the batch they run in, and what does it cost?

Two servers of the Qwen2.5-VL fixture (random weights: the tokens mean nothing, but whether they change with
the batch is the question), one plain and one with ``VLLM_BATCH_INVARIANT=1``, both under vLLM's defaults with
``--no-enable-prefix-caching``, started at once. Then, one server at a time, the same pages at concurrency 1,
at ``--concurrency`` (8) and at 1 again: greedy, a fixed number of tokens (``ignore_eos``), token ids read
back (``return_token_ids``, ``skip_special_tokens: false``; the stream would drop special tokens). Per server:
the share of pages whose tokens at c=8 equal those at c=1 (batch invariance) and at c=1 twice (run-to-run),
the first differing position, and the speed of each pass (the mode's cost). Beside them, one start of the
Qwen3.5 reader with the env set, expected to be refused ("not supported for GDN_ATTN"): its error line.

``--speculative JSON`` (issue 30 item 7, "is the speculative decoding lossy?"): two more servers on the same
model, ``--speculative-config JSON`` without and with ``VLLM_BATCH_INVARIANT=1``. Greedy tokens at c=1 of the
speculative server against the plain one mix the method with floating-point order; against each other with batch
invariance on both, numerics are held still and what differs is the method. ``speculative`` in the JSON: both
comparisons, or vLLM's refusal line for a combination it does not start, and one sentence of answer.

    python lab/2026-12-03-h200-session-scripts/session/batch_invariance.py --model .gpu-carry/q25-bf16 --pages .gpu-carry/q200 \\
        --reader quantgate/assets/reader -o RESULTS/batchinv \
        --speculative '{"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 4}'
Writes RESULTS/batchinv/batch_invariance.json (rewritten after each step) and one server.log per server.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import os
import re
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]

from helpers import start_together  # noqa: E402
from steps import read_deadline  # noqa: E402

REFUSAL = re.compile(r".*batch_invariant.*not supported.*|.*not supported for GDN_ATTN.*")


def compare_tokens(a: dict[str, list[int]], b: dict[str, list[int]]) -> dict:
    """Pages present in both passes: how many have identical token ids, the first index where each differing
    page diverges, and the mean share of each page's tokens before the first difference."""
    common = sorted(set(a) & set(b))
    first: dict[str, int] = {}
    prefix = []
    for p in common:
        x, y = a[p], b[p]
        k = next((i for i, (u, v) in enumerate(zip(x, y, strict=False)) if u != v), None)
        if k is None and len(x) != len(y):
            k = min(len(x), len(y))
        if k is not None:
            first[p] = k
        n = max(len(x), len(y)) or 1
        prefix.append((n if k is None else k) / n)
    same = len(common) - len(first)
    return {"pages": len(common), "identical": same, "identical_rate": same / len(common) if common else None,
            "first_difference": first, "mean_common_prefix": sum(prefix) / len(prefix) if prefix else None}


def refusal_line(log_text: str) -> str | None:
    """vLLM's own error line for a batch-invariant start it refuses, if the log has one."""
    hits = [m.group(0).strip() for m in REFUSAL.finditer(log_text)]
    errs = [h for h in hits if "Error" in h] or hits
    return errs[0] if errs else None


def error_line(log_text: str) -> str | None:
    """Why a server did not start, in vLLM's words: a batch-invariance refusal, else the log's last error line."""
    hit = refusal_line(log_text)
    if hit:
        return hit
    errs = [x.strip() for x in log_text.splitlines() if "Error" in x and "Traceback" not in x]
    return errs[-1] if errs else None


def speculative_answer(result: dict) -> dict:
    """Issue 30 item 7 from a finished result: greedy exact match at c=1 of the speculative servers against their
    plain twins, with and without batch invariance, and the sentence that answers "is it lossy?"."""
    cmp, servers = result["comparisons"], result["servers"]
    mixed = cmp.get("plain_c1_vs_speculative_c1")
    held = cmp.get("batch_invariant_c1_vs_speculative_batch_invariant_c1")
    out = {"without_batch_invariance": mixed, "with_batch_invariance": held}
    refused = servers.get("speculative_batch_invariant", {})
    if held is not None and held["pages"]:
        lost = held["pages"] - held["identical"]
        verdict = "lossless on these pages" if lost == 0 else "lossy"
        out["answer"] = (f"With batch invariance holding numerics still, speculative decoding changed {lost} of "
                         f"{held['pages']} pages' greedy tokens at concurrency 1: {verdict}"
                         + (f" (without batch invariance: {mixed['pages'] - mixed['identical']} of {mixed['pages']})"
                            if mixed else "") + ".")
    elif refused and not refused.get("started", True):
        out["answer"] = ("vLLM refuses speculative decoding together with batch invariance on this model: "
                         f"{refused.get('error_line') or 'no error line in its log'}; the method cannot be told "
                         "apart from floating-point order this way.")
    else:
        out["answer"] = "not measured: the speculative servers did not serve"
    return out


def pass_speed(results: list[dict], wall_s: float) -> dict:
    toks = sum(len(r["token_ids"] or []) for r in results if r.get("token_ids") is not None)
    lat = sorted(r["latency_s"] for r in results if r.get("latency_s") is not None)
    return {"requests": len(results), "errors": sum(1 for r in results if r.get("error")), "wall_s": round(wall_s, 3),
            "output_tokens": toks, "output_tokens_per_s": toks / wall_s if wall_s else None,
            "latency_p50_s": lat[len(lat) // 2] if lat else None}


async def _pass(base: str, model: str, pages: list[tuple[str, bytes]], prompt: str, concurrency: int,
                max_tokens: int, timeout_s: float) -> list[dict]:
    import aiohttp

    sem = asyncio.Semaphore(concurrency)

    async def one(session, pid: str, png: bytes) -> dict:
        body = {"model": model, "max_tokens": max_tokens, "temperature": 0.0, "ignore_eos": True,
                "return_token_ids": True, "skip_special_tokens": False,
                "messages": [{"role": "user", "content": [
                    {"type": "image_url", "image_url": {"url": "data:image/png;base64," + base64.b64encode(png).decode()}},
                    {"type": "text", "text": prompt}]}]}
        async with sem:
            t0 = time.perf_counter()
            try:
                async with session.post(f"{base}/chat/completions", json=body) as r:
                    obj = await r.json(content_type=None)
                    if r.status != 200:
                        return {"page": pid, "error": f"HTTP {r.status}: {str(obj)[:300]}", "token_ids": None}
                ids = obj["choices"][0].get("token_ids")
                return {"page": pid, "token_ids": ids, "latency_s": time.perf_counter() - t0,
                        "error": None if ids is not None else "no token_ids in the response"}
            except Exception as e:  # noqa: BLE001 - recorded per request
                return {"page": pid, "error": f"{type(e).__name__}: {e}", "token_ids": None}

    timeout = aiohttp.ClientTimeout(total=timeout_s)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        return list(await asyncio.gather(*(one(session, pid, png) for pid, png in pages)))


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", type=Path, required=True, help="a non-GDN model (the Qwen2.5-VL fixture)")
    ap.add_argument("--pages", type=Path, required=True)
    ap.add_argument("--reader", type=Path, help="a Qwen3.5 (GDN) model: one start with the env, expected refused")
    ap.add_argument("-o", "--out", type=Path, required=True)
    ap.add_argument("--n-pages", type=int, default=16)
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--kv-bytes", type=int, default=2 * 2**30)
    ap.add_argument("--gpu-util", type=float, default=0.05)
    ap.add_argument("--max-num-seqs", type=int, default=16)
    ap.add_argument("--compile-cache", required=True)
    ap.add_argument("--startup-timeout", type=float, default=600.0)
    ap.add_argument("--server-arg", action="append", default=[], help="extra vllm serve argument for both servers")
    ap.add_argument("--deadline-file")
    ap.add_argument("--speculative", help="a --speculative-config JSON: two more servers with it, without and with "
                    "batch invariance (issue 30 item 7)")
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    a = parse_args(argv)
    from quantgate.io.fileio import atomic_write_json
    from quantgate.io.pageset import load_pageset
    from quantgate.schema.run import DEFAULT_PROMPT
    from quantgate.serve import make_backend
    from quantgate.serve.run import engine_settings

    deadline = read_deadline(a.deadline_file)
    os.environ.setdefault("CUDA_VISIBLE_DEVICES", "0")
    a.out.mkdir(parents=True, exist_ok=True)
    out_path = a.out / "batch_invariance.json"
    ps = load_pageset(a.pages)
    pages = [(p.id, ps.image_bytes(p)) for p in ps.split("heldout")[: a.n_pages]]
    result: dict = {"model": str(a.model), "pages": len(pages), "max_tokens": a.max_tokens,
                    "concurrency": [1, a.concurrency, 1], "servers": {}, "comparisons": {}, "errors": {}}

    def save():
        atomic_write_json(out_path, result)

    base_args = ["--no-enable-prefix-caching", f"--kv-cache-memory-bytes={a.kv_bytes}",
                 f"--max-num-seqs={a.max_num_seqs}", *a.server_arg]
    specs = {"plain": ({}, a.model, base_args), "batch_invariant": ({"VLLM_BATCH_INVARIANT": "1"}, a.model, base_args)}
    if a.speculative:
        json.loads(a.speculative)  # a bad JSON stops here, not in four server logs
        spec_args = [*base_args, "--speculative-config", a.speculative]
        specs["speculative"] = ({}, a.model, spec_args)
        specs["speculative_batch_invariant"] = ({"VLLM_BATCH_INVARIANT": "1"}, a.model, spec_args)
    if a.reader:  # eager: the refusal comes at model init, before any compile
        specs["reader_gdn_batch_invariant"] = ({"VLLM_BATCH_INVARIANT": "1"}, a.reader,
                                               ["--enforce-eager", "--gdn-prefill-backend=triton",
                                                "--kv-cache-memory-bytes=1073741824"])
    left = (deadline - time.time()) if deadline else a.startup_timeout
    timeout = max(60.0, min(a.startup_timeout, left - 60))
    servers = {}
    for i, (name, (env, model, args)) in enumerate(specs.items()):
        backend = make_backend("vllm", max_model_len=4096, gpu_memory_utilization=a.gpu_util,
                               compile_cache=a.compile_cache, extra_args=args, startup_timeout_s=timeout)
        server = backend.server(model, a.out / name / "server.log")
        server.env.update({**env, "VLLM_PORT": str(31000 + 100 * i)})
        servers[name] = (server, backend)

    def ready(name):
        server, backend = servers[name]
        eng = engine_settings(backend, server, server.log_text())
        result["servers"][name] = {"started": True, "start_s": server.start_s, "env": eng.env,
                                   "engine": eng.model_dump(), "command": server.command}
        save()

    def failed(name, err):
        rec = {"started": False, "error_line": error_line(servers[name][0].log_text()), "log_tail": err[-1200:]}
        if name == "reader_gdn_batch_invariant":
            rec["refused_as_expected"] = rec["error_line"] is not None
        result["servers"][name] = rec
        save()

    start_together({n: s for n, (s, _) in servers.items()}, time.time() + timeout, ready, failed)
    reader = servers.get("reader_gdn_batch_invariant")
    if reader and result["servers"]["reader_gdn_batch_invariant"].get("started"):
        result["servers"]["reader_gdn_batch_invariant"]["refused_as_expected"] = False
        reader[0].stop()
    save()

    tokens: dict[str, dict[str, dict[str, list[int]]]] = {}
    for name in [n for n in servers if n != "reader_gdn_batch_invariant"]:
        server, _ = servers[name]
        if not result["servers"].get(name, {}).get("started"):
            continue
        base = server.base_url
        passes = {}
        try:
            asyncio.run(_pass(base, str(a.model), pages[:2], DEFAULT_PROMPT, 1, 8, 300))  # warm-up, untimed
            for label, c in (("c1", 1), (f"c{a.concurrency}", a.concurrency), ("c1_again", 1)):
                if deadline and time.time() > deadline - 30:
                    result["errors"][f"{name} {label}"] = "skipped: deadline"
                    continue
                t0 = time.perf_counter()
                res = asyncio.run(_pass(base, str(a.model), pages, DEFAULT_PROMPT, c, a.max_tokens, 600))
                passes[label] = {"speed": pass_speed(res, time.perf_counter() - t0),
                                 "errors": {r["page"]: r["error"] for r in res if r.get("error")}}
                tokens.setdefault(name, {})[label] = {r["page"]: r["token_ids"] for r in res if r.get("token_ids")}
                result["servers"][name]["passes"] = passes
                save()
        finally:
            server.stop()
        t = tokens.get(name, {})
        cmp = {}
        if "c1" in t and f"c{a.concurrency}" in t:
            cmp[f"c1_vs_c{a.concurrency}"] = compare_tokens(t["c1"], t[f"c{a.concurrency}"])
        if "c1" in t and "c1_again" in t:
            cmp["c1_vs_c1_again"] = compare_tokens(t["c1"], t["c1_again"])
        result["comparisons"][name] = cmp
        save()
    for x, y in (("plain", "batch_invariant"), ("plain", "speculative"),
                 ("batch_invariant", "speculative_batch_invariant")):
        if "c1" in tokens.get(x, {}) and "c1" in tokens.get(y, {}):
            result["comparisons"][f"{x}_c1_vs_{y}_c1"] = compare_tokens(tokens[x]["c1"], tokens[y]["c1"])
    if a.speculative:
        result["speculative"] = {"config": json.loads(a.speculative), **speculative_answer(result)}
    cost = {}
    for label in ("c1", f"c{a.concurrency}"):
        sp = [result["servers"].get(n, {}).get("passes", {}).get(label, {}).get("speed", {}).get("output_tokens_per_s")
              for n in ("plain", "batch_invariant")]
        if all(sp):
            cost[label] = {"plain_tok_s": sp[0], "batch_invariant_tok_s": sp[1], "ratio": sp[1] / sp[0]}
    result["speed_cost"] = cost
    save()
    print(json.dumps({"comparisons": result["comparisons"], "speed_cost": cost,
                      "speculative": result.get("speculative", {}).get("answer"),
                      "reader": result["servers"].get("reader_gdn_batch_invariant", {}).get("error_line")}, indent=1,
                     default=str)[:3000])
    return 0


if __name__ == "__main__":
    sys.exit(main())
