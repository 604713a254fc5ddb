"""Argument types and output helpers the verbs share. They live beside the commands (not in
``quantgate.cli``) so that no command imports the module that imports the commands."""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def print_json(obj) -> None:
    print(json.dumps(obj, indent=2, ensure_ascii=False, default=str))


def existing_path(s: str) -> Path:
    p = Path(s)
    if not p.exists():
        raise argparse.ArgumentTypeError(f"{s}: no such file or folder")
    return p
