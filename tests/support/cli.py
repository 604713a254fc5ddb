"""The CLI run in this process, for tests that read what it prints."""

from __future__ import annotations

import contextlib
import io


def run_cli(*args) -> tuple[int, str, str]:
    """``quantgate ARGS`` in this process: (exit code, stdout, stderr). A traceback escapes as an exception; argparse's
    refusals (SystemExit, as `python -m quantgate` ends) are returned as their code."""
    from quantgate.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main([str(a) for a in args])
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else 1
    return code, out.getvalue(), err.getvalue()
