"""Every verb's exit codes, one table (quantgate.errors.EXIT_CODES): printed by `quantgate --help` and `gate --help`,
the same in docs/study.md, and each code reached through the command line in this process (the gate's provenance check asks git: not the
unit tier) — the verdict codes
from the gate on synthetic study folders, 64 for what the command line got wrong, 65 for a file that exists but is
malformed. Exit 2 is the inconclusive verdict's alone: a pipeline that tolerates it must never pass a typo."""

import errno
import json
import re
import shutil

import pytest
from PIL import Image

from quantgate.errors import EXIT_CODES, QuantgateError, ServerError, exit_code_table
from tests.support.cli import run_cli
from tests.support.paths import REPO
from tests.support.study_folder import finished_study


def _subclasses(cls):
    for sub in cls.__subclasses__():
        yield sub
        yield from _subclasses(sub)


def test_the_table_is_in_both_helps_and_the_docs():
    for argv in (["--help"], ["gate", "--help"]):
        code, out, _ = run_cli(*argv)
        assert code == 0 and exit_code_table() in out
    doc = (REPO / "docs" / "study.md").read_text()
    section = doc.split("\n## Exit codes\n", 1)[1].split("\n## ", 1)[0]
    rows = {int(code): text for code, text in re.findall(r"^\| \*\*(\d+)\*\* \| (.+?) \|$", section, re.M)}
    assert rows == EXIT_CODES


def test_no_error_class_takes_a_verdict_code():
    """Only the gate's verdicts (and the invalid folder, 3) use 1–3; an input error is 64 or 65, never 2."""
    import quantgate.serve.client  # noqa: F401  (its own error class)

    classes = [QuantgateError, *_subclasses(QuantgateError)]
    assert len(classes) > 6
    for c in classes:
        assert c.exit_code in EXIT_CODES and c.exit_code not in (0, 1, 2), c


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    return finished_study(tmp_path_factory.mktemp("codes") / "study")


def test_verdict_codes_0_1_2_3(study, tmp_path):
    assert run_cli("gate", study, "--variants", "fp8", "--junit", tmp_path / "j.xml")[0] == 0
    assert run_cli("gate", study, "--junit", tmp_path / "j.xml")[0] == 1
    small = finished_study(tmp_path / "small", {"fp8": 0.0005}, pages=8)
    assert run_cli("gate", small)[0] == 2
    broken = shutil.copytree(study, tmp_path / "broken")
    (broken / "summary.json").write_text("{not json")
    code, out, _ = run_cli("gate", broken)
    assert code == 3 and out.startswith("INVALID: ") and "summary.json" in out


@pytest.mark.parametrize("argv", [
    ["gate", "{study}", "--bogus"],                  # a bad flag
    ["gate", "/no/such/folder"],                     # a command-line path that does not exist
    ["report", "/no/such/folder"],
    ["study", "/no/such/study.yaml"],                # a CI file pointing at a study that does not exist
    ["gate", "{study}", "--require", "maybe"],       # a value outside the choices
    ["serve", "{study}", "--pages", "{study}", "-o", "{tmp}/r", "--timeout-s", "0"],  # a number outside its range
    ["pages"],                                       # a verb group without its verb
    ["frobnicate"],                                  # no such verb
])
def test_usage_errors_are_64_with_one_line(study, tmp_path, argv):
    code, out, err = run_cli(*(a.format(study=study, tmp=tmp_path) for a in argv))
    assert code == 64, (argv, code, out, err)
    assert "Traceback" not in err and err.strip() and len(err.strip().splitlines()) <= 2, err
    assert not (tmp_path / "r").exists()


def test_a_malformed_file_is_65_for_report_and_3_for_the_gate(study, tmp_path):
    """`report` reads a file it was pointed at: a summary.json that is not JSON is bad data (65). The gate answers
    for the whole folder: the same file makes the folder invalid (3), as the table says."""
    folder = shutil.copytree(study, tmp_path / "s")
    (folder / "summary.json").write_text(json.dumps({"schema_version": "x"}))
    code, out, err = run_cli("report", folder)
    assert code == 65 and out == "" and "summary.json" in err and len(err.splitlines()) == 1, err
    assert run_cli("gate", folder)[0] == 3


def test_a_truncated_pdf_is_65_naming_it(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    Image.new("RGB", (200, 260), "white").save(src / "whole.pdf")
    cut = src / "cut.pdf"
    cut.write_bytes((src / "whole.pdf").read_bytes()[:300])
    (src / "whole.pdf").unlink()
    code, _, err = run_cli("pages", "import", src, "-o", tmp_path / "out")
    assert code == 65 and "cut.pdf" in err and "Traceback" not in err, err
    assert not (tmp_path / "out").exists()


def test_a_server_error_is_4_and_a_full_disk_5(monkeypatch, tmp_path):
    """The command line's mapping of the two environment failures (their real sources: tests/integration's
    test_client_faults.py and test_disk_full.py)."""
    from quantgate.commands import study as study_cmd

    def server_down(_):
        raise ServerError("transformers serve exited with code 1 before it answered; its log: x.log")

    monkeypatch.setattr(study_cmd, "cmd_report", server_down)
    code, _, err = run_cli("report", tmp_path)
    assert code == 4 and err == "quantgate report: error: transformers serve exited with code 1 before it " \
        "answered; its log: x.log\n"

    def disk_full(_):
        raise OSError(errno.ENOSPC, "No space left on device", str(tmp_path / "report.md"))

    monkeypatch.setattr(study_cmd, "cmd_report", disk_full)
    code, _, err = run_cli("report", tmp_path)
    assert code == 5 and str(tmp_path) in err and len(err.splitlines()) == 1
