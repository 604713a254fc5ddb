"""Placement through a whole study: variants with their own tensor_parallel_size placed on a GPU pool in waves
(served by the stand-in vLLM CLI, ``tests.support.fake_vllm``: no GPU), the placement and parallel settings in
run.json and part of the run's identity, and a TP=2 candidate judged beside BF16's noise floor
measured at TP=2 (a layout twin), or its verdict saying the floor was not measured in that layout."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import pytest
import yaml

from tests.support.paths import REPO

FAKE_VLLM = f"{shlex.quote(sys.executable)} -m tests.support.fake_vllm"


@pytest.fixture
def fake_quantize(monkeypatch):
    import quantgate.quantize as qz
    from quantgate.io.fileio import sha256_file
    from quantgate.schema.variant import FileInfo
    from tests.support.stub_study import fake_quantize as stand_in

    def quantize(model, recipe, out, **kw):
        result = stand_in(model, recipe, out, **kw)
        if not result.reused:  # what the stand-in vLLM is started on, listed in the manifest like every file
            (Path(out) / "config.json").write_text("{}")
            files = {**result.manifest.files,
                     "config.json": FileInfo(sha256=sha256_file(Path(out) / "config.json"), bytes=2)}
            result = result.model_copy(update={"manifest": result.manifest.model_copy(update={"files": files})})
            (Path(out) / "quantgate.json").write_text(result.manifest.model_dump_json())
        return result

    monkeypatch.setattr(qz, "quantize", quantize)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)


def _study(tmp_path: Path, variants: list[dict], **over) -> Path:
    # the bundled reader: its heads for the TP check, its modules for the recipes planned before any quantize
    model = REPO / "quantgate" / "assets" / "reader"
    body = {"name": "tp", "model": str(model), "variants": variants, "servers": "all_at_once", "gpus": [0, 1],
            "pages": {"synth": {"n": 4, "profile": "simple", "calibration_fraction": 0.0}},
            "backend": {"name": "vllm", "vllm_cmd": FAKE_VLLM, "compile_cache": "none", "startup_timeout_s": 60},
            "concurrency": [1, 2], "max_tokens": 8, "metrics": ["ned"], "min_pages": 2, "resamples": 1000,
            # the stand-in vLLM answers no page's text: its baseline "reads" nothing, which is what a placement test
            # needs (the floor would call it unfit), and 4 single-page documents decide nothing without a
            # declared worst page damage and fewer documents
            "baseline_floor": {"ned": 1.0}, "worst_page_damage": {"ned": 0.012}, "min_documents": 2, **over}  # 1.2 margins: 2 pages rule it out
    f = tmp_path / "study.yaml"
    f.write_text(yaml.safe_dump(body))
    return f


VARIANTS = [{"name": "bf16", "recipe": "bf16"},
            {"name": "fp8-tp2", "recipe": "fp8-dynamic", "backend": {"tensor_parallel_size": 2}},
            {"name": "bf16-tp2", "recipe": "bf16", "backend": {"tensor_parallel_size": 2}}]


def _run(out: Path, name: str) -> dict:
    return json.loads((out / "runs" / name / "run.json").read_text())


def _timings(out: Path) -> list[dict]:
    return [json.loads(x) for x in (out / "timings.jsonl").read_text().splitlines()]


def test_tp_variants_are_placed_in_waves_recorded_and_judged_beside_the_noise_of_their_layout(tmp_path, fake_quantize):
    from quantgate.gate import gate
    from quantgate.study import run_study

    out = tmp_path / "out"
    rep = run_study(_study(tmp_path, VARIANTS), out, log=lambda s: None)
    want = {"bf16": ("0", [0], 0, 1), "fp8-tp2": ("0,1", [0, 1], 1, 2), "bf16-tp2": ("0,1", [0, 1], 2, 2)}
    for name, (env, gpus, wave, tp) in want.items():
        run = _run(out, name)
        placed = run["layout"]["placement"]
        assert (placed["gpus"], placed["wave"], placed["parallel"]["tensor_parallel_size"]) == (gpus, wave, tp)
        assert run["layout"]["gpu"] == env and run["engine"]["env"]["CUDA_VISIBLE_DEVICES"] == env  # reached the server
        cmd = run["server_command"]
        assert cmd[cmd.index("--tensor-parallel-size") + 1] == str(tp)
    # GPU 0 is bf16's until its pages are done: the TP=2 servers (each needing both GPUs) queue, one wave each
    t = _timings(out)
    start = {r["variant"]: r["start"] for r in t if r["stage"] == "server_start"}
    pages_end = {v: max(r["start"] + r["wall_s"] for r in t if r["stage"] == "pages_run" and r["variant"] == v)
                 for v in want}
    assert start["fp8-tp2"] >= pages_end["bf16"] - 0.01 and start["bf16-tp2"] >= pages_end["fp8-tp2"] - 0.01

    verdicts = {v["variant"]: v for v in rep.summary.model_dump()["verdicts"]}
    fp8, twin = verdicts["fp8-tp2"], verdicts["bf16-tp2"]
    assert fp8["noise_layout"] == "measured" and "bf16-tp2 (bf16 at TP=2 × DP=1) against bf16" in fp8["message"]
    # the twin itself has no other BF16 in its layout: the baseline's floor, and the verdict says so
    assert twin["noise_layout"] == "not_measured"
    assert "not in this variant's layout (TP=2 × DP=1)" in twin["message"] and "tensor_parallel_size: 2" in twin["message"]
    code, lines = gate(out)
    assert code == 0, lines  # the gate remakes the same rows, noise_layout and message included

    # without the twin the TP=2 candidate's verdict says its floor was not measured in its layout
    out2 = tmp_path / "out2"
    rep2 = run_study(_study(tmp_path, VARIANTS[:2]), out2, log=lambda s: None)
    v = next(r for r in rep2.summary.model_dump()["verdicts"] if r["variant"] == "fp8-tp2")
    assert v["noise_layout"] == "not_measured" and "measured with bf16 at TP=1 × DP=1" in v["message"]
    # the baseline-layout rows are as before: no noise_layout key
    summ = json.loads((out2 / "summary.json").read_text())
    assert all("noise_layout" in r for r in summ["verdicts"])
    out3 = tmp_path / "out3"
    rep3 = run_study(_study(tmp_path, [VARIANTS[0], {"name": "fp8", "recipe": "fp8-dynamic"}]), out3, log=lambda s: None)
    assert all("noise_layout" not in r for r in rep3.summary.model_dump()["verdicts"])
    assert all("noise_layout" not in r for r in json.loads((out3 / "summary.json").read_text())["verdicts"])


def test_a_rerun_with_another_placement_re_serves_only_what_moved(tmp_path, fake_quantize):
    from quantgate.study import run_study

    out = tmp_path / "out"
    run_study(_study(tmp_path, VARIANTS[:2]), out, log=lambda s: None, stop_after="serve")
    first = {n: _run(out, n)["server_command"] for n in ("bf16", "fp8-tp2")}
    # same study again: everything recorded, no server started
    run_study(_study(tmp_path, VARIANTS[:2]), out, log=lambda s: None, stop_after="serve")
    assert len([r for r in _timings(out) if r["stage"] == "server_start"]) == 2
    # the pool in the other order: bf16 moves to GPU 1 (its records are discarded and it is served again);
    # fp8-tp2 keeps GPUs 0 and 1 and resumes with nothing to send
    run_study(_study(tmp_path, VARIANTS[:2], gpus=[1, 0]), out, log=lambda s: None, stop_after="serve")
    starts = [r["variant"] for r in _timings(out) if r["stage"] == "server_start"]
    assert starts[2:] == ["bf16"]
    assert _run(out, "bf16")["layout"]["placement"]["gpus"] == [1] and _run(out, "bf16")["engine"]["env"][
        "CUDA_VISIBLE_DEVICES"] == "1"
    assert _run(out, "fp8-tp2")["server_command"] == first["fp8-tp2"]
    # another tensor_parallel_size is another run too
    other = [VARIANTS[0], {**VARIANTS[1], "backend": {"tensor_parallel_size": 1}}]
    run_study(_study(tmp_path, other, gpus=[1, 0]), out, log=lambda s: None, stop_after="serve")
    starts = [r["variant"] for r in _timings(out) if r["stage"] == "server_start"]
    assert starts[3:] == ["fp8-tp2"] and _run(out, "fp8-tp2")["layout"]["placement"]["parallel"][
        "tensor_parallel_size"] == 1
