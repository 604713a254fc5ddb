"""What summary.json claims beside the verdicts, bound to the files that prove it, and what changes no meaning
tolerated: the study echo's prompt and max_tokens against each hashed run.json; lm_eval.runs against each
variant's lmeval.json; a file added to the lm-eval task folder; a README beside the variant folders and a
variant's .git (left out as model-signing leaves it out) not refused. On synthetic finished study folders."""

from __future__ import annotations

import json
import shutil
from types import SimpleNamespace

import pytest

from quantgate.gate.check import INVALID, gate
from tests.support.study_folder import finished_study


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    return finished_study(tmp_path_factory.mktemp("bind") / "study")


@pytest.fixture
def copy(study, tmp_path):
    dst = tmp_path / "copy"
    shutil.copytree(study, dst)
    return dst


@pytest.mark.parametrize("field,value", [("max_tokens", 48), ("prompt", "Transcribe nothing.")])
def test_the_echoed_prompt_and_max_tokens_are_what_the_runs_served(copy, field, value):
    summ = json.loads((copy / "summary.json").read_text())
    summ["study"][field] = value
    (copy / "summary.json").write_text(json.dumps(summ))
    code, lines = gate(copy)
    assert code is INVALID and f"study.{field} is {value!r} but runs/" in lines[0], lines


def test_files_that_change_no_meaning_are_tolerated(study, copy):
    want = gate(study)
    (copy / "variants" / "README.md").write_text("what these folders are\n")
    git = copy / "variants" / "fp8" / ".git"
    git.mkdir()
    (git / "HEAD").write_text("ref: refs/heads/main\n")
    (copy / "variants" / "fp8" / ".gitattributes").write_text("*.safetensors filter=lfs\n")
    got = gate(copy)
    assert got.code == want.code != INVALID, got.lines
    # a folder there is still a variant the study does not declare; another file in a variant folder still refused
    (copy / "variants" / "extra").mkdir()
    assert "a variant folder the study does not declare" in gate(copy).lines[0]
    (copy / "variants" / "extra").rmdir()
    (copy / "variants" / "fp8" / "tokenizer.py").write_text("x = 1\n")
    assert "is not among the files the verdicts were made with" in gate(copy).lines[0]


def _lmeval_folder(tmp_path):
    """Two variants' lmeval.json (the files lm_eval.runs is read from), and a stand-in summary holding them."""
    from quantgate.io.fileio import atomic_write_json
    from quantgate.lmeval.run import RESULT
    from quantgate.schema.lmeval import LmEvalRun

    runs = {}
    for name, acc in (("bf16", 0.5), ("fp8", 0.40625)):
        run = LmEvalRun(variant=f"variants/{name}", variant_fingerprint="f" * 64, backend="transformers",
                        tasks=["t"], limit=32, lm_eval_version="0.4.9", samples={},
                        results={"t": {"exact_match,strict-match": {"value": acc, "stderr": 0.05,
                                                                    "higher_is_better": True, "n": 32}}})
        atomic_write_json(tmp_path / "lmeval" / name / RESULT, run.model_dump())
        runs[name] = run
    st = SimpleNamespace(variants=[SimpleNamespace(name=n) for n in runs])
    return st, runs


@pytest.mark.parametrize("edit", [
    lambda r: r["fp8"].results["t"]["exact_match,strict-match"].__setattr__("value", 0.96875),
    lambda r: setattr(r["fp8"], "lm_eval_version", "0.4.10"),
    lambda r: setattr(r["fp8"], "limit", 64),
    lambda r: setattr(r["fp8"], "variant_fingerprint", "0" * 64),
    lambda r: r.pop("fp8"),
])
def test_lm_eval_runs_are_the_lmeval_files(tmp_path, edit):
    from quantgate.gate.check import _Invalid, _same_lmeval_runs

    st, runs = _lmeval_folder(tmp_path)
    rep = SimpleNamespace(lm_eval=SimpleNamespace(runs={k: v.model_copy(deep=True) for k, v in runs.items()}))
    _same_lmeval_runs(rep, st, tmp_path, "summary.json")  # untouched: equal
    edit(rep.lm_eval.runs)
    with pytest.raises(_Invalid, match=r"lm_eval\.runs\.fp8.* in summary\.json but .* in the lm-eval files"):
        _same_lmeval_runs(rep, st, tmp_path, "summary.json")


@pytest.mark.parametrize("declared,env,problem", [
    (["--corrupt", "0.5"], {}, None),
    (["--corrupt", "0.6"], {}, "server_args"),
    (["--kv-cache-dtype", "fp8"], {}, "server_args"),
    (["--corrupt", "0.5"], {"VLLM_X": "1"}, "server_env"),
])
def test_a_variants_server_args_and_env_are_what_its_run_served(declared, env, problem):
    from quantgate.gate.check import _served_as_declared

    st = SimpleNamespace(variants=[SimpleNamespace(name="bf16", server_args=[], server_env={}),
                                   SimpleNamespace(name="bad", server_args=declared, server_env=env)])
    # what the run recorded: the backend's own flags first, then the variant's, then a profiler's
    run = SimpleNamespace(server_args=["--own", "1", "--corrupt", "0.5", "--profiler-config", "{}"], server_env={})
    got = _served_as_declared(st, "bad", run, "summary.json")
    if problem is None:
        assert got == []
    else:
        assert len(got) == 1 and f"study.variants.1.{problem}" in got[0] and "runs/bad/run.json served" in got[0]
