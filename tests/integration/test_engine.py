"""The engine settings every run records (parsed from vLLM 0.26 start-up logs: committed real
logs and excerpts written from vLLM's own line formats), and the compile cache a study's vLLM servers
share (cold, then warm), with a stand-in vLLM CLI (``tests.support.fake_vllm``) serving the stub."""

import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from quantgate.errors import InputError
from quantgate.serve.backends import make_backend
from quantgate.serve.backends.vllm import compile_start_from_log, engine_from_log
from quantgate.serve.run import ServeHooks, ServeOptions
from tests.support.paths import DATA as TEST_DATA
from tests.support.paths import REPO

DATA = TEST_DATA / "vllm"
GPU_RESULTS = "2026-11-29-h200-4b-speed/session.tar.gz:"  # that session's files, packed: read in place by _log
FAKE_VLLM = f"{shlex.quote(sys.executable)} -m tests.support.fake_vllm"


def test_default_settings_cold_start():
    e = engine_from_log((DATA / "default-cold.log").read_text())
    assert (e.compilation, e.cudagraph_mode, e.cudagraph_mode_effective) == ("VLLM_COMPILE", "FULL_AND_PIECEWISE", None)
    assert len(e.cudagraph_capture_sizes) == 51 and e.cudagraph_capture_sizes[:5] == [1, 2, 4, 8, 16]
    assert e.cudagraph_capture_sizes[-2:] == [496, 512]
    assert (e.enforce_eager, e.prefix_caching, e.kv_cache_dtype, e.speculative, e.dtype) == \
        (False, False, "auto", None, "bfloat16")
    assert (e.max_num_batched_tokens, e.max_num_seqs, e.async_scheduling, e.attention_backend) == \
        (8192, None, True, "FLASH_ATTN")
    assert e.compile_start == "cold" and e.compile_s == 112.61 and e.init_engine_s == 139.75 and e.graph_capture_s == 13
    assert e.compile_cache_dir.startswith("/tmp/qgwork/cache/vllm/torch_compile_cache/") and \
        e.compile_cache_dir.endswith("/rank_0_0/backbone")


def test_warm_start_with_fewer_sequences():
    e = engine_from_log((DATA / "max-seqs-64-warm.log").read_text())
    assert e.compile_start == "warm" and e.compile_s == 4.12 and e.init_engine_s == 24.31
    assert e.max_num_seqs == 64 and e.cudagraph_capture_sizes == [1, 2, 4] + list(range(8, 129, 8))


def test_real_mode0_and_eager_logs_from_the_h200():
    """The committed vLLM 0.26 logs of the previous GPU period: mode 0 + decode graphs, and eager."""
    from tests.integration.test_kernels import _log

    sweep = engine_from_log(_log(f"{GPU_RESULTS}speed/sweep-bf16/server.log"))
    assert (sweep.compilation, sweep.cudagraph_mode, sweep.enforce_eager) == ("NONE", "FULL_DECODE_ONLY", False)
    assert sweep.cudagraph_capture_sizes == [1, 2, 4, 8, 16, 24, 32, 40, 48, 56, 64]
    assert sweep.compile_start == "none" and sweep.compile_s is None and sweep.init_engine_s == 98.69
    assert (sweep.graph_capture_s, sweep.prefix_caching, sweep.max_num_batched_tokens) == (4, False, 8192)
    eager = engine_from_log(_log(f"{GPU_RESULTS}reader-vllm-bf16/server.log"))
    assert (eager.compilation, eager.cudagraph_mode, eager.enforce_eager) == ("NONE", "NONE", True)
    assert eager.cudagraph_capture_sizes == [] and eager.init_engine_s == 230.67 and eager.graph_capture_s is None
    fp8 = engine_from_log(_log(f"{GPU_RESULTS}reader-vllm-fp8/server.log"))
    assert fp8.init_engine_s == 3.38 and fp8.kv_cache_dtype == "auto"


