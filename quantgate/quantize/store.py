"""Variants shared on one machine: a built variant's files hard-linked into the machine cache under the hash of
its input fingerprint (source weights and files, recipe text, calibration pages, packages: ``VariantInputs``), so
the same checkpoint, recipe and calibration pages quantized again — by a second study into a new folder, a CI run —
are linked back after their hashes are verified instead of rebuilt. Hard links only: no bytes are copied, the study
folder holds real files (never a symbolic link the gate or a server would follow out of it), and a cache on another
filesystem is simply not used. The store is off when the machine cache is (``QUANTGATE_CACHE_DIR=none``)."""

from __future__ import annotations

import errno
import hashlib
import json
import os
import secrets
import shutil
from collections.abc import Callable
from pathlib import Path

from quantgate.errors import InputError, VerificationError
from quantgate.io.cachedir import cache_dir
from quantgate.io.fileio import atomic_write_json, sha256_file
from quantgate.schema.base import read_record_file
from quantgate.schema.variant import VariantInputs, VariantManifest

MANIFEST = "quantgate.json"
_HASHES: dict[tuple, str] = {}  # (device, inode, size, mtime_ns) -> sha256, for this process


def sha256_memo(path: Path) -> str:
    """sha256 of a file, hashed once per process per (device, inode, size, mtime): a study fingerprints the same
    source weights for every variant, and a hard link shares its source's inode, so a linked file is not read
    again. A file rewritten in place gets a new mtime, so it is hashed again."""
    st = os.stat(path)
    key = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
    if key not in _HASHES:
        _HASHES[key] = sha256_file(path)
    return _HASHES[key]


def store_key(inputs: VariantInputs) -> str:
    return hashlib.sha256(json.dumps(inputs.model_dump(), sort_keys=True).encode()).hexdigest()


def link_files(src: Path, dst: Path, names: list[str], follow: bool = False) -> bool:
    """Hard-link ``src/NAME`` to ``dst/NAME`` for every name (``follow``: a symbolic link's target, as in a
    Hugging Face cache folder); False (and nothing left in ``dst`` by this call) when the two folders are on
    different filesystems or the filesystem has no hard links."""
    made: list[Path] = []
    try:
        for n in names:
            os.link(src / n, dst / n, follow_symlinks=follow)
            made.append(dst / n)
    except OSError as e:
        for f in made:
            f.unlink(missing_ok=True)
        if e.errno in (errno.EXDEV, errno.EPERM, errno.EMLINK, errno.ENOTSUP, errno.EOPNOTSUPP):
            return False
        raise
    return True


def copy_verified(src: Path, dst: Path, expected: dict[str, str]) -> None:
    """Copy ``src/NAME`` to ``dst/NAME`` for every name in ``expected`` (name -> sha256), hashing the bytes as they
    are copied: one read of each file, not a copy and then a second read to verify it. The copy's hash is kept in
    the memo (the manifest's file hashes are then free). A file whose bytes differ from ``expected`` (the source
    changed since it was fingerprinted) is removed and refused by name. Written by hand because shutil's copies
    cannot hash what they copy."""
    for n, want in expected.items():
        h = hashlib.sha256()
        out = dst / n
        with open(src / n, "rb") as fi, open(out, "xb") as fo:  # x: never write through a planted file or link
            while block := fi.read(1 << 22):
                h.update(block)
                fo.write(block)
        if h.hexdigest() != want:
            out.unlink()
            raise VerificationError(f"{src / n}: changed while it was copied (sha256 {h.hexdigest()[:12]}…, "
                                    f"fingerprinted as {want[:12]}…); quantize again once the source is complete")
        st = os.stat(out)
        _HASHES[(st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)] = want


def intact(folder: Path, manifest: VariantManifest) -> bool:
    """Every file the manifest lists is a regular file (not a link) with its recorded size and sha256."""
    for n, f in manifest.files.items():
        p = folder / n
        if p.is_symlink() or not p.is_file() or p.stat().st_size != f.bytes or sha256_memo(p) != f.sha256:
            return False
    return bool(manifest.files)


def fetch(inputs: VariantInputs, into: Path, log: Callable[[str], None]) -> VariantManifest | None:
    """The stored variant built from ``inputs``, its files verified by hash and hard-linked into ``into`` (an empty
    build folder); None when the store has none, its files changed, or it lies on another filesystem."""
    root = cache_dir("variants")
    d = None if root is None else root / store_key(inputs)
    if d is None or not (d / MANIFEST).is_file():
        return None
    try:
        manifest = read_record_file(VariantManifest, d / MANIFEST)
    except InputError:
        return None
    if manifest.inputs != inputs or not intact(d, manifest):
        log(f"{d}: a stored variant whose files changed; building instead")
        return None
    if not link_files(d, into, sorted(manifest.files)):
        return None
    log(f"reusing the variant built on this machine from the same inputs ({d}; hashes verified, hard links)")
    return manifest


def serving_path(variant: Path) -> Path:
    """The folder a variant is best served from: the store's folder of the same files (hard links of the very files
    in ``variant``, by device and inode) when the store holds them, else ``variant``. vLLM keys its compile cache by
    the served model's path among the rest (measured on an H200: a second study serving the same variant from its
    own new folder compiled every graph again), so one path per variant on the machine makes that cache hit."""
    root = cache_dir("variants")
    try:
        manifest = read_record_file(VariantManifest, Path(variant) / MANIFEST)
    except (InputError, OSError):
        return variant
    d = None if root is None else root / store_key(manifest.inputs)
    if d is None or not (d / MANIFEST).is_file():
        return variant
    try:
        stored = read_record_file(VariantManifest, d / MANIFEST)
        same = stored.files == manifest.files and all(
            (os.stat(Path(variant) / n).st_dev, os.stat(Path(variant) / n).st_ino) ==
            (os.stat(d / n).st_dev, os.stat(d / n).st_ino) for n in manifest.files)
    except (InputError, OSError):
        return variant
    return d if same else variant


def keep(out: Path, manifest: VariantManifest, log: Callable[[str], None]) -> None:
    """Hard-link a verified build's files into the store (once per fingerprint); nothing when the store is off,
    already holds it, or lies on another filesystem — the build itself stands either way."""
    root = cache_dir("variants")
    if root is None:
        return
    d = root / store_key(manifest.inputs)
    if (d / MANIFEST).is_file():
        return
    tmp = root / f".{d.name}.{secrets.token_hex(4)}"
    try:
        tmp.mkdir(parents=True, mode=0o700)
        if not link_files(Path(out), tmp, sorted(manifest.files)):
            log(f"variant store {root}: on another filesystem than {out}; not kept for reuse")
            return
        atomic_write_json(tmp / MANIFEST, manifest.model_dump())
        os.replace(tmp, d)
    except OSError as e:  # a full or read-only cache costs reuse, not the build
        log(f"variant store {root}: not kept for reuse ({e})")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
