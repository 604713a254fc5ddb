"""After `quantgate tune`, the study folder's summary.json echoes the tune's last trial study
(paths absolute, the trials added as variants): `gate DIR --study YAML` (docs/study.md's CI form) checks it
against the YAML the user keeps, instead of refusing every tuned folder; anything else edited is still refused."""

import json
import os
import shutil

import yaml

from quantgate.gate import gate
from tests.support.study_folder import finished_study


def _tuned(tmp_path):
    """A finished folder as a tune leaves it: variants bf16, fp8 and the trial budget-t1; the user's YAML has
    bf16 and fp8, its paths relative to the YAML's own folder."""
    out = finished_study(tmp_path / "study", {"fp8": 0.0005, "budget-t1": 0.0005})
    (out / "tune" / "budget").mkdir(parents=True)
    (out / "tune" / "budget" / "tune.json").write_text("{}")
    echoed = json.loads((out / "summary.json").read_text())["study"]
    # the echo's paths are absolute (/elsewhere/...); the user's YAML names the same ones relative to itself
    rel = lambda p: os.path.relpath(p, tmp_path)  # noqa: E731
    declared = {**echoed, "model": rel(echoed["model"]), "pages": {"path": rel(echoed["pages"]["path"])},
                "variants": [v for v in echoed["variants"] if v["name"] != "budget-t1"]}
    declared.pop("output", None)
    yml = tmp_path / "study.yaml"
    yml.write_text(yaml.safe_dump(declared))
    return out, yml


def test_gate_with_the_users_study_passes_a_tuned_folder(tmp_path):
    out, yml = _tuned(tmp_path)
    code, lines = gate(out, study=yml)[:2]
    assert code == 0, lines


def test_trials_without_a_tune_record_are_still_refused(tmp_path):
    out, yml = _tuned(tmp_path)
    shutil.rmtree(out / "tune")
    assert gate(out, study=yml)[0] == 3


def test_a_changed_margin_is_still_refused_after_tune(tmp_path):
    out, yml = _tuned(tmp_path)
    body = yaml.safe_load(yml.read_text())
    body["margins"] = {"ned": 0.5}
    yml.write_text(yaml.safe_dump(body))
    assert gate(out, study=yml)[0] == 3
