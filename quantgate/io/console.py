"""What a long command (``study``, ``demo``) shows on the console: one line per stage with its
progress — a single tqdm bar when stderr is a terminal, plain periodic lines when it is not — while
everything third-party code writes (transformers', llmcompressor's and lm-eval's tqdm bars, loguru,
Python warnings, "No accelerator available!") goes to the study's log file.

Capture is done on file descriptors 1 and 2, not on ``sys.stdout``/``sys.stderr``: libraries bind
their streams at import time (loguru's handler holds the ``sys.stdout`` it was given, logging's
handlers the ``sys.stderr`` they found, tqdm the one at construction), and child processes inherit
the descriptors, so only a descriptor-level redirect catches all of them. Servers keep their own
``server.log``."""

from __future__ import annotations

import io
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TextIO


def _fmt_s(s: float) -> str:
    return f"{s:.1f} s" if s < 120 else f"{s / 60:.1f} min"


class Stage:
    """One stage's progress; made by :meth:`Console.stage`."""

    def __init__(self, console: Console, label: str, total: int | None, unit: str | None):
        self.console, self.label, self.total, self.unit = console, label, total, unit
        self.n, self.note = 0, ""
        self.reused = False  # the stage found its work done (a resumed study)
        self.t0 = time.monotonic()
        self._last_line = self.t0
        self._bar = None
        self._stop = threading.Event()
        self._ticker: threading.Thread | None = None
        if console.tty:
            from tqdm import tqdm

            fmt = None  # tqdm's bar when the total is known
            if total is None:  # a count or only the time
                fmt = "{desc}: {n_fmt}{unit} [{elapsed}]{postfix}" if unit else "{desc}: {elapsed}{postfix}"
            self._bar = tqdm(total=total, desc=label, unit=f" {unit}s" if unit else "", file=console.term, leave=True,
                             ncols=console.columns(), mininterval=0.5, bar_format=fmt)
        elif console.interval_s:
            self._ticker = threading.Thread(target=self._tick, daemon=True)
            self._ticker.start()

    @property
    def elapsed_s(self) -> float:
        return time.monotonic() - self.t0

    def advance(self, n: int = 1) -> None:
        with self.console.lock:
            self.n += n
            if self._bar is not None:
                self._bar.update(n)

    def set_note(self, note: str) -> None:
        """A short status after the counts (``server up in 4.1 s``)."""
        with self.console.lock:
            self.note = note
            if self._bar is not None:
                self._bar.set_postfix_str(note, refresh=True)

    def _counts(self) -> str:
        if self.unit is None:
            return ""
        if self.total is None:
            return f"{self.n} {self.unit}s" if self.n else ""
        return f"{self.n}/{self.total} {self.unit}s"

    def _tick(self) -> None:
        # Plain output: a line every interval while the stage runs, so a long stage is not silent.
        while not self._stop.wait(self.console.interval_s):
            parts = [p for p in (self._counts(), self.note) if p]
            self.console.line(f"{self.label}: {', '.join(parts + [_fmt_s(self.elapsed_s)])} …")

    def close(self, ok: bool) -> None:
        self._stop.set()
        if self._ticker is not None:
            self._ticker.join()
        parts = [p for p in (self._counts(), self.note) if p]
        final = f"{self.label}: {', '.join(parts + [_fmt_s(self.elapsed_s)])}" + ("" if ok else " — failed")
        if self._bar is not None:
            with self.console.lock:
                if not ok:
                    self._bar.set_postfix_str(f"{self.note + ', ' if self.note else ''}failed", refresh=True)
                self._bar.close()
            self.console.to_log(final)
        else:
            self.console.line(final)


class Console:
    """Stage lines for the user (``term``) and, with every line, the log (``log``, where third-party
    output goes too). ``tty`` chooses a bar or plain lines; ``verbose`` shows the details
    (:meth:`detail`) on the terminal as well."""

    def __init__(self, term: TextIO | None = None, log: TextIO | None = None, *, tty: bool | None = None,
                 verbose: bool = False, interval_s: float = 15.0):
        self.term = term if term is not None else sys.stderr
        self.log = log
        self.tty = self.term.isatty() if tty is None else tty
        self.verbose, self.interval_s = verbose, interval_s
        self.lock = threading.RLock()

    def columns(self) -> int:
        """The terminal's width (a terminal that reports none, such as `script`'s, gets 100)."""
        try:
            return os.get_terminal_size(self.term.fileno()).columns or 100
        except (OSError, ValueError, AttributeError, io.UnsupportedOperation):
            return 100

    def to_log(self, text: str) -> None:
        if self.log is not None and self.log is not self.term:
            with self.lock:
                self.log.write(f"[quantgate {time.strftime('%H:%M:%S')}] {text}\n")
                self.log.flush()

    def line(self, text: str) -> None:
        """A line the user sees (and the log keeps)."""
        with self.lock:
            if self.tty:
                from tqdm import tqdm

                tqdm.write(text, file=self.term)  # above a running bar, which is redrawn below it
            else:
                self.term.write(text + "\n")
                self.term.flush()
        self.to_log(text)

    def detail(self, text: str) -> None:
        """A message from inside a stage: the log only, unless verbose (a warning is always shown)."""
        if self.verbose or text.lower().startswith("warning"):
            self.line(text)
        else:
            self.to_log(text)

    @contextmanager
    def stage(self, label: str, total: int | None = None, unit: str | None = "page") -> Iterator[Stage]:
        """A stage's line: ``total`` units to do, or a count (``total`` None), or only the time (``unit`` None)."""
        s = Stage(self, label, total, unit)
        ok = False
        try:
            yield s
            ok = True
        finally:
            s.close(ok)


@contextmanager
def captured_output(log_path: Path, verbose: bool = False) -> Iterator[Console]:
    """A :class:`Console` for a long command. Unless ``verbose``, file descriptors 1 and 2 point at
    ``log_path`` (appended) for the duration, and the console writes to the terminal's own copy of
    stderr; on the way out they are restored and, after a failure, the log's path is named."""
    log_path = Path(log_path)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    log = open(log_path, "a", encoding="utf-8", buffering=1)
    if verbose:
        try:
            yield Console(sys.stderr, log, verbose=True)
        finally:
            log.close()
        return
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    term = os.fdopen(os.dup(saved[1]), "w", encoding=sys.stderr.encoding or "utf-8", errors="replace", buffering=1)
    os.dup2(log.fileno(), 1)
    os.dup2(log.fileno(), 2)
    failed = False
    try:
        yield Console(term, log)
    except BaseException:
        failed = True
        raise
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in saved:
            os.close(fd)
        if failed:
            term.write(f"(the full log, third-party output included, is in {log_path})\n")
        term.close()
        log.close()


class _Lines(io.TextIOBase):
    """A text stream that hands each complete line to a function."""

    def __init__(self, fn: Callable[[str], None]):
        self.fn, self.buf = fn, ""

    def writable(self) -> bool:
        return True

    def write(self, s: str) -> int:
        self.buf += s
        while "\n" in self.buf:
            line, self.buf = self.buf.split("\n", 1)
            self.fn(line)
        return len(s)


def console_for(log: Callable[[str], None]) -> Console:
    """A plain, verbose console whose every line (stages and details) goes to ``log`` — for library
    callers (``tune``, tests) that collect a study's messages themselves."""
    return Console(_Lines(log), tty=False, verbose=True, interval_s=3600)
