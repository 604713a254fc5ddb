"""Reading and writing a benchmark's result file, gzipped when its name ends in ``.gz``. The larger committed
results are kept gzipped: they are tables of many rows as indented JSON, and the tracked tree has a size budget
(device calls carry it). Imported by the scripts beside it (``python benchmarks/X.py`` puts this folder on the
path)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any


def write_text(path: Path, text: str) -> None:
    """``text`` to ``path``, gzipped (no timestamp, so a rerun with the same numbers is the same bytes) for .gz;
    written beside it and moved into place, so an interrupted run leaves the previous result whole."""
    data = text.encode("utf-8")
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(gzip.compress(data, mtime=0) if path.suffix == ".gz" else data)
    tmp.replace(path)


def write_json(path: Path, obj: Any, **dumps: Any) -> None:
    write_text(path, json.dumps(obj, **({"indent": 1} | dumps)) + "\n")


def read_json(path: Path) -> Any:
    raw = path.read_bytes()
    return json.loads(gzip.decompress(raw) if path.suffix == ".gz" else raw)
