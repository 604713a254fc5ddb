"""A variant's outputs as page id → text, from a run folder (its ``requests.jsonl``) or from a folder of
``<page_id>.md`` (or ``.txt``) files any parser wrote: what ``compare --pages`` and ``quantgate.compare_outputs``
judge. Outputs come from outside quantgate as often as from it, so each is checked before it is used: text
(UTF-8, no NUL byte — a NUL is what binary files hold and no parser's markdown does), a regular file inside its
folder, and within the size caps below; anything else is one :class:`DataError` naming the file (and line)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from quantgate.errors import DataError, InputError, UsageError
from quantgate.io.fileio import read_jsonl
from quantgate.schema.base import parse_record
from quantgate.schema.run import RequestRecord

# One page's output: a dense page of markdown is 2-20 KB and max_tokens (1,024 by default) keeps a model's
# under ~8 KB; 1 MiB is fifty dense pages, so a larger "output" is a wrong file, not a page.
MAX_OUTPUT_BYTES = 1 << 20
# All of one folder's outputs (or its requests.jsonl): 100,000 pages of 2.5 KB; past it the folder is not outputs.
MAX_TOTAL_BYTES = 256 << 20
REQUESTS_FILE = "requests.jsonl"
SUFFIXES = (".md", ".txt")


def load_outputs(path: str | Path, *, concurrency: int | None = None) -> dict[str, str]:
    """page id → output text. A run folder gives, at one concurrency level (``concurrency``, default the lowest
    recorded, as ``quantgate score`` reads it), the latest successful record of each page — a request that failed
    is no output of the model, so its page is left out, and a resumed run's re-sent page counts once. A folder of
    files gives each ``<page_id>.md``/``.txt``. A path that does not exist or is not a folder: UsageError."""
    path = Path(path)
    if not path.exists():
        raise UsageError(f"{path}: no such folder; give a run folder (with {REQUESTS_FILE}) or a folder of "
                         "<page_id>.md files")
    if not path.is_dir():
        raise UsageError(f"{path}: not a folder; give a run folder (with {REQUESTS_FILE}) or a folder of "
                         "<page_id>.md files")
    if (path / REQUESTS_FILE).exists():
        return _run_outputs(path, concurrency)
    if concurrency is not None:
        raise UsageError(f"{path}: a folder of files has no concurrency levels (no {REQUESTS_FILE}); leave the "
                         "level out")
    return _file_outputs(path)


def _check_text(text: str, where: str) -> str:
    if "\x00" in text:
        raise DataError(f"{where}: contains a NUL byte, so it is binary, not a parser's text; give the markdown "
                        "output instead")
    if len(text.encode("utf-8")) > MAX_OUTPUT_BYTES:
        raise DataError(f"{where}: output is over {MAX_OUTPUT_BYTES >> 20} MiB, the cap on one page's output "
                        "(a dense page is 2-20 KB); is this the right file?")
    return text


def _read_capped(f: Path, root: Path, cap: int) -> bytes:
    """The bytes of ``f`` — a regular file that stays inside ``root`` — or DataError when it is over ``cap``."""
    real = f.resolve()
    if root.resolve() not in real.parents:
        raise DataError(f"{f}: is a link to {real}, outside {root}; copy the file into the folder instead")
    try:
        fd = os.open(real, os.O_RDONLY | os.O_NONBLOCK)  # a FIFO must not block the read: refused below
    except OSError as e:
        raise DataError(f"{f}: cannot read ({e.strerror or e})") from None
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fh.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise DataError(f"{f}: not a regular file (a FIFO, socket or device); remove it or give the output file")
        if st.st_size > cap:
            raise DataError(f"{f}: {st.st_size:,} bytes, over the {cap:,}-byte cap on "
                            f"{'one page' if cap == MAX_OUTPUT_BYTES else 'a folder'}'s outputs; is this the right file?")
        data = fh.read(cap + 1)
    if len(data) > cap:  # grew while it was read
        raise DataError(f"{f}: over the {cap:,}-byte cap (it grew while being read)")
    return data


def _file_outputs(root: Path) -> dict[str, str]:
    out: dict[str, str] = {}
    source: dict[str, Path] = {}
    total = 0
    for f in sorted(root.iterdir()):
        if f.suffix not in SUFFIXES or not f.stem or f.name.startswith(".") or f.is_dir():
            continue
        if f.stem in source:
            raise DataError(f"{f}: a second output for page {f.stem!r} (also {source[f.stem].name}); keep one")
        data = _read_capped(f, root, MAX_OUTPUT_BYTES)
        total += len(data)
        if total > MAX_TOTAL_BYTES:
            raise DataError(f"{root}: outputs over {MAX_TOTAL_BYTES >> 20} MiB in all (the cap on a folder's "
                            f"outputs, reached at {f.name}); is this a folder of page outputs?")
        nul = data.find(b"\x00")
        if nul >= 0:
            raise DataError(f"{f}: contains a NUL byte at offset {nul}, so it is binary, not a parser's text; give "
                            "the markdown output instead")
        try:
            text = data.removeprefix(b"\xef\xbb\xbf").decode("utf-8")  # a byte-order mark is an editor's, not text
        except UnicodeDecodeError as e:
            raise DataError(f"{f}: not UTF-8 (bad byte 0x{data[e.start]:02x} at offset {e.start}); re-save it as "
                            "UTF-8") from None
        out[f.stem], source[f.stem] = _check_text(text, str(f)), f
    if not out:
        raise DataError(f"{root}: no outputs (neither {REQUESTS_FILE} nor any <page_id>{'/'.join(SUFFIXES)} file)")
    return out


def _run_outputs(root: Path, concurrency: int | None) -> dict[str, str]:
    reqs = root / REQUESTS_FILE
    _read_capped(reqs, root, MAX_TOTAL_BYTES)  # the link, kind and size checks before the lines are parsed
    by_level: dict[int, dict[str, str]] = {}
    try:
        for no, obj in read_jsonl(reqs):
            r = parse_record(RequestRecord, obj, where=f"{reqs}:{no}")
            if r.wave is not None:  # a speed wave's repeat, not the page run
                continue
            level = by_level.setdefault(r.concurrency, {})
            if r.error is None:  # later lines are later requests: a re-sent page's last answer wins
                level.pop(r.page_id, None)
                level[r.page_id] = _check_text(r.output or "", f"{reqs}:{no} (page {r.page_id})")
    except DataError:
        raise
    except InputError as e:  # a malformed file that exists is bad data, not a bad command line
        raise DataError(str(e)) from None
    if not by_level:
        raise DataError(f"{reqs}: no requests recorded; serve the variant first")
    level = concurrency if concurrency is not None else min(by_level)
    if level not in by_level:
        raise UsageError(f"{root}: no requests at concurrency {level}; recorded levels: {sorted(by_level)}")
    if not by_level[level]:
        raise DataError(f"{reqs}: every request at concurrency {level} failed, so there is no output to judge; "
                        "resume the run to re-send them")
    return by_level[level]
