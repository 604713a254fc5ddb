"""``servers: auto`` (the default) on the stand-in vLLM: the study's memory plan of its servers on the one GPU they
inherit decides whether their starts overlap — all together when the plan says they fit, the ones that fit first
and the rest queued when they do not, one at a time when no two fit — and the plan is stated in the study's log.
The GPU's size is the only thing stood in for (``overlap.gpu_memory_bytes``); quantize is replaced by a folder the
stand-in accepts, the tiny Qwen3.5 fixture is the checkpoint the plan reads."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import pytest
import yaml

from quantgate.study.overlap import GIB, SERVER_ALLOWANCE, kv_bytes

FAKE_VLLM = f"{shlex.quote(sys.executable)} -m tests.support.fake_vllm"
START_S = 1.5
KV = 1 << 30  # each server's --kv-cache-memory-bytes


@pytest.fixture
def fake_quantize(monkeypatch):
    import quantgate.quantize as qz
    from tests.support.stub_study import fake_quantize as stub_quantize

    def quantize(model, recipe, out, **kw):
        result = stub_quantize(model, recipe, out, **kw)
        (Path(out) / "config.json").write_text("{}")
        return result

    monkeypatch.setattr(qz, "quantize", quantize)
    monkeypatch.setenv("FAKE_VLLM_START_S", str(START_S))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)


def _study(tmp_path: Path, model: Path) -> Path:
    body = {
        "name": "overlap", "model": str(model),
        "pages": {"synth": {"n": 4, "profile": "simple", "calibration_fraction": 0.0}},
        "variants": [{"name": "bf16", "recipe": "bf16"}, {"name": "fp8", "recipe": "fp8-dynamic"},
                     {"name": "fp8b", "recipe": "fp8-dynamic", "server_args": ["--max-num-seqs", "8"]}],
        "backend": {"name": "vllm", "vllm_cmd": FAKE_VLLM, "compile_cache": "none", "startup_timeout_s": 60,
                    "extra_args": ["--kv-cache-memory-bytes", str(KV)]},
        "concurrency": [1], "max_tokens": 8, "metrics": ["ned"], "min_pages": 2, "resamples": 1000,
    }
    f = tmp_path / "study.yaml"
    f.write_text(yaml.safe_dump(body))
    return f


def _run(tmp_path, model, monkeypatch, gpu_bytes):
    import quantgate.study.overlap as ov
    from quantgate.study import run_study

    monkeypatch.setattr(ov, "gpu_memory_bytes", lambda: gpu_bytes)
    out, lines = tmp_path / "out", []
    run_study(_study(tmp_path, model), out, log=lines.append, stop_after="score")
    t = [json.loads(x) for x in (out / "timings.jsonl").read_text().splitlines()]
    starts = {r["variant"]: (r["start"], r["start"] + r["wall_s"]) for r in t if r["stage"] == "server_start"}
    pages = {r["variant"]: (r["start"], r["start"] + r["wall_s"]) for r in t if r["stage"] == "pages_run"}
    runs = {v: json.loads((out / "runs" / v / "run.json").read_text()) for v in starts}
    return starts, pages, runs, lines


def test_servers_that_fit_start_together_with_their_share_of_the_gpu(tmp_path, tiny_models, monkeypatch,
                                                                      fake_quantize):
    starts, pages, runs, lines = _run(tmp_path, tiny_models["qwen3_5"], monkeypatch, 80 * GIB)
    assert max(a for a, _ in starts.values()) < min(b for _, b in starts.values())  # every start overlapped
    assert min(a for a, _ in pages.values()) >= max(b for _, b in starts.values()) - 0.01  # measured after them
    assert any("all 3 servers fit on the GPU together" in x for x in lines)
    for run in runs.values():
        assert run["layout"]["servers"] == "all_at_once" and run["layout"]["placement"]["wave"] == 0
        assert any(n.startswith("speed measured with the study's other servers of this wave up and idle")
                   for n in run["notes"])  # the idle-neighbour check, beside the speed
        cmd = run["server_command"]
        share = float(cmd[cmd.index("--gpu-memory-utilization") + 1])
        # weights (a few MB) + 1 GiB KV + the allowance, rounded up to a hundredth of the GPU
        assert share == pytest.approx((KV + SERVER_ALLOWANCE) / (80 * GIB), abs=0.011) and share >= 0.06


def test_what_does_not_fit_queues_for_a_later_wave(tmp_path, tiny_models, monkeypatch, fake_quantize):
    # two servers (~5 GiB each) fit in 12 GiB, the third does not: it starts after the first two are done
    starts, pages, runs, lines = _run(tmp_path, tiny_models["qwen3_5"], monkeypatch, 12 * GIB)
    assert [runs[v]["layout"]["placement"]["wave"] for v in ("bf16", "fp8", "fp8b")] == [0, 0, 1]
    assert starts["fp8"][0] < starts["bf16"][1]  # the first wave's starts overlap
    assert starts["fp8b"][0] >= max(pages["bf16"][1], pages["fp8"][1]) - 0.01  # queued behind them
    assert any("do not fit at once: 2 waves (bf16, fp8 | fp8b)" in x for x in lines)


def test_no_two_fit_one_at_a_time(tmp_path, tiny_models, monkeypatch, fake_quantize):
    starts, pages, runs, lines = _run(tmp_path, tiny_models["qwen3_5"], monkeypatch, 8 * GIB)
    assert all(run["layout"]["servers"] == "one_at_a_time" for run in runs.values())
    assert not any("up and idle" in n for run in runs.values() for n in run["notes"])
    assert starts["fp8"][0] >= pages["bf16"][1] - 0.01 and starts["fp8b"][0] >= pages["fp8"][1] - 0.01
    assert any("no two servers fit on the GPU together" in x for x in lines)


def test_without_a_gpu_to_measure_the_servers_go_one_at_a_time(tmp_path, tiny_models, monkeypatch, fake_quantize):
    starts, pages, runs, lines = _run(tmp_path, tiny_models["qwen3_5"], monkeypatch, None)
    assert all(run["layout"]["servers"] == "one_at_a_time" for run in runs.values())
    assert "--gpu-memory-utilization" not in runs["bf16"]["server_command"]
    assert any("no GPU visible to measure" in x for x in lines)


def test_the_kv_estimate_reads_the_attention_layers_of_the_config(tmp_path):
    cfg = {"text_config": {"num_hidden_layers": 4, "layer_types": ["linear_attention"] * 3 + ["full_attention"],
                           "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 64,
                           "linear_num_value_heads": 16, "linear_key_head_dim": 32, "linear_value_head_dim": 32}}
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    b, why = kv_bytes(tmp_path, [], 1000, 8)
    # one full-attention layer: K and V, 2 heads x 64, bf16, for 8 x 1000 tokens; three layers of fp32 state per sequence
    assert b == 2 * 1 * 2 * 64 * 2 * 8000 + 3 * 16 * 32 * 32 * 4 * 8 and "8 sequences" in why
    assert kv_bytes(tmp_path, ["--kv-cache-memory-bytes=123"], 1000, 8) == (123, "--kv-cache-memory-bytes")
