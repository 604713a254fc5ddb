"""A study with lm-eval moved or copied before it finished resumes and gates. lm-eval's
``doc_hash`` covers each document, and the page task's documents named their images by absolute path, so the
moved study's remaining lm-eval run differed from the baseline's (`… documents differ … (doc_hash)`, exit 2).
Served by the stub server (``tests.support.stub_study``), lm-eval itself run as the study runs it."""

from __future__ import annotations

import json
import shutil

import yaml

from quantgate.gate import gate
from tests.support.stub_study import run, study_yaml


def _study(path, pages_dir):
    st = study_yaml(path, pages_dir or path.parent, {"same": 0.0}, min_pages=5)
    body = yaml.safe_load(st.read_text())
    body["lm_eval"] = {"page_task": True}
    if pages_dir is None:  # the page set synthesized inside the study folder
        body["pages"] = {"synth": {"n": 8, "profile": "simple", "calibration_fraction": 0.0}}
        body["backend"]["start_command"] = body["backend"]["start_command"].split(" --answers")[0]
    st.write_text(yaml.safe_dump(body))
    return st


def _lm(summary):
    return [(v["variant"], v["task"], v["metric"], v["verdict"], v["n"], v["delta"]) for v in summary["verdicts"]]


def test_a_moved_unfinished_study_with_lmeval_resumes_and_gates(tmp_path):
    from quantgate.heldout.synth import synth_pages

    synth_pages(tmp_path / "outside", 8, seed=2, profile="simple", calibration_fraction=0.0)
    for where, pages in (("inside", None), ("outside", tmp_path / "outside")):
        first = tmp_path / where / "a" / "out"
        first.parent.mkdir(parents=True)
        study = _study(first.parent / "study.yaml", pages)
        done = run(study, first)
        docs = [json.loads(x) for x in (first / "lmeval" / "task" / "quantgate_page_heading.jsonl").read_text().splitlines()]
        assert docs and all(not d["image"].startswith("/") for d in docs), docs[0]
        # unfinished: the candidate's lm-eval run and the summary not written yet; then the folder moves
        shutil.rmtree(first / "lmeval" / "same")
        (first / "summary.json").unlink()
        moved = tmp_path / where / "b" / "elsewhere" / "out"
        moved.parent.mkdir(parents=True)
        shutil.move(first.parent, moved.parent.parent / "moved")
        moved = moved.parent.parent / "moved" / "out"
        again = run(moved.parent / "study.yaml", moved)
        assert _lm(again["lm_eval"]) == _lm(done["lm_eval"]) and again["complete"]
        result = gate(moved, lmeval=True)
        # gated, not refused: 8 single-page documents are too few for a pass (too_few_documents),
        # and the inside case's stub answers one fixed text (baseline_unfit), so the outcome is 2, never 3
        assert result.code in (0, 2) and not result.lines[0].startswith("files changed"), result.lines
        if pages is not None:  # a page set outside the study folder is copied in (study.pagecopy): found from there
            assert (moved / "pages" / "pages.jsonl").is_file() and not (moved / "lmeval" / "task" / "images").exists()
            assert all(d["image"].startswith("../../pages/") for d in docs), docs[0]
    # the lm-eval task's utils.py (code lm-eval runs) is bound by the gate
    utils = moved / "lmeval" / "task" / "utils.py"
    kept = utils.read_bytes()
    utils.write_text(utils.read_text() + "\nimport os  # edited\n")
    result = gate(moved, lmeval=True)
    assert result.code == 3 and "lmeval/task/utils.py changed" in result.lines[0], result.lines
    # and every file of the task folder: a task added beside the study's is one lm-eval would read
    utils.write_bytes(kept)
    (moved / "lmeval" / "task" / "extra_task.yaml").write_text("task: extra_task\n")
    result = gate(moved, lmeval=True)
    assert result.code == 3 and "no hash for lmeval/task/extra_task.yaml" in result.lines[0], result.lines
