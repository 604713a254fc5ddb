"""Serve: start a server per variant (transformers serve, vllm serve) or use an endpoint; send
every page with one async client; record each request; speed per concurrency level."""

from quantgate.serve.backends import make_backend
from quantgate.serve.run import load_records, serve_variant

__all__ = ["load_records", "make_backend", "serve_variant"]
