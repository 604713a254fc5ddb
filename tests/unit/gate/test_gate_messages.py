"""Protects what the gate and the report say on the console: plain words instead of Python reprs, the note on
files the gate does not vouch for only when a report was changed after the study, and no library warning
(matplotlib's font fallback) printed while a report is drawn."""

from __future__ import annotations

import logging

import pytest

from quantgate.gate.check import gate
from tests.support.cli import run_cli as _qg
from tests.support.study_folder import finished_study


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    return finished_study(tmp_path_factory.mktemp("messages") / "study", {"fp8": 0.0005})


def test_what_the_gate_checks_is_said_in_plain_words(study):
    from quantgate.errors import UsageError

    for metrics, variants, flag, name in ((["wer"], ["fp8"], "--metrics", "'wer'"), (None, ["fp9"], "--variants",
                                                                                      "'fp9'")):
        with pytest.raises(UsageError) as e:
            gate(study, metrics, variants)
        msg = str(e.value)
        assert msg.startswith(f"{flag}: {name}") and not any(r in msg for r in ("None", "['", "metrics=", "variants="))


def test_the_gates_note_only_when_a_report_was_changed(study, tmp_path):
    import shutil

    code, out, _ = _qg("gate", study)
    assert code == 0 and "does not vouch" not in out, out
    edited = shutil.copytree(study, tmp_path / "edited")
    (edited / "report.md").write_text("# all passed\n")
    code, out, _ = _qg("gate", edited)
    assert code == 0 and "does not vouch for report.md" in out


def test_drawing_the_report_prints_no_font_warning(study, capfd):
    from quantgate.reports import load_summary, write_reports

    logging.lastResort = logging.StreamHandler()  # as in a fresh process: warnings with no handler go to stderr
    write_reports(load_summary(study), study)
    err = capfd.readouterr().err
    assert "findfont" not in err and "Failed to find font" not in err, err
