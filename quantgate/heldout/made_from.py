"""What an import is made from (``pageset.json``'s ``made_from``): the options that change the pages, with the bytes
of the files they name. ``pages import`` records it; ``init`` computes it again from a rerun's flags and takes an
earlier import as is only when the two are equal (another ``--truth`` file with the same name is another import)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from quantgate.io.fileio import sha256_bytes, sha256_file
from quantgate.io.pageset import OMNIDOC_SUFFIX
from quantgate.schema.pages import ImportInputs

TRUTH_SUFFIXES = (".md", ".txt")  # a truth folder's page files: <page id>.md or .txt


def is_truth_file(f: Path) -> bool:
    """Whether the importer reads ``f`` from a truth folder: a page's truth, or its OmniDocBench record beside it."""
    return f.is_file() and (f.suffix in TRUTH_SUFFIXES or f.name.endswith(OMNIDOC_SUFFIX))


def truth_sha256(folder: Path | None) -> str | None:
    """One sha256 of the truth files a folder offers (each file's name and bytes, sorted by name), or None without a
    folder: OmniDocBench's JSON staged twice gives the same files, so the same digest."""
    if folder is None or not Path(folder).is_dir():
        return None
    lines = "".join(f"{f.name}\t{sha256_file(f)}\n" for f in sorted(Path(folder).iterdir()) if is_truth_file(f))
    return sha256_bytes(lines.encode("utf-8"))


def checks_files(checks: Path | Sequence[Path] | None) -> list[Path]:
    """``--checks`` as a list: one JSONL, several, or none."""
    return [] if checks is None else [Path(checks)] if isinstance(checks, (str, Path)) else [Path(x) for x in checks]


def made_from(opts) -> ImportInputs:
    """``opts`` (an ``importer.ImportOptions``) as the record of what the import read: file bytes, not names."""
    rules = opts.parsebench
    return ImportInputs(
        truth_sha256=truth_sha256(opts.truth_dir),
        checks_sha256=sorted(sha256_file(f) for f in checks_files(opts.checks_file)),
        parsebench_sha256=sha256_bytes(json.dumps(rules, sort_keys=True).encode("utf-8")) if rules else None,
        document_pattern=opts.document_pattern, tags=list(opts.tags), dpi=opts.dpi, megapixels=opts.megapixels)
