"""Any OpenAI-compatible server started by a command you give: SGLang, llama.cpp's ``llama-server``,
TGI, a wrapper script. quantgate picks a free port, starts the command, waits for the health path,
sends the pages, stops it (with everything it spawned).

This file is the whole backend — the worked example of docs/extending.md. Registering it made
``--backend external --start-command … --health-path …`` appear on ``quantgate serve`` and
``quantgate lmeval``, and ``backend: {name: external, start_command: …}`` valid in a study.

    quantgate serve ./model-fp8 --pages pages -o runs/sglang --backend external \\
        --start-command 'python -m sglang.launch_server --model-path {model} --port {port}'
"""

from __future__ import annotations

import shlex
from pathlib import Path

from pydantic import Field, field_validator

from quantgate.serve.backends.base import Backend, ServerArgs, register_backend


class ExternalOptions(ServerArgs):
    start_command: str = Field(min_length=1, description="command that starts the server; {port} becomes a free "
                               "port, {model} the variant folder, e.g. 'llama-server -m {model}/model.gguf --port {port}'")
    model: str | None = Field(None, min_length=1, description="model name sent in requests (default: the VARIANT "
                              "argument)")
    health_path: str = Field("/health", pattern=r"^/", description="path that answers HTTP 200 once the server "
                             "is ready")
    startup_timeout_s: float = Field(600.0, gt=0, description="seconds to wait for the server to become healthy")

    @field_validator("start_command")
    @classmethod
    def _has_port(cls, v: str) -> str:
        if "{port}" not in v:
            raise ValueError("must contain {port}, where quantgate puts the port it chose")
        shlex.split(v)  # unbalanced quotes: refused here, not at start-up
        return v


@register_backend("external")
class ExternalBackend(Backend):
    """a server started by your --start-command (SGLang, llama.cpp, TGI, …) on the port quantgate picks."""

    Options = ExternalOptions
    options: ExternalOptions

    def server(self, model: Path, log_path: Path):
        from quantgate.serve.server import ManagedServer

        parts = shlex.split(self.options.start_command)

        def cmd(port: int) -> list[str]:
            return [p.replace("{port}", str(port)).replace("{model}", str(model)) for p in parts] + \
                list(self.options.extra_args)

        return ManagedServer(name=f"{Path(parts[0]).name} ({self.model_name(model)})", make_command=cmd,
                             log_path=log_path, health_path=self.options.health_path,
                             startup_timeout_s=self.options.startup_timeout_s)

    @property
    def serves_local_weights(self) -> bool:
        # the variant folder is what the server loads only when the command names it
        return "{model}" in self.options.start_command

    def model_name(self, model: Path) -> str:
        return self.options.model or str(model)
