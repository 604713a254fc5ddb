"""The unit tier runs in-process: no child process, no server, no port. A unit test that starts a process fails
with one line saying where such a test belongs, so the tier cannot drift back into starting servers.

Every way the standard library starts a program goes through ``subprocess.Popen`` (``run``, ``check_output``,
asyncio's subprocess transports), so refusing its constructor covers them, including a name bound earlier by
``from subprocess import Popen``. One program is let through: ``ldconfig -p``, which ``ctypes.util.find_library``
runs when a library (torch, on import) looks for a shared object — a read-only probe of the system, not the test
starting something."""

from __future__ import annotations

import subprocess

import pytest

TIER_MESSAGE = ("a unit test runs in-process and started a subprocess ({args!r}); a test that starts a process or "
                "a server belongs in tests/integration (stand-in servers) or tests/e2e (real servers, whole studies)")


@pytest.fixture(autouse=True)
def _no_subprocess(monkeypatch):
    real = subprocess.Popen.__init__

    def refused(self, args, *rest, **kwargs):
        if isinstance(args, (list, tuple)) and args and str(args[0]).endswith("ldconfig") and list(args[1:]) == ["-p"]:
            return real(self, args, *rest, **kwargs)
        self._child_created = False  # so Popen.__del__ has nothing to reap
        pytest.fail(TIER_MESSAGE.format(args=args), pytrace=False)

    monkeypatch.setattr(subprocess.Popen, "__init__", refused)
