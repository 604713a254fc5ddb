"""A study's page set that lies outside its folder is copied in (``<out>/pages``), so the gate binds
its images and truths as it binds a synthetic set's — the folder alone vouches for what was judged, wherever it goes.

On every start the source is hashed against its own pages.jsonl (an image or truth edited there is refused, naming
the file, as for a set used in place). The copy is then kept when its pages.jsonl is the source's, each file hashed
against it (no size or mtime shortcut) and any that differs copied again from the verified source, saying so; when
the source's pages.jsonl changed, the whole copy is made again, saying what changed (runs of the old pages are then
not reused: a run is tied to its pages' sha256). A new copy is built beside the old one and swapped in by rename;
``pages-copy.json`` records where it came from. Plain file copies, by hand: no library copies a page set's files."""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Callable
from pathlib import Path

from quantgate.errors import InputError
from quantgate.io.fileio import atomic_write_bytes, atomic_write_json, safe_join, sha256_file
from quantgate.io.pageset import MANIFEST_FILE, OMNIDOC_SUFFIX, PAGES_FILE, PageSet, load_pageset, verify_page_files
from quantgate.schema.base import read_record_file
from quantgate.schema.pages import PageSetCopy

COPY_DIR = "pages"
COPY_RECORD = "pages-copy.json"
_BUILDING, _OLD = ".pages.copying-", ".pages.old-"


def _files(ps: PageSet) -> dict[str, str | None]:
    """The set's files beside pages.jsonl, relative to its folder: each page's image and truth (with their sha256
    from pages.jsonl), its OmniDocBench record and pageset.json when present (None: compared by bytes)."""
    files: dict[str, str | None] = {}
    if (ps.root / MANIFEST_FILE).is_file():
        files[MANIFEST_FILE] = None
    for p in ps.pages:
        files[p.image] = p.sha256
        if p.truth is not None:
            files[p.truth] = p.truth_sha256
            omni = p.truth.rsplit(".", 1)[0] + OMNIDOC_SUFFIX
            if p.truth_record_sha256 is not None or \
                    safe_join(ps.root, omni, what=f"page {p.id}'s OmniDocBench truth").is_file():
                files[omni] = p.truth_record_sha256  # None (unbound): compared by bytes, then refused when scored
    return files


def ensure_page_copy(source: Path, out: Path, log: Callable[[str], None]) -> bool:
    """Make ``out/pages`` a verified copy of the page set at ``source``; True when the copy was reused untouched."""
    source, out = Path(source), Path(out)
    src = load_pageset(source)
    verify_page_files(src)  # the source checks out against its own pages.jsonl before anything is copied from it
    dest, record = out / COPY_DIR, out / COPY_RECORD
    for left in [*out.glob(_BUILDING + "*"), *out.glob(_OLD + "*")]:  # a copy cut short (we hold the study's lock)
        shutil.rmtree(left, ignore_errors=True)
    if dest.exists() and not record.is_file():
        raise InputError(f"{dest}: holds a page set this study did not copy in (no {record}); the study's pages.path "
                         f"{source} lies outside the folder and is copied to {dest}. Move {dest} away, or point "
                         "pages.path at it")
    files, want = _files(src), src.sha256
    old = read_record_file(PageSetCopy, record) if record.is_file() else None
    if old is not None and old.pages_sha256 == want and (dest / PAGES_FILE).is_file() \
            and sha256_file(dest / PAGES_FILE) == want:
        repaired = _repair(src, dest, files, log)
        if old.source != str(source):
            atomic_write_json(record, PageSetCopy(source=str(source), pages_sha256=want).model_dump())
        return not repaired
    if dest.exists():
        log(f"pages: {source} changed since it was copied into {dest} ({_changes(dest, src)}): copied again; runs "
            "of the old pages are not reused")
    _copy_all(src, dest, files, record, log)
    from quantgate.study.verdicts import JUDGED_PAGES

    (out / JUDGED_PAGES).unlink(missing_ok=True)  # an earlier quantgate's copy of pages.jsonl alone: superseded
    return False


def _repair(src: PageSet, dest: Path, files: dict[str, str | None], log: Callable[[str], None]) -> bool:
    """Every file of the copy hashed against pages.jsonl (or compared with the source's bytes); each one that
    differs copied again from the (verified) source. True when any was."""
    repaired = False
    for rel, sha in files.items():
        have = safe_join(dest, rel, what=f"{dest / PAGES_FILE}: {rel}")
        origin = safe_join(src.root, rel, what=f"{src.root / PAGES_FILE}: {rel}")
        if not have.is_file():
            why = "is missing"
        elif (sha256_file(have) != sha) if sha else (have.read_bytes() != origin.read_bytes()):
            why = "changed since it was copied in (sha256 differs)"
        else:
            continue
        log(f"pages: {have} {why}: copied again from {origin}")
        have.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(have, origin.read_bytes())
        repaired = True
    return repaired


def _changes(dest: Path, src: PageSet) -> str:
    try:
        before = {p.id: (p.sha256, p.truth_sha256, p.truth_record_sha256) for p in load_pageset(dest).pages}
    except InputError:
        return "the copy is unreadable"
    after = {p.id: (p.sha256, p.truth_sha256, p.truth_record_sha256) for p in src.pages}
    added, removed = len(after.keys() - before), len(before.keys() - after)
    changed = sum(1 for k in after.keys() & before if after[k] != before[k])
    return f"pages.jsonl differs: {added} page(s) added, {removed} removed, {changed} with another image or truth"


def _copy_all(src: PageSet, dest: Path, files: dict[str, str | None], record: Path, log: Callable[[str], None]) -> None:
    """The whole set built beside ``dest``, verified, then swapped in by rename (a crash leaves the old copy or none,
    never a mix); the record is written first, so a copy in place always has one."""
    from quantgate.io.fileio import disk_full, disk_full_error

    out = dest.parent
    tmp = out / f"{_BUILDING}{uuid.uuid4().hex[:8]}"
    try:
        for rel in [PAGES_FILE, *files]:
            target = tmp / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(safe_join(src.root, rel, what=f"{src.root / PAGES_FILE}: {rel}"), target)
    except OSError as e:
        shutil.rmtree(tmp, ignore_errors=True)  # the old copy (or none) stays in place
        if disk_full(e):
            raise disk_full_error(out, e) from None
        raise
    verify_page_files(load_pageset(tmp))  # the source did not change while it was copied
    atomic_write_json(record, PageSetCopy(source=str(src.root), pages_sha256=sha256_file(tmp / PAGES_FILE)).model_dump())
    old = out / f"{_OLD}{uuid.uuid4().hex[:8]}"
    if dest.exists():
        os.rename(dest, old)
    os.rename(tmp, dest)
    shutil.rmtree(old, ignore_errors=True)
    log(f"pages: {len(src.pages)} pages of {src.root} copied into {dest}")
