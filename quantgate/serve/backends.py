"""Backends: how a server for a variant is started (or found). Every one speaks OpenAI's
chat-completions API, so one client measures them all."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path

from quantgate.errors import InputError
from quantgate.modeldir import check_model_dir  # noqa: F401  (re-exported for the serve stage)
from quantgate.serve.server import ManagedServer


@dataclass
class Backend:
    name: str
    extra_args: list[str] = field(default_factory=list)

    def server(self, model: Path, log_path: Path) -> ManagedServer | None:
        raise NotImplementedError

    def model_name(self, model: Path) -> str:
        return str(model)

    def describe(self) -> dict:
        return {"backend": self.name}


@dataclass
class TransformersBackend(Backend):
    """``transformers serve`` — the embedded default (CPU or GPU). It serialises requests, so on
    CPU throughput is flat across concurrency levels; reports say so."""

    name: str = "transformers"
    device: str = "cpu"
    continuous_batching: bool = False

    def server(self, model: Path, log_path: Path) -> ManagedServer:
        exe = shutil.which("transformers", path=os.path.dirname(sys.executable)) or shutil.which("transformers")
        if not exe:
            raise InputError("`transformers` CLI not found; install transformers[serving] in this environment")

        def cmd(port: int) -> list[str]:
            c = [exe, "serve", str(model), "--host", "127.0.0.1", "--port", str(port), "--device", self.device]
            if self.continuous_batching:
                c.append("--continuous-batching")
            return c + list(self.extra_args)

        return ManagedServer(name=f"transformers serve {model.name}", make_command=cmd, log_path=log_path,
                             env={"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}, startup_timeout_s=300)

    def describe(self) -> dict:
        import importlib.metadata as md

        return {"backend": self.name, "server_version": f"transformers {md.version('transformers')}",
                "notes": ["transformers serve handles one request at a time: throughput is flat across "
                          "concurrency levels; use it for accuracy, vLLM for speed"] if not self.continuous_batching else []}


@dataclass
class VllmBackend(Backend):
    """``vllm serve`` in its own interpreter (vLLM pins its own torch). The command comes from
    ``vllm_cmd`` or ``$QUANTGATE_VLLM``, e.g. ``/opt/vllm/bin/vllm`` or
    ``python3 -m vllm.entrypoints.cli.main``."""

    name: str = "vllm"
    vllm_cmd: str | None = None
    tensor_parallel_size: int = 1
    data_parallel_size: int = 1
    max_model_len: int | None = None
    gpu_memory_utilization: float | None = None
    startup_timeout_s: float = 1200.0

    def command_prefix(self) -> list[str]:
        cmd = self.vllm_cmd or os.environ.get("QUANTGATE_VLLM")
        if not cmd:
            raise InputError("vLLM backend needs its command: pass --vllm-cmd or set QUANTGATE_VLLM "
                             "(e.g. '/opt/vllm-env/bin/vllm' or 'python3 -m vllm.entrypoints.cli.main')")
        return shlex.split(cmd)

    def server(self, model: Path, log_path: Path) -> ManagedServer:
        prefix = self.command_prefix()

        def cmd(port: int) -> list[str]:
            c = [*prefix, "serve", str(model), "--host", "127.0.0.1", "--port", str(port),
                 "--served-model-name", str(model), "--tensor-parallel-size", str(self.tensor_parallel_size),
                 "--data-parallel-size", str(self.data_parallel_size),
                 "--limit-mm-per-prompt", '{"image":1,"video":0}']
            if self.max_model_len:
                c += ["--max-model-len", str(self.max_model_len)]
            if self.gpu_memory_utilization:
                c += ["--gpu-memory-utilization", str(self.gpu_memory_utilization)]
            return c + list(self.extra_args)

        return ManagedServer(name=f"vllm serve {model.name}", make_command=cmd, log_path=log_path,
                             startup_timeout_s=self.startup_timeout_s)

    def describe(self) -> dict:
        return {"backend": self.name, "server_version": None, "notes": []}


@dataclass
class OpenAIBackend(Backend):
    """An endpoint the user already runs (SGLang, TensorRT-LLM, a cluster): quantgate only sends pages."""

    name: str = "openai"
    endpoint: str = ""
    model: str | None = None
    api_key_env: str | None = None

    def server(self, model: Path, log_path: Path) -> None:
        return None

    def model_name(self, model: Path) -> str:
        return self.model or str(model)

    def api_key(self) -> str | None:
        if not self.api_key_env:
            return None
        key = os.environ.get(self.api_key_env)
        if key is None:
            raise InputError(f"environment variable {self.api_key_env} (the API key) is not set")
        return key


_KERNEL_RE = re.compile(r"(?:Using|Selected)\s+([A-Za-z0-9_]+(?:Kernel|LinearMethod|Backend))\b(?:\s+for\s+([A-Za-z0-9_]+))?")


def kernels_from_log(text: str) -> dict[str, str]:
    """The linear kernels vLLM says it chose (e.g. ``CutlassFP8ScaledMMLinearKernel``,
    ``MarlinNvFp4LinearKernel``), keyed by the class/scheme it names, so a run records which code
    path produced its numbers."""
    found: dict[str, str] = {}
    for m in _KERNEL_RE.finditer(text):
        kernel, scheme = m.group(1), m.group(2)
        found[scheme or kernel] = kernel
    return found


def make_backend(name: str, **kw) -> Backend:
    if name == "transformers":
        return TransformersBackend(**{k: v for k, v in kw.items() if k in ("device", "continuous_batching", "extra_args")})
    if name == "vllm":
        keep = ("vllm_cmd", "tensor_parallel_size", "data_parallel_size", "max_model_len", "gpu_memory_utilization",
                "extra_args", "startup_timeout_s")
        return VllmBackend(**{k: v for k, v in kw.items() if k in keep and v is not None})
    if name == "openai":
        if not kw.get("endpoint"):
            raise InputError("backend openai needs --endpoint URL (e.g. http://host:8000/v1)")
        return OpenAIBackend(endpoint=kw["endpoint"], model=kw.get("served_model"), api_key_env=kw.get("api_key_env"))
    raise InputError(f"unknown backend {name!r}: use transformers, vllm or openai")