def test_the_wait_after_the_profiling_run_from_committed_logs():
    """Seconds between vLLM's "Initial profiling/warmup run took" line and its KV-cache line, read
    by hand from the committed logs: the four servers of 2026-11-30b's one-GPU parallel study (the machine's first,
    which built FlashInfer's sampling module) 122-123 s; the sequential study after it 8 s for its first start and
    1 s for the rest; 2026-12-02 after a prebuild 8 / 1 / 1 s; an eager start logs no warm-up line: None."""
    from quantgate.serve.backends.vllm import profile_wait_from_log
    from tests.integration.test_kernels import _log

    tar = "2026-11-30-h200-parallel-studies/parallel_studies.tar.xz:gpu1/studies/"
    waits = {s: [profile_wait_from_log(_log(f"{tar}{s}/runs/{v}/server.log"))
                 for v in ("bf16", "fp8-dynamic", "mixed", "nvfp4")] for s in ("a_parallel_1gpu", "b_sequential_1gpu")}
    assert waits == {"a_parallel_1gpu": [122.0, 122.0, 122.0, 123.0], "b_sequential_1gpu": [8.0, 1.0, 1.0, 1.0]}
    runs = "2026-12-02-h200-4b-study/session.tar.xz:study/runs/"
    assert [engine_from_log(_log(f"{runs}{v}/server.log")).profile_wait_s
            for v in ("bf16", "fp8-all", "w4a16-all")] == [8.0, 1.0, 1.0]
    assert engine_from_log(_log(f"{GPU_RESULTS}reader-vllm-bf16/server.log")).profile_wait_s is None
    # the KV-cache line that counts is the one after the last warm-up line; stamps that run backwards say nothing
    line = "(EngineCore pid=9) INFO {} [x.py:1] {}"
    text = "\n".join([line.format("12-31 23:59:50", "Initial profiling/warmup run took 3.1 s"),
                      line.format("01-01 00:00:05", "GPU KV cache size: 1,000 tokens")])
    assert profile_wait_from_log(text) is None
    text = "\n".join([line.format("11-30 23:59:50", "Initial profiling/warmup run took 3.1 s"),
                      line.format("12-01 00:00:05", "Initial free memory 120 GiB")])
    assert profile_wait_from_log(text) == 15.0


def test_options_downgrades_and_cache_states_from_excerpts():
    init = ("(EngineCore pid=9) INFO 11-30 09:00:01 [core.py:116] Initializing a V1 LLM engine (v0.26.0) with config: "
            "model='/m', speculative_config=SpeculativeConfig(method='ngram', model=None, num_spec_tokens=3), "
            "tokenizer='/m', dtype=torch.bfloat16, enforce_eager=False, kv_cache_dtype=fp8, enable_prefix_caching=True, "
            "compilation_config={'mode': <CompilationMode.VLLM_COMPILE: 3>, 'cudagraph_mode': "
            "<CUDAGraphMode.FULL_AND_PIECEWISE: (2, 1)>, 'cudagraph_capture_sizes': [4, 8, 12], "
            "'max_cudagraph_capture_size': 12}, kernel_config=KernelConfig(linear_backend='auto')")
    log = "\n".join([
        "(APIServer pid=8) WARNING 11-30 09:00:00 [vllm.py:1077] Async scheduling not supported with ngram-based "
        "speculative decoding and will be disabled.",
        "(APIServer pid=8) INFO 11-30 09:00:00 [vllm.py:1109] Asynchronous scheduling is disabled.", init,
        "(EngineCore pid=9) WARNING 11-30 09:00:30 [compilation.py:1383] CUDAGraphMode.FULL_AND_PIECEWISE is not "
        "supported with TRITON_ATTN backend (support: AttentionCGSupport.NEVER); setting cudagraph_mode=PIECEWISE "
        "because attention is not compatible with CUDA graphs.",
        "(EngineCore pid=9) INFO 11-30 09:00:20 [decorators.py:322] Compiling model again due to a load failure from "
        "/c/torch_aot_compile/ab/rank_0_0/model, reason: bad magic",
        "(EngineCore pid=9) INFO 11-30 09:00:50 [decorators.py:675] torch.compile and initial profiling/warmup run "
        "together took 61.50 s in total"])
    e = engine_from_log(log)
    assert e.speculative == "SpeculativeConfig(method='ngram', model=None, num_spec_tokens=3)"
    assert (e.kv_cache_dtype, e.prefix_caching, e.async_scheduling) == ("fp8", True, False)
    assert (e.cudagraph_mode, e.cudagraph_mode_effective, e.cudagraph_capture_sizes) == \
        ("FULL_AND_PIECEWISE", "PIECEWISE", [4, 8, 12])
    assert e.compile_start == "cold" and e.compile_s == 61.5  # an unusable AOT artifact is a cold start
    assert compile_start_from_log("… vLLM's torch.compile cache is disabled.\nCompiling a graph for compile range "
                                  "(1, 8192) takes 3.0 s", "VLLM_COMPILE") == "uncached"
    assert compile_start_from_log("nothing about compiling", None) is None
    assert engine_from_log("no vLLM here").model_dump(exclude_none=True) == {"env": {}}


