"""Small file primitives every stage shares: atomic writes, append-only JSONL, safe paths, hashes.

Rules they enforce: nothing already written is corrupted (write to a temporary file, then rename;
append whole lines and fsync), and no path read from a manifest leaves its folder.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from quantgate.errors import DataError, DiskFullError, InputError, UnsafeInputError
from quantgate.schema.load import jsonl_objects, open_regular, read_regular

# errnos that mean "no room": the device is full, a quota is reached, or a file-size limit (RLIMIT_FSIZE) is hit
_NO_ROOM = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG}
_NO_ROOM_TEXT = ("No space left on device", "Disk quota exceeded", "File too large")


def disk_full(e: BaseException) -> bool:
    """Whether ``e`` says a write found no room — an OSError's errno, or a library's error that only carries the
    OS's message in its text (safetensors' SafetensorError, for one)."""
    if isinstance(e, OSError) and e.errno in _NO_ROOM:
        return True
    return any(t in str(e) for t in _NO_ROOM_TEXT)


def disk_full_error(folder: str | os.PathLike, e: BaseException) -> DiskFullError:
    """The one line a full disk is reported with: the folder, why, and that a rerun resumes."""
    why = e.strerror if isinstance(e, OSError) and e.strerror else " ".join(str(e).split())[:200]
    return DiskFullError(f"{folder}: no room to write ({why}); nothing already written was changed — free space "
                         "on that device and rerun the same command to resume")


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Write ``path`` whole or not at all; a full disk is one DiskFullError naming its folder."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException as e:
        Path(tmp).unlink(missing_ok=True)
        if disk_full(e):
            raise disk_full_error(path.parent, e) from None
        raise


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path: str | os.PathLike, obj: Any) -> None:
    atomic_write_text(path, json.dumps(obj, indent=2, ensure_ascii=False, sort_keys=False) + "\n")


def _regular_or_refuse(fd: int, path: Path) -> None:
    """Close ``fd`` and refuse unless it is a regular file: quantgate writes, appends to and locks plain files only."""
    import stat

    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise DataError(f"{path}: is not a regular file (a FIFO, socket or device in its place); remove it and rerun")
    os.set_blocking(fd, True)


def _open_nofollow(path: Path, flags: int, what: str) -> int:
    """``os.open`` that refuses a symbolic link as the last path component: a link planted in a
    run folder must not steer quantgate's appends (or truncation) to a file elsewhere."""
    try:
        return os.open(path, flags | os.O_NOFOLLOW, 0o644)
    except OSError as e:
        if e.errno == errno.ELOOP or (e.errno == errno.EMLINK and os.path.islink(path)):
            raise UnsafeInputError(f"{path}: is a symbolic link (to {os.readlink(path)!r}); quantgate {what} only "
                                   "files inside its folder — remove the link and rerun") from None
        if e.errno == errno.ENXIO:  # a write-only open of a FIFO no one reads, made non-blocking
            raise DataError(f"{path}: is a FIFO (named pipe), not a regular file; remove it and rerun") from None
        raise


def append_jsonl(path: str | os.PathLike, record: dict, *, fsync: bool = False) -> None:
    """Append one record as one line with a single write, so a killed process loses at most the
    record in flight (a torn last line is detected on read). ``fsync`` also survives a power loss;
    hot paths (one record per request) call :func:`fsync_file` once at the end instead.
    A symbolic link in ``path``'s place is refused, not followed."""
    line = (json.dumps(record, ensure_ascii=False, allow_nan=False) + "\n").encode("utf-8")
    fd = _open_nofollow(Path(path), os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK, "appends to")
    _regular_or_refuse(fd, Path(path))
    try:
        end = os.lseek(fd, 0, os.SEEK_END)
        try:
            # a full disk can take part of the line and return a short count instead of failing: the
            # part is cut again, so the file never holds half a record followed by whole ones
            if os.write(fd, line) != len(line):
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
        except OSError:
            os.ftruncate(fd, end)
            raise
        if fsync:
            os.fsync(fd)
    finally:
        os.close(fd)


