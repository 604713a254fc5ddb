"""Protects the empty output's scores a baseline's fitness rests on, through a whole (stub) study: the study
scores the empty string on every judged page with each metric's own scorer into scores/empty-output.jsonl, binds
that file in summary.json's inputs, records its mean on the judged pages in each verdict, and the gate makes the
same verdicts again from it — an edited empty-output file is refused like an edited score file."""

from __future__ import annotations

import json

import pytest

from quantgate.gate.check import INCONCLUSIVE, INVALID, gate
from quantgate.io.fileio import sha256_file
from quantgate.io.scores import read_scores
from quantgate.study.verdicts import EMPTY_SCORES
from tests.support.stub_study import run, study_yaml

N = 12


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    from quantgate.heldout.synth import synth_pages

    root = tmp_path_factory.mktemp("empty")
    synth_pages(root / "pages", N, seed=5, profile="simple", calibration_fraction=0.0)
    study = study_yaml(root / "study.yaml", root / "pages", {"cand": 0.0}, metrics=["ned", "bow_f1"],
                       min_pages=5, min_documents=5)
    run(study, root / "out")
    return root / "out"


def test_the_empty_output_is_scored_bound_and_recorded(finished):
    summary = json.loads((finished / "summary.json").read_text())
    empty = read_scores(finished / EMPTY_SCORES)
    judged = read_scores(finished / "scores" / "bf16-c1.jsonl")
    assert set(empty) == set(judged) and len(empty) == N and all(r.empty for r in empty.values())
    # reading nothing is the worst ned and bag-of-words F1 on pages that have text
    assert {r.ned for r in empty.values()} == {1.0} and {r.bow_f1 for r in empty.values()} == {0.0}
    assert summary["inputs"]["files"][EMPTY_SCORES] == sha256_file(finished / EMPTY_SCORES)
    rows = {v["metric"]: v for v in summary["verdicts"]}
    assert rows["ned"]["empty_output_mean"] == 1.0 and rows["bow_f1"]["empty_output_mean"] == 0.0
    assert all(v["schema_version"] == 5 and v["reason"] != "baseline_unfit" for v in rows.values())
    # the gate makes the same verdicts again from the bound files (12 pages: too few to pass, not invalid)
    assert gate(finished).code == INCONCLUSIVE


def test_an_edited_empty_output_file_is_refused(finished, tmp_path):
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(finished, copy)
    f = copy / EMPTY_SCORES
    lines = f.read_text().splitlines()
    row = json.loads(lines[0]) | {"ned": 0.0}  # as if reading nothing were perfect on one page
    f.write_text("\n".join([json.dumps(row), *lines[1:]]) + "\n")
    res = gate(copy)
    assert res.code == INVALID and "empty-output.jsonl" in res.lines[0], res.lines