def test_transformers_settings_are_what_it_was_started_with():
    b = make_backend("transformers", device="cpu", extra_args=["--dtype", "float32", "--compile"])
    e = b.engine_settings("")
    assert (e.device, e.continuous_batching, e.dtype, e.compilation) == ("cpu", False, "float32", "torch.compile")
    e = make_backend("transformers", continuous_batching=True, extra_args=["--compile", "--no-compile"]).engine_settings("")
    assert (e.continuous_batching, e.dtype, e.compilation) == (True, "auto", "none")


# --- the compile cache, end to end with the stand-in vLLM ----------------------------------------

@pytest.fixture(scope="module")
def pages(tmp_path_factory):
    from quantgate.heldout.synth import synth_pages

    out = tmp_path_factory.mktemp("engine") / "pages"
    synth_pages(out, 3, seed=5, profile="simple", calibration_fraction=0.0)
    return out


def _variant(path: Path) -> Path:
    path.mkdir(parents=True)
    (path / "config.json").write_text("{}")
    (path / "model.safetensors").write_bytes(b"\0" * 8)
    return path


def test_vllm_cache_is_cold_then_warm_and_recorded(pages, tmp_path, monkeypatch):
    from quantgate.serve import serve_variant

    monkeypatch.delenv("TRITON_CACHE_DIR", raising=False)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    variant = _variant(tmp_path / "bf16")
    cache = tmp_path / "cache"

    def run(name, **opts):
        b = make_backend("vllm", vllm_cmd=FAKE_VLLM, compile_cache=str(cache), startup_timeout_s=60, **opts)
        m = serve_variant(variant, pages, b, tmp_path / name, ServeOptions(concurrency=[1], max_tokens=8), hooks=ServeHooks(log=lambda s: None))
        assert json.loads((tmp_path / name / "run.json").read_text())["engine"] == m.engine.model_dump()
        return m.engine

    first, second = run("first"), run("second")
    assert (first.compile_start, second.compile_start) == ("cold", "warm")
    assert first.env == {"CUDA_VISIBLE_DEVICES": "0", "VLLM_CACHE_ROOT": str(cache.resolve()),
                         "TRITON_CACHE_DIR": str(cache.resolve() / "triton")}
    assert first.compile_cache_dir == second.compile_cache_dir and first.compile_cache_dir.startswith(str(cache.resolve()))
    assert first.start_s > 0.2 and second.start_s > 0.2  # the stand-in sleeps 0.2 s before it listens
    assert (first.compilation, first.cudagraph_mode, len(first.cudagraph_capture_sizes)) == \
        ("VLLM_COMPILE", "FULL_AND_PIECEWISE", 51)
    # other settings are another key: cold again, and a rerun of a finished run keeps what its start recorded
    other = run("other", extra_args=["--max-num-seqs", "64"])
    assert other.compile_start == "cold" and other.max_num_seqs == 64 and len(other.cudagraph_capture_sizes) == 19
    assert run("other", extra_args=["--max-num-seqs", "64"]) == other
    off = make_backend("vllm", vllm_cmd=FAKE_VLLM, compile_cache="none").server(variant, tmp_path / "log")
    assert off.env == {"VLLM_DISABLE_COMPILE_CACHE": "1"}


def test_serve_compile_cache_flag_and_a_relative_folder(pages, tmp_path):
    variant = _variant(tmp_path / "v")
    cmd = [sys.executable, "-m", "quantgate", "serve", str(variant), "--backend", "vllm", "--vllm-cmd", FAKE_VLLM,
           "--compile-cache", "rel-cache", "--pages", str(pages), "--concurrency", "1", "--max-tokens", "8",
           "-o", str(tmp_path / "run")]
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp_path, timeout=300,
                       env={**__import__("os").environ, "PYTHONPATH": str(REPO)})
    assert r.returncode == 0, r.stderr[-2000:]
    engine = json.loads((tmp_path / "run" / "run.json").read_text())["engine"]
    assert engine["env"]["VLLM_CACHE_ROOT"] == str((tmp_path / "rel-cache").resolve())  # absolute, as vLLM needs
    assert engine["compile_start"] == "cold" and (tmp_path / "rel-cache" / "torch_compile_cache").is_dir()


