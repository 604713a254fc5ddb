"""A sequential study whose baseline reads nothing, through the whole (stub) study and the gate: its floor is
declared at ned's worst value, so the floor alone would let it judge, and only the empty output's scores
(``scores/empty-output.jsonl``) show it cannot read. Every look is ``baseline_unfit``, the pass runs to its page
budget, the row states both numbers, and the gate makes the same decisions and rows again from the bound files,
saying so first. An edited empty-output file is refused — as a changed file, and, with its hash rewritten into
summary.json, because the remade verdicts then differ from the recorded ones."""

from __future__ import annotations

import json
import shutil

import pytest
import yaml

from quantgate.gate.check import INCONCLUSIVE, INVALID, gate
from quantgate.io.fileio import sha256_file
from quantgate.study.verdicts import EMPTY_SCORES
from tests.support.stub_study import run, study_yaml

N = 40


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    from quantgate.heldout.synth import synth_pages

    root = tmp_path_factory.mktemp("seq-empty")
    synth_pages(root / "pages", N, seed=7, profile="simple", calibration_fraction=0.0)
    study = study_yaml(root / "study.yaml", root / "pages", {"cand": 0.0}, sequential={"looks": 2, "first_look": 10},
                       metrics=["ned"], min_pages=10, min_documents=10, worst_page_damage={"ned": 0.025},
                       baseline_floor={"ned": 1.0})
    body = yaml.safe_load(study.read_text())
    body["variants"][0]["server_args"] = ["--blank"]  # the baseline answers every page with nothing
    study.write_text(yaml.safe_dump(body, sort_keys=False))
    run(study, root / "out")
    return root / "out"


def test_every_look_is_unfit_and_the_gate_says_so(finished):
    summary = json.loads((finished / "summary.json").read_text())
    (row,) = summary["verdicts"]
    assert (row["verdict"], row["reason"]) == ("inconclusive", "baseline_unfit")
    assert row["baseline_score"] == 1.0 and row["empty_output_mean"] == 1.0 and row["baseline_floor"] == 1.0
    assert "no better than an empty output's 1.0000 on the same pages" in row["message"]
    (seq,) = [v["sequential"] for v in summary["variants"] if v["name"] == "cand"]
    assert seq["stop_reason"] == "page_budget" and seq["pages_used"] == N and len(seq["looks"]) == 2
    assert seq["metrics"]["ned"]["reason"] == "baseline_unfit" and seq["metrics"]["ned"]["decided_at_look"] is None
    remade: list = []
    res = gate(finished, checked=remade)
    assert res.code == INCONCLUSIVE, res.lines
    assert res.lines[0].startswith("baseline unfit: bf16 scores 1.0000 ned (floor 1, an empty output 1.0000 on the "
                                   "same pages)")
    assert [r.model_dump(mode="json") for r in remade] == summary["verdicts"]


def _edit_empty(folder) -> None:
    f = folder / EMPTY_SCORES
    lines = f.read_text().splitlines()
    f.write_text("".join(json.dumps(json.loads(x) | {"ned": 1.0 if i else 0.0}) + "\n" for i, x in enumerate(lines)))


def test_an_edited_empty_output_file_is_refused(finished, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(finished, copy)
    _edit_empty(copy)  # as if reading nothing were perfect on one page: the baseline would seem to read
    res = gate(copy)
    assert res.code == INVALID and "empty-output.jsonl" in res.lines[0], res.lines


def test_an_edited_empty_output_file_with_its_hash_rebound_is_refused(finished, tmp_path):
    """The remake reads the file: one page's row taken out (so the empty output no longer covers the judged pages
    and fitness falls back to the floor) with summary.json's hash brought up to date changes the sequential
    decisions the gate makes again — the candidate decides at the first look — and they no longer match the
    recorded ones."""
    copy = tmp_path / "copy"
    shutil.copytree(finished, copy)
    f = copy / EMPTY_SCORES
    f.write_text("".join(f.read_text().splitlines(keepends=True)[1:]))
    s = json.loads((copy / "summary.json").read_text())
    s["inputs"]["files"][EMPTY_SCORES] = sha256_file(copy / EMPTY_SCORES)
    (copy / "summary.json").write_text(json.dumps(s, indent=2))
    res = gate(copy)
    assert res.code == INVALID and "variants.cand.sequential" in res.lines[0], res.lines
