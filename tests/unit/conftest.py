"""The unit tier runs in-process: no child process, no server, no port. A unit test that starts a process fails
with one line saying where such a test belongs, so the tier cannot drift back into starting servers.

Every way the standard library starts a program goes through ``subprocess.Popen`` (``run``, ``check_output``,
asyncio's subprocess transports), so refusing its constructor covers them, including a name bound earlier by
``from subprocess import Popen``. Two read-only probes of the machine are let through, because library or product
code makes them on the way and they start nothing a test depends on: ``ldconfig -p`` (``ctypes.util.find_library``,
when torch looks for a shared object) and ``git rev-parse`` (the commit a summary's provenance records,
``quantgate.io.provenance``)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

TIER_MESSAGE = ("a unit test runs in-process and started a subprocess ({args!r}); a test that starts a process or "
                "a server belongs in tests/integration (stand-in servers) or tests/e2e (real servers, whole studies)")


def probe(args) -> bool:
    """Whether ``args`` is one of the read-only probes a unit test may run."""
    if not isinstance(args, (list, tuple)) or not args:
        return False
    program, rest = Path(str(args[0])).name, [str(a) for a in args[1:]]
    return (program == "ldconfig" and rest == ["-p"]) or (program == "git" and rest[:1] == ["rev-parse"])


@pytest.fixture(autouse=True)
def _no_subprocess(monkeypatch):
    real = subprocess.Popen.__init__

    def refused(self, args, *rest, **kwargs):
        if probe(args):
            return real(self, args, *rest, **kwargs)
        self._child_created = False  # so Popen.__del__ has nothing to reap
        pytest.fail(TIER_MESSAGE.format(args=args), pytrace=False)

    monkeypatch.setattr(subprocess.Popen, "__init__", refused)
