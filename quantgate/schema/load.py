"""The one reader of every JSON, JSONL and YAML file quantgate loads, with limits.

A file in a study folder, a key path or a page set may be written by anyone who can write there, so what reads
it must fail on any content with one :class:`DataError` naming the file (and line) — never a traceback, a hang or
unbounded memory. The limits, each far above what quantgate writes or a person types:

- the file is a regular file (a FIFO, socket or device is refused before it is read: opening a FIFO for reading
  blocks until a writer comes) of at most ``MAX_FILE_BYTES``; a JSONL line is at most ``MAX_LINE_BYTES``;
- nesting at most ``MAX_DEPTH`` deep (Python's parsers recurse, and raise ``RecursionError`` near 1,000);
- a number literal at most ``MAX_NUMBER_CHARS`` characters (``int()`` refuses over 4,300 digits with a bare
  ``ValueError``; a 4,000-digit integer is no count or seed quantgate uses);
- at most ``MAX_VALUES`` values (a YAML alias bomb builds shared references cheaply, but walking one does not end);
- text is UTF-8, a leading UTF-8 byte-order mark tolerated (Windows editors write one); UTF-16 or NUL bytes are
  refused with what to do.

Parsing is json's and PyYAML's ``safe_load``; only the limits and the error lines are written here.
"""

from __future__ import annotations

import errno
import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from quantgate.errors import DataError

MAX_FILE_BYTES = 256 << 20
MAX_LINE_BYTES = 16 << 20
MAX_DEPTH = 100
MAX_NUMBER_CHARS = 100
MAX_VALUES = 10_000_000
BOM = b"\xef\xbb\xbf"
_UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISSOCK, "a socket"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISDIR, "a folder")):
        if test(mode):
            return name
    return "not a regular file"


