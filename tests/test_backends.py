"""Backend construction and vLLM log parsing (CPU), plus a real vLLM run behind the gpu marker."""

import os
import shlex
from pathlib import Path

import pytest

from quantgate.errors import InputError
from quantgate.serve.backends import kernels_from_log, make_backend

VLLM_LOG = """INFO 11-29 12:00:01 [api_server.py:1] vLLM API server version 0.26.0
INFO 11-29 12:00:09 [fp8.py:88] Selected CutlassFP8ScaledMMLinearKernel for CompressedTensorsW8A8Fp8
INFO 11-29 12:00:09 [nvfp4.py:41] Using MarlinNvFp4LinearKernel for CompressedTensorsW4A4Fp4
"""


def test_vllm_command_carries_engine_arguments(tmp_path, monkeypatch):
    monkeypatch.setenv("QUANTGATE_VLLM", "python3 -m vllm.entrypoints.cli.main")
    b = make_backend("vllm", tensor_parallel_size=2, max_model_len=8192, gpu_memory_utilization=0.8,
                     extra_args=["--enforce-eager"])
    srv = b.server(tmp_path / "model", tmp_path / "log")
    cmd = srv.make_command(8123)
    assert cmd[:4] == ["python3", "-m", "vllm.entrypoints.cli.main", "serve"]
    joined = shlex.join(cmd)
    for part in ("--port 8123", "--tensor-parallel-size 2", "--max-model-len 8192", "--gpu-memory-utilization 0.8",
                 "--enforce-eager", "--limit-mm-per-prompt"):
        assert part in joined


def test_vllm_without_a_command_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.delenv("QUANTGATE_VLLM", raising=False)
    with pytest.raises(InputError, match="QUANTGATE_VLLM"):
        make_backend("vllm").server(tmp_path, tmp_path / "log")


def test_kernels_parsed_from_the_log():
    k = kernels_from_log(VLLM_LOG)
    assert k == {"CompressedTensorsW8A8Fp8": "CutlassFP8ScaledMMLinearKernel",
                 "CompressedTensorsW4A4Fp4": "MarlinNvFp4LinearKernel"}


def test_openai_backend_needs_an_endpoint():
    with pytest.raises(InputError, match="--endpoint"):
        make_backend("openai")


@pytest.mark.gpu
def test_vllm_serves_a_fixture(tiny_models, synth_pageset, tmp_path):
    """On the H200: QUANTGATE_VLLM must point at vLLM 0.26 (docs/gpu.md)."""
    from quantgate.serve import load_records, serve_variant

    assert os.environ.get("QUANTGATE_VLLM"), "set QUANTGATE_VLLM"
    b = make_backend("vllm", extra_args=["--enforce-eager", "--gdn-prefill-backend", "triton"])
    m = serve_variant(tiny_models["qwen3_5"], synth_pageset, b, tmp_path / "run", concurrency=[1, 4], max_tokens=8,
                      log=lambda s: None)
    recs = load_records(tmp_path / "run")
    assert len(recs) == 2 * m.levels[0].n_requests and all(r.error is None for r in recs)
    assert m.server_version and m.server_version.startswith("vllm")
    assert Path(tmp_path / "run" / "server.log").is_file()


def test_vllm_version_read_from_its_log():
    from quantgate.serve.run import _VLLM_VERSION

    line = "(EngineCore pid=1365) INFO 11-29 20:13:21 [core.py:116] Initializing a V1 LLM engine (v0.26.0) with config"
    m = _VLLM_VERSION.search(line)
    assert m and (m.group(1) or m.group(2)) == "0.26.0"
