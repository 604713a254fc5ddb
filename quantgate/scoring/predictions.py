"""Which page a file of another system's output belongs to. Parsers and benchmarks name their outputs
after the page in their own ways; these rules map the common ones onto quantgate's page ids without
renaming anything (docs/study.md, "Outputs of any system"):

1. ``<page id>.md`` / ``.txt`` — quantgate's own naming, and OmniDocBench's ``<image stem>.md`` (an
   imported image's page id is its file stem);
2. ``<pdf stem>_pg<N>_repeat<K>.md`` — olmOCR-bench's naming: page ``<pdf stem>_pg<N>`` (how
   ``pages import`` names a PDF's page), repeat ``K`` of it.

Files are searched in sub-folders too (olmOCR-bench keeps a category per sub-folder); a page's id is
unique in a page set, so the folder a file sits in does not matter. A name that matches no page of the
set, or two files for one page that are not distinct repeats, is refused naming the file: scoring a
system's folder must never quietly drop or double a page."""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path

from quantgate.errors import InputError

SUFFIXES = (".md", ".txt")
# olmOCR-bench's bench/benchmark.py looks for <pdf stem>_pg<page>_repeat<k>.md
_REPEAT = re.compile(r"^(?P<page>.+_pg\d+)_repeat(?P<k>\d+)$")
NAMING_HINT = ("name each output <page id>.md (as pages.jsonl has it), or <pdf stem>_pg<N>_repeat<K>.md as "
               "olmOCR-bench does")


@dataclass(frozen=True)
class Repeats:
    """Several outputs of one system for one page (olmOCR-bench's repeats), in repeat order. Each is scored
    and the page's value of a metric is their mean — olmOCR-bench averages each check's passes over the
    repeats, and a page's share of checks passed averaged over repeats is the same number."""

    texts: tuple[str, ...]


def page_of(name: str, page_ids: Collection[str]) -> tuple[str, int | None] | None:
    """(page id, repeat number or None) a file stem names, or None when it names no page of ``page_ids``."""
    if name in page_ids:
        return name, None
    m = _REPEAT.match(name)
    if m and m["page"] in page_ids:
        return m["page"], int(m["k"])
    return None


def prediction_files(folder: Path, page_ids: Collection[str]) -> dict[str, list[Path]]:
    """page id → its output file(s), repeats in repeat order, for every .md/.txt file under ``folder``."""
    found: dict[str, dict[int | None, Path]] = {}
    unmatched: list[Path] = []
    files = sorted(f for f in Path(folder).rglob("*") if f.suffix in SUFFIXES and f.is_file())
    for f in files:
        hit = page_of(f.stem, page_ids)
        if hit is None:
            unmatched.append(f)
            continue
        pid, k = hit
        have = found.setdefault(pid, {})
        # the same repeat twice (e.g. in two sub-folders), or a plain <page id>.md beside repeats of the page
        clash = have.get(k) or (have.get(None) if k is not None else next(iter(have.values()), None))
        if clash is not None:
            raise InputError(f"{f}: a second output for page {pid!r} (also {clash}), not a distinct repeat; keep one, "
                             "or name them <page id>_repeat<K>.md (K = 1, 2, …) to score them as repeats")
        have[k] = f
    if unmatched:
        raise InputError(f"{unmatched[0]}: names no page of the page set ({len(unmatched)} of {len(files)} file(s) "
                         f"match none); {NAMING_HINT}")
    return {pid: [have[k] for k in sorted(have, key=lambda k: k or 0)] for pid, have in found.items()}


def read_prediction(f: Path) -> str:
    try:
        return f.read_bytes().decode("utf-8")
    except UnicodeDecodeError as e:
        raise InputError(f"{f}: prediction is not UTF-8 (bad byte at offset {e.start}); re-save it as UTF-8") from None
