"""Serve: start a server per variant (transformers serve, vllm serve, a command you give) or use an
endpoint; send every page with one async client; record each request; speed per concurrency level.

Attributes load on first use (PEP 562): the CLI reads backend options (``serve.backends``) at every
start, and should not pay for the client (aiohttp) and statistics (numpy) to do so."""

__all__ = ["ServeHooks", "ServeOptions", "load_records", "make_backend", "serve_variant"]


def __getattr__(name: str):
    if name in ("ServeHooks", "ServeOptions", "load_records", "serve_variant"):
        from quantgate.serve import run

        return getattr(run, name)
    if name == "make_backend":
        from quantgate.serve.backends import make_backend

        return make_backend
    raise AttributeError(f"module 'quantgate.serve' has no attribute {name!r}")
