"""Argument types and output helpers the verbs share. They live beside the commands (not in
``quantgate.cli``) so that no command imports the module that imports the commands.

Every numeric flag goes through one of the number types below, so a bad value is refused while the
command line is parsed — one line naming the flag, exit 64 (usage), before anything is read, started or
written. ``tests/integration/test_validation.py`` finds every flag whose type is not a path or text and fuzzes it
against its own statement of the rule; a bare ``type=int``/``float`` fails there."""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Callable
from pathlib import Path

# Each request in flight holds its own TCP connection: more than this cannot exist on one host.
MAX_CONCURRENCY = 65_535
# A per-request wait longer than a day is a hang, not a slow page; refusing it keeps every wait bounded.
MAX_TIMEOUT_S = 86_400.0
# Same ceiling as `pages import --max-pixels` (quantgate.heldout.importer.MAX_PIXELS).
MAX_PAGE_PIXELS = 64_000_000
MIN_PAGE_SIDE = 64  # the synthesizer's smallest legible page side


# one help text for the flag every verb that loads a checkpoint has
TRUST_REMOTE_CODE_HELP = ("load a checkpoint whose config names its own Python code (auto_map) and run that code; "
                          "refused without it — give it only for a checkpoint you trust")


def print_json(obj) -> None:
    print(json.dumps(obj, indent=2, ensure_ascii=False, default=str))


def existing_path(s: str) -> Path:
    p = Path(s)
    if not p.exists():
        raise argparse.ArgumentTypeError(f"{s}: no such file or folder")
    return p


def _named(fn: Callable[[str], object], name: str, rule: str) -> Callable[[str], object]:
    fn.rule = rule  # a valid value, in words, for error messages
    fn.__name__ = fn.__qualname__ = name
    return fn


def _shown(s: str) -> str:
    """The value as given, quoted, on one line and at most ~40 characters."""
    return repr(s) if len(s) <= 40 else repr(s[:37]) + "…"


def _int(s: str) -> int:
    try:
        return int(s)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{_shown(s)} is not an integer") from None


def _float(s: str) -> float:
    try:
        v = float(s)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{_shown(s)} is not a number") from None
    if not math.isfinite(v):  # nan, inf and values too large for a float (1e999)
        raise argparse.ArgumentTypeError(f"{_shown(s)} is not a finite number")
    return v


def int_range(lo: int, hi: int | None = None, why: str = "") -> Callable[[str], int]:
    """An integer in [lo, hi]."""
    rule = f"an integer >= {lo}" if hi is None else f"an integer from {lo} to {hi}"

    def parse(s: str) -> int:
        v = _int(s)
        if v < lo or (hi is not None and v > hi):
            raise argparse.ArgumentTypeError(f"{_shown(s)}: must be {rule}{why}")
        return v

    return _named(parse, f"int_range({lo}, {hi})", rule)


def float_range(lo: float, hi: float | None = None, *, lo_open: bool, hi_open: bool = False,
                why: str = "") -> Callable[[str], float]:
    """A finite number between lo and hi, each end open or closed."""
    rule = "a finite number " + (f"> {lo:g}" if lo_open else f">= {lo:g}")
    if hi is not None:
        rule += " and " + (f"< {hi:g}" if hi_open else f"<= {hi:g}")

    def parse(s: str) -> float:
        v = _float(s)
        if (v <= lo if lo_open else v < lo) or (hi is not None and (v >= hi if hi_open else v > hi)):
            raise argparse.ArgumentTypeError(f"{_shown(s)}: must be {rule}{why}")
        return v + 0.0  # -0.0 → 0.0

    return _named(parse, f"float_range({lo}, {hi})", rule)


positive_int = int_range(1)
nonnegative_int = int_range(0)
positive_float = float_range(0, lo_open=True)
unit_interval = float_range(0, 1, lo_open=False)  # [0, 1]
concurrency_level = int_range(1, MAX_CONCURRENCY, " (each request in flight holds a connection)")
timeout_seconds = float_range(0, MAX_TIMEOUT_S, lo_open=True, why=" seconds (a longer wait is a hang)")


def budget_flags(p: argparse.ArgumentParser, *, bits: Callable[[str], float], speedup: Callable[[str], float]) -> None:
    """The budget flags ``recommend`` and ``tune`` share: exactly one of a weights size, bits per weight or a
    decode speed-up, and the measured cost table a speed-up is then predicted from. ``bits`` and ``speedup`` are
    each verb's bounds: ``recommend`` refuses at parse time what ``tune`` leaves to the recommendation it runs
    (16 bits or more, a speed-up of 1 or less: the same exit 64, once the sensitivity file is read)."""
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--budget", metavar="SIZE", help="weights size: bytes, or with a decimal unit (2.58MB, 3GB)")
    g.add_argument("--effective-bits", type=bits, metavar="B", help="average bits per quantizable weight")
    g.add_argument("--speedup", type=speedup, metavar="S",
                   help="decode speed-up over BF16 (modelled from weight bytes, or by --speed-table)")
    p.add_argument("--speed-table", type=existing_path, metavar="FILE",
                   help="a measured cost table (quantgate speed-profile): --speedup and the speed-ups shown are "
                   "predicted from it instead of modelled from weight bytes")
    p.add_argument("--speed-concurrency", type=int_range(1, 100000), metavar="C",
                   help="the table's concurrency the speed-up is taken at (default its lowest)")


def _concurrency_list(s: str) -> list[int]:
    try:
        levels = [int(x) for x in s.split(",") if x.strip()]
    except ValueError:
        levels = []
    if not levels or any(not 1 <= c <= MAX_CONCURRENCY for c in levels):
        raise argparse.ArgumentTypeError(f"{_shown(s)}: expected comma-separated levels, each {concurrency_level.rule} "
                                         "(e.g. 1,8,32)")
    return levels


concurrency_list = _named(_concurrency_list, "concurrency_list", f"comma-separated {concurrency_level.rule}")


def _page_size(s: str) -> tuple[int, int]:
    parts = s.lower().split("x")
    try:
        w, h = (int(x) for x in parts)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{_shown(s)}: expected WIDTHxHEIGHT in pixels, e.g. 1700x2400") from None
    if min(w, h) < MIN_PAGE_SIDE or w * h > MAX_PAGE_PIXELS:
        raise argparse.ArgumentTypeError(f"{_shown(s)}: each side must be at least {MIN_PAGE_SIDE} px and the page at most "
                                         f"{MAX_PAGE_PIXELS:,} pixels")
    return w, h


page_size = _named(_page_size, "page_size", f"WIDTHxHEIGHT, sides >= {MIN_PAGE_SIDE}, at most "
                     f"{MAX_PAGE_PIXELS:,} pixels")
