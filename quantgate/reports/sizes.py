"""A checkpoint's size as both reports write it: one rounding rule, so one variant is not 1.795× smaller in
report.html and 1.79× in report.md, and formats as words a reader scans ("26 BF16 · 16 FP8"), not a Python dict."""

from __future__ import annotations

MB_DIGITS = 1  # weights in MB (10^6 bytes), one decimal: the tiny reader's variants differ in the first
RATIO_DIGITS = 2  # "× smaller": two decimals, the precision a size budget is stated in


def megabytes(n_bytes: int | None) -> str:
    return "–" if n_bytes is None else f"{n_bytes / 1e6:,.{MB_DIGITS}f}"


def times_smaller(ratio: float | None) -> str:
    return "–" if ratio is None else f"{ratio:.{RATIO_DIGITS}f}×"


def formats_text(formats: dict[str, int] | None) -> str:
    """Modules per format, the most common first: ``{'bf16': 26, 'fp8': 16}`` → ``26 BF16 · 16 FP8``."""
    if not formats:
        return "–"
    return " · ".join(f"{n} {name.upper()}" for name, n in sorted(formats.items(), key=lambda kv: (-kv[1], kv[0])))
