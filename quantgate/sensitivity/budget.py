"""Budget arguments: sizes with decimal units (``4.1MB``, ``3GB``, ``1500000``)."""

from __future__ import annotations

import re
from decimal import Decimal

from quantgate.errors import InputError

UNITS = {"": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?|\.\d+)\s*([a-zA-Z]*)\s*$")


def parse_size(text: str, what: str = "--budget") -> int:
    """Bytes from ``4.1MB`` / ``3GB`` / ``750kB`` / ``123456`` (decimal units: 1 MB = 10^6 bytes)."""
    m = _SIZE.match(str(text))
    unit = m.group(2).lower() if m else ""
    if not m or unit not in UNITS:
        raise InputError(f"{what} {text!r}: give bytes as an integer or a number with a decimal unit "
                         "(B, kB, MB, GB, TB; 1 MB = 1,000,000 bytes), e.g. 4.1MB")
    n = Decimal(m.group(1)) * UNITS[unit]  # decimal arithmetic: 4.1MB is 4,100,000 bytes, not 4,099,999
    if n <= 0:
        raise InputError(f"{what} {text!r}: must be more than zero bytes")
    return int(n)


def human(n: float) -> str:
    for unit, f in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if abs(n) >= f:
            return f"{n / f:,.3f} {unit}"
    return f"{int(n):,} B"
