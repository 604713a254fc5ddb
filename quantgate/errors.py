"""Typed errors: the CLI turns each into one line on stderr and an exit code, never a traceback."""

from __future__ import annotations


class QuantgateError(Exception):
    """An error the user can act on. ``str(err)`` names the file/field and says what to do."""

    exit_code = 2


class InputError(QuantgateError):
    """Bad input: a file, a field or an argument that cannot be used as given."""


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


class DeprecatedSpelling(FutureWarning):
    """An old name of a flag or a study key, still read for one release. The command line prints it as one
    ``warning:`` line; library callers see an ordinary FutureWarning."""
