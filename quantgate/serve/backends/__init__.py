"""Backends: how a server for a variant is started (or found). Every one speaks OpenAI's
chat-completions API, so one client measures them all.

One module per backend (``transformers``, ``vllm``, ``openai``, ``external``), each registering
itself with ``@register_backend(NAME)`` and declaring its options as a pydantic model; ``base``
holds the contract and the registry, ``derive`` turns the option models into CLI flags and the
study schema. Adding a backend is adding one module here (docs/extending.md)."""

from quantgate.serve.backends.base import (
    Backend,
    BackendOptions,
    ServerArgs,
    get_backend,
    make_backend,
    register_backend,
    registered,
)

__all__ = ["Backend", "BackendOptions", "ServerArgs", "get_backend", "make_backend", "register_backend", "registered"]
