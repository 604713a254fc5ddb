"""GPU session, issue 30 item 6: is the 122 s that four vLLM servers started together on a fresh GPU waited the
one-time build of FlashInfer's sampling module (docs/gpu-plan-issue30.md, "Item 6"), and do four servers with it
built reach vLLM's KV-cache line within 20 s of one started alone?

Phases, each a set of servers of one model started at once and stopped once all are healthy (or failed):
  A  one server, the machine's own FlashInfer workspace (on a fresh machine it builds the module: A is also the
     prebuild for every later start on the machine)
  B  ``--servers`` (4) servers, ``FLASHINFER_WORKSPACE_BASE`` an empty folder: one builds, the others wait on its lock
  C  the same servers with B's folder, now built
  D  (optional) ``--servers`` servers, an empty folder and ``VLLM_USE_FLASHINFER_SAMPLER=0``: no FlashInfer sampler
Per server, from its own log's stamps (1 s): the span between vLLM's profiling run and its KV-cache line
(``engine.profile_wait_s``, as every quantgate run records it; an eager start logs no warm-up line, so the span from
the encoder-cache line is kept too) and launch to healthy. Per phase: the spans' range and how far apart the KV-cache
lines fall (servers leaving within ~1 s of each other after a long span: the lock's signature).

    python lab/2026-12-03-h200-session-scripts/session/flashinfer_wait.py --model .gpu-carry/q25-bf16 --compile-cache /tmp/qgwork/cache \\
        --server-arg=--enforce-eager -o RESULTS/flashinfer-wait [--phases A,B,C] [--deadline-file F]
Writes RESULTS/flashinfer-wait/flashinfer_wait.json (rewritten after each phase) and a server.log per server; prints
a table.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]

from helpers import start_together  # noqa: E402
from steps import read_deadline  # noqa: E402

ENCODER = "Encoder cache will be initialized"
KV = ("Initial free memory", "GPU KV cache size")
PHASES = {  # phase -> (servers: 1 or --servers, workspace: machine / fresh / B's, extra environment)
    "A": ("one", "machine", {}),
    "B": ("many", "fresh", {}),
    "C": ("many", "B", {}),
    "D": ("many", "fresh", {"VLLM_USE_FLASHINFER_SAMPLER": "0"}),
}


def log_marks(text: str) -> dict:
    """The last start's encoder-cache and KV-cache lines in one server log, as seconds of its clock; the span
    between them (the whole memory-profiling run, eager or compiled), vLLM's profiling-run-to-KV span, and the
    KV-to-warmed-up span (where an eager start of vLLM 0.26 samples first: 2026-12-03's phase B waited there)."""
    from quantgate.serve.backends.vllm import log_seconds, profile_wait_from_log, warmup_wait_from_log

    enc = kv = None
    for line in text.splitlines():
        if ENCODER in line:
            enc, kv = log_seconds(line), None
        elif kv is None and any(k in line for k in KV):
            kv = log_seconds(line)
    return {"encoder_line": enc, "kv_line": kv, "encoder_to_kv_s": kv - enc if enc is not None and kv is not None
            else None, "profile_wait_s": profile_wait_from_log(text), "warmup_wait_s": warmup_wait_from_log(text)}


def phase_summary(servers: dict[str, dict]) -> dict:
    """Over one phase's started servers: the spans' range, and the spread of their KV-cache lines."""
    ok = [s for s in servers.values() if s.get("started")]

    def rng(key: str) -> list[float] | None:
        xs = [s[key] for s in ok if s.get(key) is not None]
        return [min(xs), max(xs)] if xs else None

    kv = [s["kv_line"] for s in ok if s.get("kv_line") is not None]
    return {"servers": len(servers), "started": len(ok), "profile_wait_s": rng("profile_wait_s"),
            "warmup_wait_s": rng("warmup_wait_s"),
            "encoder_to_kv_s": rng("encoder_to_kv_s"), "start_s": rng("start_s"),
            "kv_lines_spread_s": max(kv) - min(kv) if len(kv) > 1 else None}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", type=Path, required=True, help="the model every server serves (the Qwen2.5-VL fixture)")
    ap.add_argument("-o", "--out", type=Path, required=True)
    ap.add_argument("--phases", default="A,B,C", help="comma list of A, B, C, D (default A,B,C); C needs B")
    ap.add_argument("--servers", type=int, default=4, help="servers in phases B, C and D (default 4)")
    ap.add_argument("--kv-bytes", type=int, default=2 * 2**30, help="KV cache per server (--kv-cache-memory-bytes)")
    ap.add_argument("--gpu-util", type=float, default=0.05)
    ap.add_argument("--compile-cache", required=True, help="the servers' compile cache (as the study's)")
    ap.add_argument("--startup-timeout", type=float, default=900.0)
    ap.add_argument("--server-arg", action="append", default=[], help="extra vllm serve argument for every server")
    ap.add_argument("--deadline-file")
    a = ap.parse_args(argv)
    phases = [p.strip().upper() for p in a.phases.split(",") if p.strip()]
    bad = [p for p in phases if p not in PHASES]
    if bad or not phases:
        ap.error(f"--phases {a.phases}: each of A, B, C, D")
    if "C" in phases and ("B" not in phases or phases.index("C") < phases.index("B")):
        ap.error("--phases: C reuses B's FlashInfer workspace, so B must come before it")
    if a.servers < 1:
        ap.error("--servers: at least 1")
    a.phase_list = phases
    return a


def main(argv: list[str] | None = None) -> int:
    a = parse_args(argv)
    from quantgate.io.fileio import atomic_write_json
    from quantgate.serve import make_backend
    from quantgate.serve.run import engine_settings

    deadline = read_deadline(a.deadline_file)
    os.environ.setdefault("CUDA_VISIBLE_DEVICES", "0")
    used = [a.out / f"flashinfer-{p}" for p in a.phase_list if PHASES[p][1] == "fresh" and (a.out / f"flashinfer-{p}").exists()]
    if used:  # a fresh workspace must be empty to show a build: a rerun into the same -o would find it built
        raise SystemExit(f"{used[0]}: exists from an earlier run; pass another -o")
    a.out.mkdir(parents=True, exist_ok=True)
    out_path = a.out / "flashinfer_wait.json"
    result: dict = {"model": str(a.model), "servers_per_phase": a.servers, "phases": {}}
    workspaces: dict[str, str | None] = {}

    for phase in a.phase_list:
        if deadline and time.time() > deadline - 120:
            result["phases"][phase] = {"skipped": "deadline"}
            atomic_write_json(out_path, result)
            continue
        count, where, env = PHASES[phase]
        n = 1 if count == "one" else a.servers
        if where == "machine":
            ws = None  # FlashInfer's default: $HOME/.cache/flashinfer
        elif where == "fresh":
            ws = str((a.out / f"flashinfer-{phase}").resolve())
            Path(ws).mkdir(parents=True)  # empty: checked above
        else:
            ws = workspaces[where]
        workspaces[phase] = ws
        phase_env = {**env, **({"FLASHINFER_WORKSPACE_BASE": ws} if ws else {})}
        left = (deadline - time.time() - 60) if deadline else a.startup_timeout
        timeout = max(60.0, min(a.startup_timeout, left))
        servers = {}
        for i in range(n):
            backend = make_backend("vllm", max_model_len=4096, gpu_memory_utilization=a.gpu_util,
                                   compile_cache=a.compile_cache, startup_timeout_s=timeout,
                                   extra_args=["--no-enable-prefix-caching", f"--kv-cache-memory-bytes={a.kv_bytes}",
                                               *a.server_arg])
            server = backend.server(a.model, a.out / phase / f"s{i}" / "server.log")
            server.env.update({**phase_env, "VLLM_PORT": str(32000 + 100 * i)})
            servers[f"s{i}"] = (server, backend)
        rec: dict = {"env": phase_env, "workspace": ws or "machine default", "servers": {}}
        launched = time.time()

        def ready(name, servers=servers, rec=rec):
            server, backend = servers[name]
            text = server.log_text()
            rec["servers"][name] = {"started": True, "start_s": server.start_s, **log_marks(text),
                                    "engine_profile_wait_s": engine_settings(backend, server, text).profile_wait_s}

        def failed(name, err, servers=servers, rec=rec):
            rec["servers"][name] = {"started": False, "error": err[-800:], **log_marks(servers[name][0].log_text())}

        start_together({k: s for k, (s, _) in servers.items()}, time.time() + timeout, ready, failed)
        for server, _ in servers.values():
            server.stop()
        rec["wall_s"] = round(time.time() - launched, 1)
        rec["summary"] = phase_summary(rec["servers"])
        result["phases"][phase] = rec
        atomic_write_json(out_path, result)

    print(f"{'phase':<6}{'servers':>8}{'started':>8}  {'profiling->KV s':<16}{'encoder->KV s':<16}"
          f"{'KV->warmed s':<16}{'KV lines spread s':>18}")
    for phase, rec in result["phases"].items():
        s = rec.get("summary")
        if not s:
            print(f"{phase:<6}  {rec.get('skipped', '')}")
            continue
        print(f"{phase:<6}{s['servers']:>8}{s['started']:>8}  {str(s['profile_wait_s']):<16}"
              f"{str(s['encoder_to_kv_s']):<16}{str(s.get('warmup_wait_s')):<16}{str(s['kv_lines_spread_s']):>18}")
    return 0 if all(r.get("summary", {}).get("started") == r.get("summary", {}).get("servers")
                    for r in result["phases"].values() if "summary" in r) else 1


if __name__ == "__main__":
    sys.exit(main())
