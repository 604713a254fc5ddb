"""A variant's identity by content: one sha256 over its weight files. Quantize, serve, lm-eval and the
study compare it to decide whether a finished run still belongs to the weights on disk."""

from __future__ import annotations

import hashlib
from pathlib import Path

from quantgate.io.fileio import sha256_file

_CACHE: dict[tuple, str] = {}


def weights_fingerprint(variant: Path) -> str:
    """sha256 over the variant's ``*.safetensors`` files (names and contents).

    Memoised per process on each file's (path, size, mtime): a study asks for it when quantizing,
    serving and running lm-eval, and hashing a 9 GB checkpoint three times is a minute of nothing."""
    files = sorted(Path(variant).glob("*.safetensors"))
    key = tuple((str(f.resolve()), f.stat().st_size, f.stat().st_mtime_ns) for f in files)
    if key not in _CACHE:
        h = hashlib.sha256()
        for f in files:
            h.update(f.name.encode() + b"\0" + sha256_file(f).encode())
        _CACHE[key] = h.hexdigest()
    return _CACHE[key]
