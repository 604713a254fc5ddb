"""``transformers serve``: the embedded default, on CPU or a GPU."""

from __future__ import annotations

import importlib.metadata as md
import os
import shutil
import sys
from pathlib import Path

from pydantic import Field

from quantgate.errors import InputError
from quantgate.schema.run import EngineSettings, KernelCounts
from quantgate.serve.backends.base import Backend, ServerArgs, register_backend


class TransformersOptions(ServerArgs):
    device: str = Field("cpu", min_length=1, description="device transformers serve runs on (cpu, cuda:0, auto)")
    continuous_batching: bool = Field(False, description="transformers serve's continuous batching (otherwise "
                                      "one request at a time)")
    threads: int | None = Field(None, gt=0, description="torch threads of the server process (OMP_NUM_THREADS; "
                                "default: torch's, one per core). A small model answers one request as fast with 1 "
                                "on CPU and leaves the other cores free (benchmarks/demo_threads.py)")


@register_backend("transformers")
class TransformersBackend(Backend):
    """transformers serve (CPU or GPU), started per variant.

    Without continuous batching it serialises requests, so throughput is flat across concurrency
    levels; runs say so."""

    Options = TransformersOptions
    options: TransformersOptions

    def server(self, model: Path, log_path: Path):
        from quantgate.serve.server import ManagedServer

        exe = shutil.which("transformers", path=os.path.dirname(sys.executable)) or shutil.which("transformers")
        if not exe:
            raise InputError("`transformers` CLI not found; install transformers[serving] in this environment")
        o = self.options

        def cmd(port: int) -> list[str]:
            c = [exe, "serve", str(model), "--host", "127.0.0.1", "--port", str(port), "--device", o.device]
            if o.continuous_batching:
                c.append("--continuous-batching")
            return c + list(o.extra_args)

        env = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
        if o.threads:
            env["OMP_NUM_THREADS"] = str(o.threads)  # torch's intra-op pool reads it at import
        return ManagedServer(name=f"transformers serve {model.name}", make_command=cmd, log_path=log_path,
                             env=env, startup_timeout_s=300)

    def server_version(self) -> str | None:
        return f"transformers {md.version('transformers')}"

    engine_env = ("CUDA_VISIBLE_DEVICES", "OMP_NUM_THREADS")

    def engine_settings(self, text: str) -> EngineSettings:
        """What applies to transformers serve: the device, continuous batching, the dtype (``auto``: the
        checkpoint's) and torch.compile, as quantgate started it (its log states none of them)."""
        o, args = self.options, self.options.extra_args
        return EngineSettings(device=o.device, continuous_batching=o.continuous_batching,
                              dtype=_flag_value(args, "--dtype") or "auto",
                              compilation="torch.compile" if _last_bool(args, "--compile") else "none")

    def notes(self, model: Path) -> list[str]:
        notes = []
        if self.options.threads:
            notes.append(f"transformers serve ran with {self.options.threads} torch thread(s) (OMP_NUM_THREADS)")
        if not self.options.continuous_batching:
            notes.append("transformers serve ran without continuous batching: use it for accuracy, vLLM for speed "
                         "(what throughput did across levels is in the Speed section, as measured)")
        return notes

    def numerics(self, model: Path, kernels: KernelCounts):
        from quantgate.serve.numerics import variant_numerics

        # measured on CPU; another device is written "not measured" by variant_numerics
        return variant_numerics(model, self.name, device=self.options.device)


def _flag_value(args: list[str], flag: str) -> str | None:
    """The last value given to ``flag`` in ``args`` (``--flag V`` or ``--flag=V``)."""
    val = None
    for i, a in enumerate(args):
        if a == flag and i + 1 < len(args):
            val = args[i + 1]
        elif a.startswith(flag + "="):
            val = a.split("=", 1)[1]
    return val


def _last_bool(args: list[str], flag: str) -> bool:
    """A ``--flag / --no-flag`` switch as the last occurrence sets it (off when absent)."""
    on = False
    for a in args:
        if a == flag:
            on = True
        elif a == "--no-" + flag[2:]:
            on = False
    return on
