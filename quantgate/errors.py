"""Typed errors: the CLI turns each into one line on stderr and an exit code, never a traceback."""

from __future__ import annotations


class QuantgateError(Exception):
    """An error the user can act on. ``str(err)`` names the file/field and says what to do."""

    exit_code = 65


class InputError(QuantgateError):
    """Bad input: a file, a field or an argument that cannot be used as given. Unless raised as a ``UsageError``
    it is bad data (65): exit 2 belongs to an inconclusive verdict alone, so no input error may share it."""

    exit_code = 65


class UnsafeInputError(InputError):
    """Input refused for safety (pickle weights, remote code, paths leaving their folder)."""


class ServerError(QuantgateError):
    """An inference server that did not start, died, or answered with something unusable."""

    exit_code = 4


class VerificationError(QuantgateError):
    """A saved checkpoint that does not match its plan, or artifacts changed after a verdict."""

    exit_code = 3


class DiskFullError(QuantgateError):
    """A write that failed for want of space (or a file-size limit): the folder named, what was written before
    intact (atomic writes, append-only records), the command resumable once space is freed."""

    exit_code = 5


class UsageError(InputError):
    """The command line itself is wrong: an unknown flag or name, a command-line path that does not exist, two
    flags that exclude each other (sysexits' EX_USAGE). Its own code, so a pipeline that tolerates an
    inconclusive verdict (2) never passes a typo."""

    exit_code = 64


class DataError(InputError):
    """A file that exists but cannot be used as written: malformed JSON/YAML, a wrong field, bytes that are not
    text (sysexits' EX_DATAERR)."""

    exit_code = 65


# Every verb's exit codes, one table: `quantgate --help`, `gate --help` and docs/study.md print it (a test holds the
# doc to it). 64 and 65 are sysexits' EX_USAGE and EX_DATAERR, far from the verdict codes, so a pipeline that
# tolerates "inconclusive" never passes a typo or a broken file.
EXIT_CODES: dict[int, str] = {
    0: "pass: every checked verdict is within noise (other verbs: done)",
    1: "regression: a verdict that fails (a regression Holm confirms, or not_equivalent)",
    2: "inconclusive: not every verdict passes and none fails (or the baseline is unfit)",
    3: "invalid study folder: summary.json missing or malformed, the study unfinished, a file changed",
    4: "server: an inference server did not start, died, or answered with something unusable",
    5: "disk full: a write failed for want of space; what was written is intact, rerun to resume",
    64: "usage: a bad flag or value, a command-line path that does not exist, flags that exclude each other",
    65: "bad input data: a file that exists but is malformed (JSON/YAML, a field, bytes that are not text)",
}


def exit_code_table() -> str:
    """EXIT_CODES as aligned lines, for --help epilogs."""
    return "\n".join(f"  {code:>2}  {what}" for code, what in EXIT_CODES.items())


class DeprecatedSpelling(FutureWarning):
    """An old name of a flag or a study key, still read for one release. The command line prints it as one
    ``warning:`` line; library callers see an ordinary FutureWarning."""


# What str.splitlines() breaks a line at: a key or value from a file, quoted into an error, must not split the one
# line a user (or a CI log parser) reads — a summary.json key holding "\r" once printed as two lines.
_LINE_BREAKS = {ord(c): f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}"
                for c in "\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029"}


def one_line(text: str) -> str:
    """``text`` with every line break escaped (a carriage return as ``\\x0d``), so it stays on one line."""
    return text.translate(_LINE_BREAKS)
