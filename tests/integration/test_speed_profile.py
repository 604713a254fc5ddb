"""`quantgate speed-profile`'s GPU run as a library function — what it refuses before a
server starts, and one run against the stand-in vLLM CLI (tests.support.fake_vllm: it mounts vLLM's
/start_profile and /stop_profile and writes a small worker trace where vLLM would)."""

import gzip
import json
import shlex
import sys

import pytest

from quantgate.errors import InputError
from quantgate.schema.speed import load_step_profile
from quantgate.speed.profile import speed_profile
from tests.support.paths import REPO

FAKE_VLLM = f"{shlex.quote(sys.executable)} -m tests.support.fake_vllm"
MANIFEST = REPO / "lab" / "2026-11-30-h200-serving-options" / "q4b-fp8-all.quantgate.json.gz"


@pytest.fixture
def variant(tmp_path):
    """A variant folder the fake vLLM can serve: config, weights file, and a real quantgate.json (the committed
    4B fp8-all manifest, whose plan the profile carries)."""
    d = tmp_path / "q4b-fp8-all"
    d.mkdir()
    (d / "config.json").write_text(json.dumps({"model_type": "llama", "architectures": ["LlamaForCausalLM"]}))
    (d / "model.safetensors").write_bytes(b"\0" * 16)
    (d / "quantgate.json").write_bytes(gzip.decompress(MANIFEST.read_bytes()))
    return d


def test_what_is_refused_before_a_server_starts(variant, tmp_path, monkeypatch, synth_pageset):
    monkeypatch.delenv("QUANTGATE_VLLM", raising=False)
    kw = {"pages": synth_pageset}
    with pytest.raises(InputError, match="vLLM backend needs its command: pass --vllm-cmd or set QUANTGATE_VLLM"):
        speed_profile(variant, [1], tmp_path / "o", **kw)
    with pytest.raises(InputError, match="'/nonexistent/vllm' not found"):
        speed_profile(variant, [1], tmp_path / "o", "/nonexistent/vllm serve", **kw)
    for levels, msg in (([], "one or more"), ([1, 1], "each level once"), ([0], "at least 1"), ([True], "whole")):
        with pytest.raises(InputError, match=msg):
            speed_profile(variant, levels, tmp_path / "o", FAKE_VLLM, **kw)
    with pytest.raises(InputError, match="--max-tokens 40: .* at least 56"):
        speed_profile(variant, [1], tmp_path / "o", FAKE_VLLM, max_tokens=40, **kw)
    with pytest.raises(InputError, match="sets vLLM's profiler itself"):
        speed_profile(variant, [1], tmp_path / "o", FAKE_VLLM, server_args=["--profiler-config={}"], **kw)
    (variant / "quantgate.json").unlink()
    with pytest.raises(InputError, match="quantgate.json: no such file; speed-profile reads the variant's plan"):
        speed_profile(variant, [1], tmp_path / "o", FAKE_VLLM, **kw)
    assert not (tmp_path / "o").exists()  # nothing written by a refused run


def test_a_run_against_the_stand_in_vllm_writes_one_step_profile_per_level(variant, tmp_path, synth_pageset,
                                                                            monkeypatch):
    monkeypatch.setenv("FAKE_VLLM_TOKEN_S", "0.02")  # the c requests must be decoding together, as on vLLM
    out = tmp_path / "prof"
    got = speed_profile(variant, [1, 2], out, FAKE_VLLM, pages=synth_pageset, steps=6, delay=2, max_tokens=24, compile_cache=str(tmp_path / "cache"),
                        log=lambda s: None)
    assert [p.concurrency for p in got] == [1, 2]
    for p in got:
        # the stand-in's trace: `max_iterations` decode steps of five kernels (one GEMM)
        assert p.variant == "q4b-fp8-all" and p.decode_steps == 6 and len(p.step) == 5
        assert (out / p.source).is_file() and load_step_profile(out / f"c{p.concurrency}.profile.json") == p
        assert len(p.plan) == 347 - 96 - 2  # the manifest's plan without vision and projector rows
    assert len(list((out / "trace").glob("*.pt.trace.json.gz"))) == 2
    # a level already written is read back, not profiled again: no vLLM command is needed for it
    assert speed_profile(variant, [2], out, "/nonexistent/vllm", pages=synth_pageset) == [got[1]]


def test_the_cli_verb_profiles_each_variant_and_keeps_the_profiles_when_no_table_can_be_built(
        variant, tmp_path, synth_pageset, monkeypatch, capsys):
    from quantgate.cli import main

    monkeypatch.setenv("FAKE_VLLM_TOKEN_S", "0.02")
    out = tmp_path / "cost"
    base = ["speed-profile", "--pages", str(synth_pageset), "--concurrency", "1", "--vllm-cmd", FAKE_VLLM,
            "--steps", "6", "--delay", "2", "--max-tokens", "24", "--compile-cache", str(tmp_path / "cache"),
            "-o", str(out)]
    # two folders of one variant name would write one profile folder: refused before any server starts
    assert main([*base[:1], str(variant), str(variant), *base[1:]]) == 64
    assert "two have one name" in capsys.readouterr().err and not out.exists()
    # the stand-in's step has one GEMM, the plan 153: the table is refused, the measured profile kept
    assert main([*base[:1], str(variant), *base[1:]]) == 65  # bad data for a table, not a regression (1)
    err = capsys.readouterr().err
    assert f"profiles kept under {out}; no cost table" in err
    assert load_step_profile(out / "q4b-fp8-all" / "c1.profile.json").decode_steps == 6
    assert not (out / "cost-table.json").exists()
