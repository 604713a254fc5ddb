"""Files planted in a study folder or a key path: a `.lock` symbolic link is never followed (its target never
written), a FIFO in place of the lock, summary.json or a key is refused in one line without blocking, a private key
readable by others is refused unless allowed, and content beyond the loader's limits is one INVALID line. Each read
runs under an alarm, so a blocking open fails the test instead of hanging it."""

from __future__ import annotations

import os
import shutil

import pytest

from quantgate.errors import DataError, UnsafeInputError
from quantgate.gate.attest import keygen
from tests.support.cli import run_cli
from tests.support.study_folder import finished_study
from tests.unit.io.test_load import no_hang


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    return finished_study(tmp_path_factory.mktemp("hostile") / "study")


@pytest.fixture
def copy(study, tmp_path):
    dst = tmp_path / "copy"
    shutil.copytree(study, dst)
    return dst


def test_the_study_lock_follows_no_link(tmp_path):
    from quantgate.study.run import study_lock
    from quantgate.study.verdicts import LOCK

    target = tmp_path / "precious.txt"
    target.write_text("keep me")
    out = tmp_path / "out"
    out.mkdir()
    (out / LOCK).symlink_to(target)
    with pytest.raises(UnsafeInputError, match="symbolic link"), study_lock(out):
        pass
    assert target.read_text() == "keep me"
    (out / LOCK).unlink()
    (out / LOCK).symlink_to(tmp_path / "absent")  # a dangling link: its target is not created
    with pytest.raises(UnsafeInputError), study_lock(out):
        pass
    assert not (tmp_path / "absent").exists()


def test_a_fifo_lock_is_refused_by_the_study_and_the_gate_without_blocking(copy):
    from quantgate.gate.check import INVALID, gate
    from quantgate.study.run import study_lock
    from quantgate.study.verdicts import LOCK

    os.mkfifo(copy / LOCK)
    with no_hang():
        with pytest.raises(DataError, match="not a regular file"), study_lock(copy):
            pass
        code, lines = gate(copy)
    assert code is INVALID and "not a regular file" in lines[0] and len(lines) == 1


def test_a_fifo_summary_or_key_is_refused_without_blocking(copy, tmp_path):
    key, _ = keygen(tmp_path / "key")
    fifo_key = tmp_path / "fifo-key"
    os.mkfifo(fifo_key)
    with no_hang():
        code, out, err = run_cli("gate", copy, "--sign", fifo_key)
        assert code == 3 and "FIFO" in err and len(err.splitlines()) == 1, (out, err)
        (copy / "summary.json").unlink()
        os.mkfifo(copy / "summary.json")
        code, out, _ = run_cli("gate", copy)
        assert code == 3 and out.startswith("INVALID") and "FIFO" in out and len(out.splitlines()) == 1, out


@pytest.mark.parametrize("content,needle", [
    (b"[" * 200_000 + b"]" * 200_000, "nested more than"),
    (b'{"schema_version": ' + b"1" * 5001 + b"}", "a number of 5,001 characters"),
    (b'{"schema_version": 1\x00}', "a NUL byte"),
])
def test_a_hostile_summary_is_one_invalid_line(copy, content, needle):
    (copy / "summary.json").write_bytes(content)
    code, out, err = run_cli("gate", copy)
    assert code == 3 and needle in out and len(out.splitlines()) == 1 and not err, (out, err)


def test_a_summary_with_a_bom_gates_as_without(study, copy):
    """Windows editors save UTF-8 with a byte-order mark: it changes no field, so it changes no outcome."""
    want = run_cli("gate", study)
    (copy / "summary.json").write_bytes(b"\xef\xbb\xbf" + (copy / "summary.json").read_bytes())
    got = run_cli("gate", copy)
    assert got[0] == want[0] == 1 and got[1].replace(str(copy), "X") == want[1].replace(str(study), "X")


def test_a_private_key_readable_by_others_is_refused_unless_allowed(study, tmp_path):
    key, _ = keygen(tmp_path / "key")
    for mode in (0o644, 0o640, 0o604):
        key.chmod(mode)
        att = tmp_path / f"att-{mode:o}.json"
        code, out, err = run_cli("gate", study, "--sign", key, "--attestation", att)
        assert code == 3 and f"mode {mode:04o}" in err and "chmod 600" in err and not att.exists(), (out, err)
    code, out, err = run_cli("gate", study, "--sign", key, "--attestation", tmp_path / "att.json",
                             "--allow-readable-key")
    assert code == 1 and (tmp_path / "att.json").exists(), (out, err)
    key.chmod(0o600)
    assert run_cli("gate", study, "--sign", key, "--attestation", tmp_path / "att2.json")[0] == 1
