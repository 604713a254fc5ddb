"""An OpenAI-compatible endpoint the user already runs (SGLang, TensorRT-LLM, a cluster):
quantgate only sends pages."""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import Field

from quantgate.errors import InputError
from quantgate.serve.backends.base import Backend, BackendOptions, register_backend


class OpenAIOptions(BackendOptions):
    endpoint: str = Field(pattern=r"^https?://", description="base URL of the running endpoint, e.g. "
                          "http://host:8000/v1")
    model: str | None = Field(None, min_length=1, description="model name sent in requests (default: the VARIANT "
                              "argument)")
    api_key_env: str | None = Field(None, min_length=1, description="environment variable holding the API key")


@register_backend("openai")
class OpenAIBackend(Backend):
    """an endpoint you already run (any OpenAI-compatible server): quantgate only sends pages."""

    Options = OpenAIOptions
    options: OpenAIOptions

    def server(self, model: Path, log_path: Path) -> None:
        return None

    def endpoint_url(self) -> str:
        return self.options.endpoint.rstrip("/")

    @property
    def serves_local_weights(self) -> bool:
        return False

    def model_name(self, model: Path) -> str:
        return self.options.model or str(model)

    def api_key(self) -> str | None:
        env = self.options.api_key_env
        if not env:
            return None
        key = os.environ.get(env)
        if key is None:
            raise InputError(f"environment variable {env} (the API key) is not set")
        return key
