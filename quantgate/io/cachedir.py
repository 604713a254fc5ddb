"""The machine's quantgate cache: one folder per user and machine that every study and run shares — vLLM's compile
cache (``vllm/``), the FlashInfer prebuild's marker (``flashinfer/``), built variants by input fingerprint
(``variants/``) — so a second study of the same checkpoint on the same machine starts warm instead of paying the
compiles, JIT builds and quantizations again (each is keyed by content, never by the study's folder)."""

from __future__ import annotations

import os
from pathlib import Path

CACHE_ENV = "QUANTGATE_CACHE_DIR"  # a folder, or 'none': nothing shared between studies


def cache_root() -> Path | None:
    """``$QUANTGATE_CACHE_DIR``, else ``$XDG_CACHE_HOME/quantgate``, else ``~/.cache/quantgate`` (absolute);
    None when ``$QUANTGATE_CACHE_DIR`` is ``none``."""
    env = os.environ.get(CACHE_ENV)
    if env:
        return None if env.strip().lower() == "none" else Path(env).expanduser().resolve()
    xdg = os.environ.get("XDG_CACHE_HOME")
    return ((Path(xdg) if xdg else Path.home() / ".cache") / "quantgate").expanduser().resolve()


def cache_dir(what: str) -> Path | None:
    """One part of the cache (``vllm``, ``flashinfer``, ``variants``), not created here; None when it is off."""
    root = cache_root()
    return None if root is None else root / what
