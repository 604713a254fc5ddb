"""What vLLM JIT-builds inside the first start on a fresh machine, built once per machine ahead of it.

FlashInfer's sampling module is compiled (nvcc, ~100 s on an H200 host) by the first sampler call of the first
vLLM server, inside its start, under FlashInfer's own file lock, so every server started beside it waits on that
lock too. ``prebuild_flashinfer`` makes that call in vLLM's own interpreter before any server starts (a study runs
it in the background while it quantizes; ``quantgate warm`` runs it in the foreground), under a lock of ours, and
leaves a marker in the machine's quantgate cache so later studies skip even the ~6 s of loading it."""

from __future__ import annotations

import fcntl
import hashlib
import shlex
import shutil
import subprocess
import threading
import time
from collections.abc import Callable
from typing import Literal

from quantgate.io.cachedir import cache_dir
from quantgate.schema.base import Record

# exit 3: no FlashInfer in vLLM's interpreter (a CPU machine, the stand-in vLLM): nothing to build
PREBUILD_CODE = ("import importlib.util, sys\n"
                 "if importlib.util.find_spec('flashinfer') is None:\n    sys.exit(3)\n"
                 "from flashinfer.sampling import get_sampling_module\nget_sampling_module()\n")
NOTHING_TO_BUILD = 3


class Prebuild(Record):
    """What one prebuild did: ``built`` (ran now), ``cached`` (the machine's marker says it was built),
    ``unavailable`` (no FlashInfer in vLLM's interpreter), ``off`` (no machine cache, or no interpreter to run
    it with), ``failed`` (the build exited non-zero: the first server builds it then, as without a prebuild)."""

    status: Literal["built", "cached", "unavailable", "off", "failed"]
    seconds: float
    detail: str = ""


def python_of(vllm_prefix: list[str]) -> list[str] | None:
    """vLLM's interpreter with whatever prefixes it (``env PYTHONPATH=… python3``), from the command that runs
    vLLM's CLI: ``… python -m vllm.entrypoints.cli.main`` → ``… python``; a ``vllm`` console script → the
    interpreter of its ``#!`` line. None when neither can be told."""
    if "-m" in vllm_prefix:
        return vllm_prefix[:vllm_prefix.index("-m")] or None
    exe = shutil.which(vllm_prefix[-1]) if vllm_prefix else None
    if exe is None:
        return None
    try:
        with open(exe, "rb") as fh:
            first = fh.readline(4096).decode("utf-8", "replace").strip()
    except OSError:
        return None
    return [*vllm_prefix[:-1], *shlex.split(first[2:])] if first.startswith("#!") else None


def prebuild_flashinfer(vllm_prefix: list[str], log: Callable[[str], None] = print,
                        timeout_s: float = 900.0) -> Prebuild:
    """Build FlashInfer's sampling module once per machine and vLLM interpreter (see the module's docstring).
    Blocks while another process of this machine holds the prebuild's lock, then finds its marker."""
    t0 = time.time()
    folder, python = cache_dir("flashinfer"), python_of(vllm_prefix)
    if folder is None or python is None:
        why = "the machine cache is off" if folder is None else f"no interpreter found in {shlex.join(vllm_prefix)!r}"
        return Prebuild(status="off", seconds=0.0, detail=why)
    key = hashlib.sha256(shlex.join(python).encode()).hexdigest()[:16]
    marker = folder / f"sampling-{key}.built"
    if marker.is_file():
        return Prebuild(status="cached", seconds=0.0, detail=str(marker))
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / "prebuild.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one build per machine; a second caller waits and finds the marker
        if marker.is_file():
            return Prebuild(status="cached", seconds=round(time.time() - t0, 1), detail=str(marker))
        log(f"FlashInfer: building its sampling module once for this machine ({shlex.join(python)})")
        try:
            r = subprocess.run([*python, "-c", PREBUILD_CODE], capture_output=True, text=True, timeout=timeout_s)
        except (OSError, subprocess.TimeoutExpired) as e:
            return Prebuild(status="failed", seconds=round(time.time() - t0, 1), detail=str(e)[-300:])
        s = round(time.time() - t0, 1)
        if r.returncode == NOTHING_TO_BUILD:
            return Prebuild(status="unavailable", seconds=s, detail="no flashinfer in vLLM's interpreter")
        if r.returncode != 0:
            return Prebuild(status="failed", seconds=s, detail=(r.stderr or r.stdout).strip()[-300:])
        marker.write_text(f"built in {s} s by {shlex.join(python)}\n")
        return Prebuild(status="built", seconds=s, detail=str(marker))


def prebuild_in_background(vllm_prefix: list[str], log: Callable[[str], None]) -> threading.Thread:
    """``prebuild_flashinfer`` in a daemon thread (a study's quantize goes on beside it; a server started before
    it ends waits on FlashInfer's own lock, as it would have without it); its outcome is one log line."""
    def work() -> None:
        p = prebuild_flashinfer(vllm_prefix, log)
        if p.status in ("built", "failed"):
            why = f" ({p.detail})" if p.status == "failed" else ""
            log(f"FlashInfer prebuild: {p.status} in {p.seconds} s{why}")

    t = threading.Thread(target=work, name="flashinfer-prebuild", daemon=True)
    t.start()
    return t
