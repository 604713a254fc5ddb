"""The unit tier's guard (tests/unit/conftest.py): a unit test that starts a process fails, whichever
subprocess entry point it uses, and says which tier the test belongs in."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from subprocess import Popen

import pytest

CHILD = [sys.executable, "-c", "pass"]


@pytest.mark.parametrize("start", [
    lambda: subprocess.run(CHILD, check=False),
    lambda: subprocess.check_output(CHILD),
    lambda: Popen(CHILD),  # bound before the guard was set
    lambda: asyncio.run(asyncio.create_subprocess_exec(*CHILD)),
], ids=["run", "check_output", "Popen", "asyncio"])
def test_a_unit_test_cannot_start_a_process(start):
    with pytest.raises(pytest.fail.Exception, match="belongs in tests/integration"):
        start()


def test_a_library_looking_for_a_shared_object_is_not_a_process_the_test_started():
    import ctypes.util

    assert ctypes.util.find_library("c")  # runs `ldconfig -p`, a probe the guard lets through


def test_the_probes_let_through_are_read_only_queries():
    from tests.unit.conftest import probe

    assert probe(["/sbin/ldconfig", "-p"]) and probe(["git", "rev-parse", "HEAD"])
    assert not probe(["git", "commit", "-m", "x"]) and not probe(["ldconfig"]) and not probe("git rev-parse HEAD")
    assert not probe([sys.executable, "-m", "quantgate", "serve"])
