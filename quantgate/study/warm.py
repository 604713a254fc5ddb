"""What a study does so its servers start warm: FlashInfer's sampling module built once per machine in the
background while the variants are quantized (``serve.warm``), so no server start pays its JIT build and no server
started beside it waits on its lock. (The compile cache and the built variants are shared through the machine
cache by the backend and by quantize themselves.)"""

from __future__ import annotations

from collections.abc import Callable
from threading import Thread

from quantgate.errors import InputError
from quantgate.serve.backends import BackendOptions


def warm_in_background(backend: BackendOptions, log: Callable[[str], None]) -> Thread | None:
    """The prebuild's thread for a vLLM study (None for other backends, or when no vLLM command is configured:
    the first server start then says so)."""
    from quantgate.serve.backends.vllm import VllmBackend
    from quantgate.serve.warm import prebuild_in_background

    if backend.name != "vllm":
        return None
    try:
        prefix = VllmBackend(**backend.model_dump(exclude={"name"})).command_prefix()
    except InputError:
        return None
    return prebuild_in_background(prefix, log)
