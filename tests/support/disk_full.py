"""Run a stub study (``tests.support.stub_study``) with every file it writes capped at LIMIT bytes
(RLIMIT_FSIZE, SIGXFSZ ignored: a write past the cap fails with EFBIG, as a full disk fails with ENOSPC).
A QuantgateError prints as the CLI prints it — ``error: …`` on one line, exit 5 (or its code) — anything
else escapes as a traceback, exit 1.

    python -m tests.support.disk_full STUDY.yaml OUT LIMIT
"""

from __future__ import annotations

import resource
import signal
import sys
from pathlib import Path

from quantgate.errors import QuantgateError
from tests.support.stub_study import run

if __name__ == "__main__":
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    limit = int(sys.argv[3])
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    try:
        run(Path(sys.argv[1]), Path(sys.argv[2]))
    except QuantgateError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(e.exit_code)