def fsync_file(path: str | os.PathLike) -> None:
    fd = _open_nofollow(Path(path), os.O_RDONLY | os.O_NONBLOCK, "syncs")
    _regular_or_refuse(fd, Path(path))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def read_jsonl(path: str | os.PathLike, *, repair_torn_tail: bool = False,
               final_newline_optional: bool = False) -> Iterator[tuple[int, dict]]:
    """Yield (line number, object). A torn last line (no newline: a crash mid-append) is dropped
    when ``repair_torn_tail`` (and cut off the file, so later appends start clean); anywhere else a
    bad line is an error naming the file and line. ``final_newline_optional`` is for files people
    write by hand (olmOCR checks), where a missing last newline is not a crash.

    Lines are split on ``\\n`` only (not ``str.splitlines``, which also splits on U+2028 and other
    separators that ``json.dumps(ensure_ascii=False)`` leaves inside strings), and each line is
    decoded on its own so a non-UTF-8 byte is reported with its line."""
    path = Path(path)
    if repair_torn_tail:  # a file quantgate appends to: never read (or truncate) through a link
        try:
            fd = _open_nofollow(path, os.O_RDONLY | os.O_NONBLOCK, "reads and repairs")
        except FileNotFoundError:
            raise InputError(f"{path}: no such file") from None
        _regular_or_refuse(fd, path)
        with os.fdopen(fd, "rb") as fh:
            raw = fh.read()
    else:
        raw = read_regular(path, "JSONL file")
    if raw and not raw.endswith(b"\n") and not final_newline_optional:
        cut = raw.rfind(b"\n") + 1
        if not repair_torn_tail:
            raise InputError(f"{path}: last line is incomplete (a write was interrupted); "
                             "rerun the command that writes it to repair, or delete that line")
        fd = _open_nofollow(path, os.O_WRONLY | os.O_NONBLOCK, "repairs")
        try:
            os.ftruncate(fd, cut)
        finally:
            os.close(fd)
        raw = raw[:cut]
    yield from jsonl_objects(raw, str(path))


def sha256_file(path: str | os.PathLike, chunk: int = 1 << 20) -> str:
    h = hashlib.sha256()
    with os.fdopen(open_regular(path), "rb") as fh:  # a FIFO in a hashed file's place is refused, not waited on
        while block := fh.read(chunk):
            h.update(block)
    return h.hexdigest()


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def safe_join(root: str | os.PathLike, rel: str, *, what: str = "path") -> Path:
    """Resolve ``rel`` under ``root``; refuse absolute paths, ``..`` escapes and symlinks that
    point out of ``root``. ``what`` names the manifest field in the error."""
    root_r = Path(root).resolve()
    if not isinstance(rel, str) or "\x00" in rel:
        raise UnsafeInputError(f"{what} {rel!r} is not a usable path")
    if not rel or os.path.isabs(rel) or rel.startswith(("/", "\\")) or ":" in Path(rel).parts[0]:
        raise UnsafeInputError(f"{what} {rel!r} must be a relative path inside {root}")
    full = (root_r / rel).resolve()
    if full != root_r and root_r not in full.parents:
        raise UnsafeInputError(f"{what} {rel!r} points outside its folder {root}; refusing to read it")
    return full


def recorded_path(path: str | os.PathLike, root: str | os.PathLike | None) -> str:
    """How a manifest records ``path``: relative to ``root`` (posix) when it lies inside it, else as
    given. A study passes its folder, so the paths its files record stay true when the folder is moved
    or copied; paths outside it (the source checkpoint) are kept as given and only ever shown."""
    if root is not None:
        try:
            return Path(path).resolve().relative_to(Path(root).resolve()).as_posix()
        except ValueError:
            pass
    return str(path)


@contextmanager
def exclusive_lock(path: str | os.PathLike, busy: str) -> Iterator[None]:
    """Hold an exclusive, non-blocking flock on ``path`` (created, with the holder's pid) for the block;
    another holder: InputError(``busy``). The lock ends with the process, so a killed run leaves none."""
    import fcntl

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    # never through a link (the study would overwrite its target), never blocking on a FIFO in its place
    fd = _open_nofollow(path, os.O_RDWR | os.O_CREAT | os.O_NONBLOCK | os.O_CLOEXEC, "locks")
    _regular_or_refuse(fd, path)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise InputError(busy) from None
    try:
        os.ftruncate(fd, 0)
        os.write(fd, str(os.getpid()).encode())
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)
