"""The gate writes junit.xml from the verdicts it has just remade: only within_noise passes a case, an inconclusive
or baseline_unfit verdict is a failure whose message gives its reason (a CI test tab must never show green tests on
a red job), a folder it cannot trust is one error case, and a default path it cannot write is a warning only.
Synthetic finished study folders (tests.support.study_folder); the CLI in this process (the summary's provenance
asks git, so not the unit tier)."""

import json
import shutil
import xml.etree.ElementTree as ET

import pytest

from quantgate.gate import gate
from tests.support.cli import run_cli
from tests.support.study_folder import finished_study


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    """fp8 within noise, bad a regression (0.2 ned worse on 40% of the pages); 40 pages."""
    return finished_study(tmp_path_factory.mktemp("junit") / "study")


def _cases(path):
    suite = ET.parse(path).getroot()
    rows = {}
    for case in suite.iter("testcase"):
        kids = list(case)
        rows[(case.get("classname"), case.get("name"))] = (kids[0].tag, kids[0].get("message") or kids[0].text)
    return suite, rows


def test_the_gate_rewrites_junit_from_the_verdicts_it_remade(study, tmp_path):
    """junit.xml edited to say all passed: the gate's own run writes the failures back, one case per checked verdict."""
    folder = shutil.copytree(study, tmp_path / "s")
    (folder / "junit.xml").write_text("<testsuite tests='1' failures='0'/>\n")
    code, out, err = run_cli("gate", folder)
    assert code == 1 and err == "", (out, err)
    suite, rows = _cases(folder / "junit.xml")
    verdicts = json.loads((folder / "summary.json").read_text())["verdicts"]
    assert set(rows) == {(f"quantgate.{v['variant']}", v["metric"]) for v in verdicts}
    assert suite.get("failures") == str(sum(v["verdict"] != "within_noise" for v in verdicts)) != "0"
    assert rows[("quantgate.bad", "ned")][0] == "failure" and "regression (ci_beyond_margin)" in \
        rows[("quantgate.bad", "ned")][1]
    assert rows[("quantgate.fp8", "ned")][0] == "system-out"
    assert suite.get("skipped") == "0" and not list(suite.iter("skipped"))


def test_only_the_checked_variants_are_cases(study, tmp_path):
    folder = shutil.copytree(study, tmp_path / "s")
    code, _, _ = run_cli("gate", folder, "--variants", "fp8")
    assert code == 0
    suite, rows = _cases(folder / "junit.xml")
    assert {c for c, _ in rows} == {"quantgate.fp8"} and suite.get("failures") == "0"


def test_inconclusive_is_a_failure_with_its_reason(tmp_path):
    """8 pages at the default min_pages: every verdict inconclusive (too_few_pages), gate 2, every case failed."""
    out = finished_study(tmp_path / "small", pages=8)
    _, own = _cases(out / "junit.xml")  # the study's own junit.xml follows the same rule
    assert len(own) == 6 and all(tag == "failure" for tag, _ in own.values())
    code, _, _ = run_cli("gate", out, "--variants", "fp8")
    assert code == 2
    suite, rows = _cases(out / "junit.xml")
    assert len(rows) == 3 and suite.get("failures") == "3" and suite.get("skipped") == "0"
    for tag, message in rows.values():
        assert tag == "failure" and message.startswith("inconclusive (too_few_pages): ") and "30" in message, message


def test_baseline_unfit_is_a_failure_naming_it(tmp_path):
    out = finished_study(tmp_path / "s", {"fp8": 0.0005}, baseline_floor={"ned": 0.01})
    code, _, _ = run_cli("gate", out)
    assert code == 2
    _, rows = _cases(out / "junit.xml")
    tag, message = rows[("quantgate.fp8", "ned")]
    assert tag == "failure" and message.startswith("inconclusive (baseline_unfit): ")
    assert rows[("quantgate.fp8", "bow_f1")][0] == "system-out"


def test_an_invalid_folder_is_one_error_case_with_the_gates_line(study, tmp_path):
    folder = shutil.copytree(study, tmp_path / "s")
    shutil.copy(study / "junit.xml", folder / "junit.xml")
    weights = folder / "variants" / "fp8" / "model.safetensors"
    weights.write_bytes(weights.read_bytes() + b"x")
    code, out, err = run_cli("gate", folder)
    assert code == 3 and out.startswith("INVALID: ") and err == ""
    suite, rows = _cases(folder / "junit.xml")
    assert suite.get("errors") == "1" and suite.get("tests") == "1"
    (tag, message), = rows.values()
    assert tag == "error" and f"INVALID: {message}\n" == out and str(weights) in message


def test_junit_path_elsewhere_leaves_the_folder_alone(study, tmp_path):
    folder = shutil.copytree(study, tmp_path / "s")
    before = (folder / "junit.xml").read_bytes()
    code, _, _ = run_cli("gate", folder, "--junit", tmp_path / "ci.xml")
    assert code == 1 and (folder / "junit.xml").read_bytes() == before
    _, rows = _cases(tmp_path / "ci.xml")
    assert rows[("quantgate.bad", "ned")][0] == "failure"


def test_junit_into_a_missing_folder_is_a_usage_error_before_any_gating(study, tmp_path):
    code, out, err = run_cli("gate", study, "--junit", tmp_path / "nowhere" / "j.xml")
    assert code == 64 and out == "" and "--junit" in err and len(err.splitlines()) == 1
    assert not (tmp_path / "nowhere").exists()


def test_an_unwritable_default_is_a_warning_not_a_failure(study, tmp_path):
    """junit.xml replaced by a folder (as a read-only mount would refuse it): the gate's code is the verdicts'."""
    folder = shutil.copytree(study, tmp_path / "s")
    (folder / "junit.xml").unlink()
    (folder / "junit.xml").mkdir()
    code, out, err = run_cli("gate", folder, "--variants", "fp8")
    assert code == 0 and out.splitlines()[-1] == "PASS"
    assert err.startswith("warning: junit.xml not written to ") and len(err.splitlines()) == 1
    code, _, err = run_cli("gate", folder, "--variants", "fp8", "--junit", folder / "junit.xml")
    assert code == 64 and "--junit" in err  # a path the user named must be written


def test_the_remade_rows_are_the_gates(study):
    rows: list = []
    code, lines = gate(study, variants=["bad"], checked=rows)
    assert code == 1 and len(rows) == len(lines) == 3 and {r.variant for r in rows} == {"bad"}
