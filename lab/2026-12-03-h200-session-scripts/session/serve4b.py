"""GPU session, GPU0 (issues 20, 22): the 4B-class variants under vLLM 0.26's defaults (torch.compile + CUDA
graphs), all started at once on one GPU, then measured one at a time.

1. Every variant's server is launched at the same moment: ``--kv-cache-memory-bytes`` (no start profiles
   memory while a neighbour allocates) with a small ``--gpu-memory-utilization`` (vLLM's free-memory check),
   ``--max-num-seqs`` (a hybrid model with full CUDA graphs needs a mamba block per sequence), one compile
   cache for all (quantgate's compile-cache option), ``--profiler-config`` (a profile needs no restart).
   Recorded: each cold start's seconds and the engine settings its log states.
2. One short warm-up request per server; then one variant at a time, the others idle, quantgate's client at
   each concurrency level (``--max-tokens`` output tokens, ignore_eos, ``--waves``); for the variants in
   ``--profile``, after their levels (a started profiler annotates every later step), a torch profile of
   decode steps at concurrency 1, per kernel class (profile_step.py's code). Each server stops when done.
3. Warm restarts, one at a time and uncontended, in ``--restart-order`` while the deadline allows; a variant
   that failed to start with the others gets its solo start and its levels there instead.
4. speed.json (speed_sweep.py's format, plus the start records and the FP8/BF16 and fp8-all/BF16
   single-stream ratios beside the weight-bytes bound) and profile.json, rewritten after every step.

    python lab/2026-12-03-h200-session-scripts/session/serve4b.py --work /tmp/qgwork --pages .gpu-carry/p4mp -o RESULTS/speed \\
        [--variants bf16,fp8-dynamic,fp8-all,nvfp4,mixed] [--profile bf16,fp8-dynamic,fp8-all] \\
        [--hbm RESULTS/hbm.json] [--deadline-file F] [--other-status F]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]  # steps; speed_sweep, profile_step, kernel_classes

from helpers import GiB, parse_bytes, single_stream_ratios, start_record, start_together  # noqa: E402
from steps import read_deadline  # noqa: E402


class Session:
    def __init__(self, a: argparse.Namespace):
        self.a = a
        self.deadline = read_deadline(a.deadline_file)
        self.out = a.out
        self.out.mkdir(parents=True, exist_ok=True)
        self.speed_path, self.profile_path = self.out / "speed.json", self.out / "profile.json"
        self.speed = {"variants": {}, "starts": {}, "errors": {}, "skipped": {}, "hbm_copy_gbs": self._hbm(),
                      "layout": self._layout()}
        self.profiles: dict = {}
        self.servers: dict = {}  # variant -> (server, backend, engine settings, its start's log text)

    # --- bookkeeping ---------------------------------------------------------------------------------------
    def left(self) -> float:
        return math.inf if self.deadline is None else self.deadline - time.time()

    def log(self, msg: str) -> None:
        print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)

    def save(self) -> None:
        from quantgate.io.fileio import atomic_write_json

        atomic_write_json(self.speed_path, self.speed)
        if self.profiles:
            atomic_write_json(self.profile_path, self.profiles)

    def _hbm(self) -> float | None:
        p = self.a.hbm
        if p and p.is_file():
            return json.loads(p.read_text()).get("hbm_copy_gbs")
        return None

    def _layout(self) -> dict:
        a = self.a
        return {"gpu": os.environ.get("CUDA_VISIBLE_DEVICES"), "servers_started_at_once": len(a.variants),
                "kv_cache_memory_bytes": a.kv_bytes, "gpu_memory_utilization": a.gpu_util,
                "max_num_seqs": a.max_num_seqs, "compile_cache": a.compile_cache, "levels": a.levels,
                "max_tokens": a.max_tokens, "waves": a.waves, "pages": str(a.pages),
                "measured": "one variant at a time; the other servers idle or stopped",
                "setting": self.setting}

    @property
    def setting(self) -> str:
        return f"vLLM default, --max-num-seqs {self.a.max_num_seqs}"

    def other_job(self) -> list[str] | None:
        from steps import running_steps

        return running_steps(self.a.other_status) if self.a.other_status else None

    # --- servers -------------------------------------------------------------------------------------------
    def run_dir(self, v: str) -> Path:
        return self.out / f"sweep-{v}"

    def args_for(self, v: str) -> list[str]:
        from profile_step import profiler_config
        from speed_sweep import server_args

        pcfg = profiler_config(self.run_dir(v) / "trace", self.a.delay, self.a.steps)
        return server_args(False, self.a.max_num_seqs,
                           [f"--kv-cache-memory-bytes={self.a.kv_bytes}", "--profiler-config", json.dumps(pcfg)])

    def make(self, v: str, i: int):
        from quantgate.serve import make_backend

        backend = make_backend("vllm", max_model_len=8192, gpu_memory_utilization=self.a.gpu_util,
                               compile_cache=self.a.compile_cache, extra_args=self.args_for(v),
                               startup_timeout_s=max(60.0, min(self.a.startup_timeout, self.left() - 30)))
        server = backend.server(self.a.work / f"q4b-{v}", self.run_dir(v) / "server.log")
        server.env["VLLM_PORT"] = str(30000 + 100 * i)  # vLLM's internal ports, apart for each server
        return server, backend

    def engine_of(self, v: str, server, backend):
        from quantgate.serve.run import engine_settings

        text = server.log_text()
        return engine_settings(backend, server, text), text

    def start_all(self, variants: list[str]) -> None:
        """Every server at once; one that exits or never answers is recorded and the others go on."""
        made = {}
        for i, v in enumerate(variants):
            self.run_dir(v).mkdir(parents=True, exist_ok=True)
            made[v] = self.make(v, i)

        def ready(v):
            server, backend = made[v]
            engine, text = self.engine_of(v, server, backend)
            self.servers[v] = (server, backend, engine, text)
            self.speed["starts"].setdefault(v, []).append(start_record(engine, "all at once", True))
            self.log(f"{v}: healthy after {server.start_s:.0f} s ({engine.compile_start}, compile "
                     f"{engine.compile_s} s, engine init {engine.init_engine_s} s)")
            self.save()

        def failed(v, err):
            self.speed["errors"][v] = f"concurrent start: {err[-1500:]}"
            self.log(f"{v}: failed to start with the others")
            self.save()

        until = time.time() + max(60.0, min(self.a.startup_timeout, self.left() - 30))
        start_together({v: m[0] for v, m in made.items()}, until, ready, failed)
        self.speed["layout"]["all_healthy_after_s"] = max(
            (s[0].start_s for s in self.servers.values() if s[0].start_s), default=None)
        self.save()

    def warm_up(self, v: str, image: bytes) -> None:
        from profile_step import _request

        server = self.servers[v][0]
        try:  # first-request JIT work stays out of the timed levels
            _request(server.base_url.removesuffix("/v1"), str(self.a.work / f"q4b-{v}"), image, 16)
        except Exception as e:  # noqa: BLE001 - recorded; the levels will show whether the server works
            self.speed["errors"][f"{v} warm-up"] = str(e)[:500]

    def stop(self, v: str) -> None:
        entry = self.servers.pop(v, None)
        if entry:
            entry[0].stop()

    # --- measurements --------------------------------------------------------------------------------------
    def levels(self, v: str) -> None:
        from speed_sweep import measure_levels

        server, backend, engine, text = self.servers[v]
        if self.left() < self.a.levels_min_s:
            self.speed["skipped"][v] = f"levels: {self.left():.0f} s left before the deadline"
            return
        load = os.getloadavg()
        other = self.other_job()
        t0 = time.time()
        _, entry = measure_levels(self.a.work / f"q4b-{v}", self.a.pages, server, backend, engine, text, self.run_dir(v),
                                  levels=self.a.levels, max_tokens=self.a.max_tokens, waves=self.a.waves,
                                  setting=self.setting, server_args_used=self.args_for(v),
                                  starts=list(self.speed["starts"].get(v, [])))
        entry.update(levels_wall_s=round(time.time() - t0, 1), loadavg_before=load, loadavg_after=os.getloadavg(),
                     other_gpu_job_step=other)
        self.speed["variants"][v] = entry
        self.save()
        self.log(f"{v}: levels done in {entry['levels_wall_s']:.0f} s")

    def profile(self, v: str, image: bytes) -> None:
        from kernel_classes import classify_trace, load_trace
        from profile_step import bound, profile_running, profiler_config

        if self.left() < self.a.profile_min_s:
            self.speed["skipped"][f"{v} profile"] = f"{self.left():.0f} s left before the deadline"
            return
        server, backend, engine, text = self.servers[v]
        trace_dir = self.run_dir(v) / "trace"
        _, box, trace = profile_running(server.base_url.removesuffix("/v1"), str(self.a.work / f"q4b-{v}"), image,
                                        trace_dir, max_tokens=self.a.profile_max_tokens, window=self.a.window,
                                        warmup=False)
        entry = {"setting": self.setting, "variant": v, "key": v, "trace": str(trace.relative_to(self.out)),
                 "profiler_config": profiler_config(trace_dir, self.a.delay, self.a.steps), "server_args": self.args_for(v),
                 "request": box, "engine": engine.model_dump(), "kernels": backend.read_log(text).kernels or {},
                 **classify_trace(load_trace(trace))}
        bound(entry, self.a.work / f"q4b-{v}", self.speed["hbm_copy_gbs"])
        self.profiles[v] = entry
        self.save()
        self.log(f"{v}: {entry['decode_steps']} decode steps profiled, {entry['gpu_ms_per_step']:.3f} GPU ms/step")

    def solo_start(self, v: str, kind: str) -> bool:
        from speed_sweep import start

        from quantgate.errors import ServerError

        try:
            server, backend, engine, text = start(
                self.a.work / f"q4b-{v}", self.run_dir(v), self.args_for(v), self.a.compile_cache,
                gpu_memory_utilization=self.a.gpu_util, env={"VLLM_PORT": "30000"},
                startup_timeout_s=max(60.0, min(self.a.startup_timeout, self.left() - 20)))
        except ServerError as e:
            self.speed["errors"][f"{v} {kind}"] = str(e)[-1500:]
            self.save()
            return False
        self.servers[v] = (server, backend, engine, text)
        self.speed["starts"].setdefault(v, []).append(start_record(engine, kind, False))
        if v in self.speed["variants"]:
            self.speed["variants"][v]["starts"].append(self.speed["starts"][v][-1])
        self.log(f"{v}: {kind}: healthy after {server.start_s:.0f} s ({engine.compile_start})")
        self.save()
        return True

    def restarts(self, image: bytes) -> None:
        est = self.a.restart_min_s
        for v in self.a.restart_order:
            if not (self.a.work / f"q4b-{v}").is_dir():
                continue
            if self.left() < est:
                self.speed["skipped"][f"{v} restart"] = f"{self.left():.0f} s left, a restart needs ~{est:.0f} s"
                continue
            t0 = time.time()
            measured = v in self.speed["variants"]
            try:
                if not self.solo_start(v, "warm restart, alone" if measured else "first start, alone"):
                    continue
                if not measured:  # failed with the others: its levels (and profile) now, alone
                    self.warm_up(v, image)
                    self.levels(v)
                    if v in self.a.profile:
                        self.profile(v, image)
            except Exception as e:  # noqa: BLE001 - one variant's failure must not end the session
                self.speed["errors"][f"{v} restart"] = f"{type(e).__name__}: {str(e)[:1000]}"
            finally:
                self.stop(v)
                self.save()
            if measured:
                est = max(est, 1.3 * (time.time() - t0))

    def finish(self) -> None:
        from speed_sweep import finish

        if not self.speed["hbm_copy_gbs"] and self.a.measure_hbm:
            try:
                from speed_sweep import copy_bandwidth_gbs

                self.speed["hbm_copy_gbs"] = round(copy_bandwidth_gbs(), 1)
            except Exception as e:  # noqa: BLE001 - no GPU (a dry run): the bound stays empty
                self.speed["errors"]["hbm"] = str(e)[:300]
        finish(self.speed)
        self.speed["single_stream_ratios"] = single_stream_ratios(self.speed)
        for k, r in self.speed["single_stream_ratios"].items():
            m = "not measured" if r["measured_c1"] is None else f"{r['measured_c1']:.3f}x"
            print(f"{k}: concurrency 1 {m}, weight-bytes bound {r['weight_bytes_bound']:.3f}x")
        self.save()


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--work", type=Path, required=True, help="holds q4b-<variant> checkpoints")
    ap.add_argument("--pages", type=Path, required=True)
    ap.add_argument("-o", "--out", type=Path, required=True)
    ap.add_argument("--variants", default="bf16,fp8-dynamic,fp8-all,nvfp4,mixed")
    ap.add_argument("--profile", default="bf16,fp8-dynamic,fp8-all", help="variants profiled at concurrency 1")
    ap.add_argument("--restart-order", default="bf16,fp8-dynamic,fp8-all,nvfp4,mixed")
    ap.add_argument("--levels", default="1,8,32,64")
    ap.add_argument("--waves", type=float, default=1.0)
    ap.add_argument("--max-tokens", type=int, default=1000)
    ap.add_argument("--max-num-seqs", type=int, default=64)
    ap.add_argument("--kv-bytes", type=parse_bytes, default=12 * GiB, help="KV cache per server (default 12GiB)")
    ap.add_argument("--gpu-util", type=float, default=0.05, help="--gpu-memory-utilization per server (only vLLM's "
                    "free-memory check at start, since the KV size is given)")
    ap.add_argument("--compile-cache", help="shared by every server (default WORK/vllm-cache)")
    ap.add_argument("--startup-timeout", type=float, default=900.0)
    ap.add_argument("--delay", type=int, default=16)
    ap.add_argument("--steps", type=int, default=32)
    ap.add_argument("--window", type=float, default=3.0)
    ap.add_argument("--profile-max-tokens", type=int, default=512)
    ap.add_argument("--levels-min-s", type=float, default=60.0, help="skip a variant's levels with less time left")
    ap.add_argument("--profile-min-s", type=float, default=30.0)
    ap.add_argument("--restart-min-s", type=float, default=100.0, help="first estimate of one warm restart")
    ap.add_argument("--hbm", type=Path, help="JSON with hbm_copy_gbs (measured before the servers start)")
    ap.add_argument("--measure-hbm", action="store_true", help="measure it here at the end if --hbm has none")
    ap.add_argument("--deadline-file", help="the session's deadline (steps.py init)")
    ap.add_argument("--other-status", type=Path, help="the other GPU job's status.jsonl: its running steps are "
                    "recorded with each variant's levels")
    a = ap.parse_args(argv)
    a.variants = [v for v in a.variants.split(",") if v]
    a.profile = [v for v in a.profile.split(",") if v]
    a.restart_order = [v for v in a.restart_order.split(",") if v]
    a.levels = [int(x) for x in a.levels.split(",")]
    a.compile_cache = a.compile_cache or str(a.work / "vllm-cache")
    return a


def main(argv: list[str] | None = None) -> int:
    a = parse_args(argv)
    from quantgate.io.pageset import load_pageset

    os.environ.setdefault("CUDA_VISIBLE_DEVICES", "0")
    ps = load_pageset(a.pages)
    image = ps.image_bytes(ps.split("heldout")[0])
    s = Session(a)
    present = [v for v in a.variants if (a.work / f"q4b-{v}" / "config.json").is_file()]
    for v in set(a.variants) - set(present):
        s.speed["errors"][v] = f"no checkpoint {a.work / f'q4b-{v}'} (build or quantize step failed)"
    s.speed["layout"]["servers_started_at_once"] = len(present)
    try:
        s.start_all(present)
        for v in list(s.servers):
            s.warm_up(v, image)
        for v in present:
            if v not in s.servers:
                continue
            try:
                s.levels(v)
                if v in a.profile and v in s.speed["variants"]:
                    s.profile(v, image)
            except Exception as e:  # noqa: BLE001 - recorded; the next variant goes on
                s.speed["errors"][v] = f"{type(e).__name__}: {str(e)[:1000]}"
            finally:
                s.stop(v)
                s.save()
        for v in list(s.servers):
            s.stop(v)
        s.restarts(image)
    finally:
        for v in list(s.servers):
            s.stop(v)
        s.finish()
    return 0


if __name__ == "__main__":
    sys.exit(main())
