"""``vllm serve`` in its own interpreter (vLLM pins its own torch), and what its log says: the
version and the linear kernels it chose."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
from pathlib import Path
from typing import Any

from pydantic import Field

from quantgate.errors import InputError
from quantgate.serve.backends.base import Backend, ServerArgs, register_backend

VLLM_ENV = "QUANTGATE_VLLM"


class VllmOptions(ServerArgs):
    vllm_cmd: str | None = Field(None, min_length=1, description=f"command that runs vLLM's CLI, e.g. "
                                 f"'/opt/vllm/bin/vllm' or 'python3 -m vllm.entrypoints.cli.main' (default ${VLLM_ENV})")
    tensor_parallel_size: int = Field(1, gt=0, description="GPUs per model replica (vLLM --tensor-parallel-size)")
    data_parallel_size: int = Field(1, gt=0, description="model replicas (vLLM --data-parallel-size)")
    max_model_len: int | None = Field(None, gt=0, description="context length vLLM reserves KV cache for")
    gpu_memory_utilization: float | None = Field(None, gt=0, le=1, description="fraction of GPU memory vLLM may use")
    startup_timeout_s: float = Field(1200.0, gt=0, description="seconds to wait for the server to become healthy")


@register_backend("vllm")
class VllmBackend(Backend):
    """vllm serve, started per variant from its own environment (--vllm-cmd or $QUANTGATE_VLLM)."""

    Options = VllmOptions
    options: VllmOptions

    def command_prefix(self) -> list[str]:
        cmd = self.options.vllm_cmd or os.environ.get(VLLM_ENV)
        if not cmd:
            raise InputError(f"vLLM backend needs its command: pass --vllm-cmd or set {VLLM_ENV} "
                             "(e.g. '/opt/vllm-env/bin/vllm' or 'python3 -m vllm.entrypoints.cli.main')")
        return shlex.split(cmd)

    def server(self, model: Path, log_path: Path):
        from quantgate.serve.server import ManagedServer

        prefix, o = self.command_prefix(), self.options

        def cmd(port: int) -> list[str]:
            c = [*prefix, "serve", str(model), "--host", "127.0.0.1", "--port", str(port),
                 "--served-model-name", str(model), "--tensor-parallel-size", str(o.tensor_parallel_size),
                 "--data-parallel-size", str(o.data_parallel_size),
                 "--limit-mm-per-prompt", '{"image":1,"video":0}']
            if o.max_model_len:
                c += ["--max-model-len", str(o.max_model_len)]
            if o.gpu_memory_utilization:
                c += ["--gpu-memory-utilization", str(o.gpu_memory_utilization)]
            return c + list(o.extra_args)

        return ManagedServer(name=f"vllm serve {model.name}", make_command=cmd, log_path=log_path,
                             startup_timeout_s=o.startup_timeout_s)

    def read_log(self, text: str) -> dict[str, Any]:
        facts: dict[str, Any] = {"kernels": kernels_from_log(text), "notes": []}
        version = version_from_log(text)
        if version:
            facts["server_version"] = f"vllm {version}"
        # what the kernels compute per format (Marlin NVFP4: weight-only) is written by Backend.numerics
        return facts


_KERNEL_RE = re.compile(r"(?:Using|Selected)\s+([A-Za-z0-9_]+(?:Kernel|LinearMethod|Backend))\b(?:\s+for\s+([A-Za-z0-9_]+))?")
_VERSION_RE = re.compile(r"vLLM API server version (\S+)|LLM engine \(v(\d[\w.+-]*)\)", re.I)


def kernels_from_log(text: str) -> dict[str, str]:
    """The linear kernels vLLM says it chose (e.g. ``CutlassFP8ScaledMMLinearKernel``,
    ``MarlinNvFp4LinearKernel``), keyed by the class/scheme it names, so a run records which code
    path produced its numbers."""
    found: dict[str, str] = {}
    for m in _KERNEL_RE.finditer(text):
        kernel, scheme = m.group(1), m.group(2)
        found[scheme or kernel] = kernel
    return found


def version_from_log(text: str) -> str | None:
    m = _VERSION_RE.search(text)
    return (m.group(1) or m.group(2)) if m else None


def probe_version(cmd: str | None) -> tuple[str | None, str]:
    """(version, status) from ``CMD --version``: whether the configured vLLM command runs at all."""
    if not cmd:
        return None, f"not configured (set ${VLLM_ENV} or pass --vllm-cmd)"
    try:
        r = subprocess.run([*shlex.split(cmd), "--version"], capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as e:
        return None, f"{cmd!r} did not run: {e}"
    if r.returncode != 0:
        return None, f"{cmd!r} --version exited {r.returncode}: {(r.stderr or r.stdout).strip()[-200:]}"
    return r.stdout.strip().splitlines()[-1] if r.stdout.strip() else "?", "ok"