def test_a_compile_cache_that_is_a_file_is_one_clear_error(tmp_path):
    (tmp_path / "f").write_text("x")
    b = make_backend("vllm", vllm_cmd=FAKE_VLLM, compile_cache=str(tmp_path / "f" / "sub"))
    with pytest.raises(InputError, match="compile cache .*--compile-cache"):
        b.server(tmp_path, tmp_path / "log")


def test_study_compile_cache_defaults_to_the_machine_cache(tmp_path, monkeypatch):
    from quantgate.serve.backends.derive import study_backend_specs

    vllm = study_backend_specs()["vllm"]
    out, base = tmp_path / "out", tmp_path / "studies"
    # shared by every study on the machine (vLLM keys it by content), so a second study starts warm
    monkeypatch.setenv("QUANTGATE_CACHE_DIR", str(tmp_path / "machine"))
    assert vllm().resolved(base, out).compile_cache == str((tmp_path / "machine" / "vllm").resolve())
    assert vllm(compile_cache="c").resolved(base, out).compile_cache == str((base / "c").resolve())
    assert vllm(compile_cache="none").resolved(base, out).compile_cache == "none"
    tf = study_backend_specs()["transformers"]()
    assert tf.resolved(base, out) is tf


def test_vllm_runs_with_its_production_defaults_unless_told(tmp_path):
    """No compilation override: vLLM's own torch.compile + CUDA graphs, as users deploy it."""
    cmd = make_backend("vllm", vllm_cmd="vllm").server(tmp_path, tmp_path / "log").make_command(8000)
    assert not any(a.startswith(("-O", "--optimization-level", "--compilation-config", "-cc", "--enforce-eager"))
                   for a in cmd), cmd


def test_the_wait_after_the_kv_cache_from_the_committed_flashinfer_phases():
    """Measured (2026-12-03, flashinfer_wait.py on the Qwen2.5-VL fixture, eager): an eager start
    samples only after its KV cache is made, so FlashInfer's first build falls between the KV-cache line and the end
    of the warm-up — 93-97 s in each of the four phase-B servers (an empty FlashInfer workspace: one built, three
    waited on its lock; its ninja log: 95.8 s), 1 s for phase A's (the module built); the seven 4B servers of the
    same session's study (torch.compile, started beside each other after the prebuild) 3-11 s, graph capture
    included, and 0-11 s between profiling run and KV cache (122 s in 2026-11-30b's first starts). Read by hand
    from the logs' stamps."""
    from quantgate.serve.backends.vllm import warmup_wait_from_log
    from tests.integration.test_kernels import _log

    day = "2026-12-03-h200-seven-variant-study/"
    phase = {s: warmup_wait_from_log(_log(f"{day}flashinfer-wait/{s}.server.log.gz"))
             for s in ("A-s0", "B-s0", "B-s1", "B-s2", "B-s3")}
    assert phase == {"A-s0": 1.0, "B-s0": 97.0, "B-s1": 96.0, "B-s2": 93.0, "B-s3": 96.0}
    ninja = (REPO / "lab" / "2026-12-03-h200-seven-variant-study" / "flashinfer-wait" / "B-sampling.ninja_log")
    link_end_ms = max(int(x.split("\t")[1]) for x in ninja.read_text().splitlines()[1:])
    assert 90_000 < link_end_ms < 100_000  # the build itself: the wait is the build
    study = [engine_from_log(_log(f"{day}session.tar.gz:study/runs/{v}/server.log.gz")) for v in
             ("bf16", "fp8-all", "nvfp4-all", "mixed", "fp8-dynamic", "nvfp4", "w4a16-all-marlin")]
    assert [(e.profile_wait_s, e.warmup_wait_s) for e in study] == [(11.0, 11.0), (11.0, 7.0), (11.0, 11.0),
                                                                     (11.0, 6.0), (1.0, 3.0), (0.0, 3.0), (1.0, 3.0)]