def open_regular(path: str | os.PathLike, what: str = "file") -> int:
    """A read-only descriptor of ``path`` once it is known to be a regular file. Opened non-blocking, so a FIFO
    planted in its place returns at once (and is refused) instead of waiting for a writer forever."""
    path = Path(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise DataError(f"{path}: no such file") from None
    except OSError as e:
        if e.errno == errno.EISDIR:
            raise DataError(f"{path}: is a folder, not a {what}") from None
        raise DataError(f"{path}: cannot read the {what} ({e.strerror or e})") from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise DataError(f"{path}: is {_kind(mode)}, not a {what}; quantgate reads only regular files — replace it "
                        "with the file")
    os.set_blocking(fd, True)
    return fd


def read_regular(path: str | os.PathLike, what: str = "file", limit: int = MAX_FILE_BYTES) -> bytes:
    """The bytes of a regular file of at most ``limit`` bytes (checked before reading and while reading)."""
    fd = open_regular(path, what)
    with os.fdopen(fd, "rb") as fh:
        data = fh.read(limit + 1)
    if len(data) > limit:
        raise DataError(f"{path}: larger than {limit >> 20} MiB; not a {what} quantgate wrote — check the file")
    return data


def decode_text(raw: bytes, where: str) -> str:
    """``raw`` as UTF-8 text, a leading BOM dropped; UTF-16 and NUL bytes refused naming the line."""
    if raw.startswith(_UTF16_BOMS):
        raise DataError(f"{where}: UTF-16 text (it starts with a UTF-16 byte-order mark); re-save it as UTF-8")
    raw = raw.removeprefix(BOM)
    nul = raw.find(b"\x00")
    if nul >= 0:
        raise DataError(f"{where}:{_line(raw, nul)}: a NUL byte (a binary file, or UTF-16 text without "
                        "a byte-order mark); re-save it as UTF-8 text")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise DataError(f"{where}:{_line(raw, e.start)}: not UTF-8 (bad byte 0x{raw[e.start]:02x}); re-save it as UTF-8") from None


def _line(raw: bytes, at: int) -> int:
    return raw.count(b"\n", 0, at) + 1


class _TooLong(ValueError):
    pass


def _number(kind):
    def parse(s: str):
        if len(s) > MAX_NUMBER_CHARS:
            raise _TooLong(s)
        return kind(s)
    return parse


_parse_int, _parse_float = _number(int), _number(float)


def check_shape(obj: Any, where: str) -> Any:
    """``obj`` if it nests at most ``MAX_DEPTH`` deep and holds at most ``MAX_VALUES`` values (walked without
    recursion, so the walk itself cannot overflow)."""
    stack: list[tuple[Any, int]] = [(obj, 1)]
    seen = 0
    while stack:
        x, depth = stack.pop()
        seen += 1
        if seen > MAX_VALUES:
            raise DataError(f"{where}: more than {MAX_VALUES:,} values (a YAML alias bomb?); not a file quantgate reads")
        if isinstance(x, dict | list):
            if depth > MAX_DEPTH:
                raise DataError(f"{where}: nested more than {MAX_DEPTH} levels deep; not a file quantgate reads")
            stack.extend((v, depth + 1) for v in (x.values() if isinstance(x, dict) else x))
    return obj


def parse_json(data: bytes | str, where: str, *, line: int | None = None) -> Any:
    """One JSON document, under the limits. ``where`` names the file in the error; ``line`` the line it is (a JSONL
    record), else the error names the line of the file the problem is on."""
    raw = data.encode("utf-8") if isinstance(data, str) else data
    text = decode_text(raw, where if line is None else f"{where}:{line}")

    def at(lineno: int) -> str:
        return f"{where}:{lineno if line is None else line}"

    try:
        obj = json.loads(text, parse_int=_parse_int, parse_float=_parse_float)
    except json.JSONDecodeError as e:
        raise DataError(f"{at(e.lineno)}: not valid JSON ({e.msg}, column {e.colno})") from None
    except _TooLong as e:
        number = str(e)
        raise DataError(f"{at(text.count(chr(10), 0, max(text.find(number), 0)) + 1)}: a number of {len(number):,} "
                        f"characters (at most {MAX_NUMBER_CHARS}); not a value quantgate writes") from None
    except RecursionError:
        raise DataError(f"{at(1) if line else where}: nested more than {MAX_DEPTH} levels deep; not a file quantgate "
                        "reads") from None
    return check_shape(obj, where if line is None else f"{where}:{line}")


def load_json(path: str | os.PathLike, what: str = "JSON file", limit: int = MAX_FILE_BYTES) -> Any:
    return parse_json(read_regular(path, what, limit), str(path))


def parse_yaml(data: bytes | str, where: str) -> Any:
    """One YAML document through PyYAML's ``safe_load`` (no tags that build objects), under the limits; a syntax
    error is one line naming the line and the problem."""
    import yaml  # type: ignore[import-untyped]

    text = decode_text(data.encode("utf-8") if isinstance(data, str) else data, where)
    try:
        obj = yaml.safe_load(text)
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        at = f"{where}:{mark.line + 1}" if mark is not None else where
        why = " ".join(str(e.problem or e.context or "a syntax error").split())
        raise DataError(f"{at}: not valid YAML ({why})") from None
    except yaml.YAMLError as e:
        raise DataError(f"{where}: not valid YAML ({' '.join(str(e).split())[:200]})") from None
    except RecursionError:
        raise DataError(f"{where}: nested more than {MAX_DEPTH} levels deep; not a file quantgate reads") from None
    except (ValueError, OverflowError) as e:  # a YAML int beyond int()'s digit limit, a timestamp out of range
        if "digits" in str(e):
            raise DataError(f"{where}: a number of more than 4,300 digits; not a value quantgate reads") from None
        raise DataError(f"{where}: a value PyYAML cannot build ({' '.join(str(e).split())[:120]})") from None
    return check_shape(obj, where)


def load_yaml(path: str | os.PathLike, what: str = "YAML file", limit: int = MAX_FILE_BYTES) -> Any:
    return parse_yaml(read_regular(path, what, limit), str(path))


def jsonl_objects(raw: bytes, where: str) -> Iterator[tuple[int, dict]]:
    """(line number, object) of each non-blank line of a JSONL file's bytes. Lines are split on ``\\n`` only
    (``str.splitlines`` also splits on U+2028, which ``json.dumps(ensure_ascii=False)`` leaves inside strings)
    and each is decoded on its own, so a bad byte is reported with its line."""
    if raw.startswith(_UTF16_BOMS):
        raise DataError(f"{where}: UTF-16 text (it starts with a UTF-16 byte-order mark); re-save it as UTF-8")
    raw = raw.removeprefix(BOM)
    for no, bline in enumerate(raw.split(b"\n"), start=1):
        if len(bline) > MAX_LINE_BYTES:
            raise DataError(f"{where}:{no}: a line of {len(bline) >> 20} MiB (at most {MAX_LINE_BYTES >> 20} MiB); "
                            "not a record quantgate writes")
        if not bline.strip():
            continue
        try:
            bline.decode("utf-8")
        except UnicodeDecodeError as e:
            raise DataError(f"{where}:{no}: not UTF-8 (bad byte 0x{bline[e.start]:02x} at column {e.start + 1}); "
                            "re-save the file as UTF-8 or remove that line") from None
        obj = parse_json(bline, where, line=no)
        if not isinstance(obj, dict):
            raise DataError(f"{where}:{no}: expected a JSON object, got {type(obj).__name__}")
        yield no, obj
