"""Issue 20: the GPU scripts' CPU-checkable parts: the kernel classifier on a synthetic torch-profiler trace,
the speed sweep's arguments (vLLM defaults unless --mode0) and its tables from a speed.json, the profile
step's arguments, trace-only mode and weight-read bound."""

import gzip
import importlib.util
import json
import sys
from pathlib import Path

import pytest

GPU = Path(__file__).resolve().parent.parent / "benchmarks" / "gpu"


def _load(name):
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, GPU / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


kc = _load("kernel_classes")
sweep = _load("speed_sweep")
prof = _load("profile_step")


def _x(name, cat, ts, dur):
    return {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": 7, "ts": ts, "dur": dur}


FA3 = "void cutlass::device_kernel<flash::enable_sm90_or_later<flash::FlashAttnFwdSm90<cute::tuple<>>>>(int)"
KERNELS = [  # (name, cat, µs per decode step, expected class)
    (FA3, "kernel", 20.0, "attention"),
    ("nvjet_tst_64x8_64x16_4x1_v_bz_TNT", "kernel", 900.0, "gemm"),
    ("void cutlass::device_kernel<cutlass::gemm::kernel::GemmUniversal<fp8_e4m3>>(Params)", "kernel", 300.0, "gemm"),
    ("void vllm::dynamic_per_token_scaled_fp8_quant_kernel_strided<c10::BFloat16>(float*)", "kernel", 40.0,
     "act_quant"),
    ("fused_recurrent_gated_delta_rule_packed_decode_kernel", "kernel", 60.0, "deltanet"),
    ("void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::ArgMaxOps<float>>>(int)",
     "kernel", 15.0, "sampling"),
    ("triton_poi_fused_add_mul_rsqrt_0", "kernel", 50.0, "elementwise"),
    ("Memcpy DtoD (Device -> Device)", "gpu_memcpy", 5.0, "elementwise"),
    ("mystery_kernel_v2", "kernel", 10.0, "other"),
]


def synthetic_trace() -> dict:
    """Two pure-decode steps and one prefill step, each kernel once per decode step, plus CPU-side noise."""
    ev, ts = [], 0.0
    ev.append(_x("execute_context_1(4052)_generation_0(0)", "user_annotation", ts, 50.0))
    for step in range(2):
        ev.append(_x("execute_context_0(0)_generation_1(1)", "user_annotation", 100.0 + step * 2000, 1500.0))
        ev.append(_x("execute_context_0(0)_generation_1(1)", "gpu_user_annotation", 100.0 + step * 2000, 1500.0))
        t = 100.0 + step * 2000
        for name, cat, dur, _ in KERNELS:
            ev.append(_x(name, cat, t, dur))
            t += dur + 1.0
    ev.append(_x("aten::mm", "cpu_op", 10.0, 99999.0))
    ev.append({"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "python"}})
    return {"traceEvents": ev}


def test_kernel_classes_per_decode_step(tmp_path):
    for name, cat, _, cls in KERNELS:
        assert kc.classify(name, cat) == cls, name
    path = tmp_path / "w.pt.trace.json.gz"
    path.write_bytes(gzip.compress(json.dumps(synthetic_trace()).encode()))
    r = kc.classify_trace(kc.load_trace(path))
    assert (r["decode_steps"], r["other_steps"]) == (2, 1)
    expected = {}
    for _, _, dur, cls in KERNELS:
        expected[cls] = expected.get(cls, 0.0) + dur / 1e3
    for cls in kc.ORDER:
        assert r["classes"][cls]["ms_per_step"] == pytest.approx(expected.get(cls, 0.0)), cls
    assert r["classes"]["gemm"]["kernels_per_step"] == 2 and r["kernels_per_step"] == len(KERNELS)
    assert r["gpu_ms_per_step"] == pytest.approx(sum(d for _, _, d, _ in KERNELS) / 1e3)
    assert sum(c["share"] for c in r["classes"].values()) == pytest.approx(1.0)
    assert r["copies"] == {"ms_per_step": pytest.approx(0.005), "events_per_step": 1.0}
    assert r["top_other"] == [{"name": "mystery_kernel_v2", "ms_total": pytest.approx(0.02), "count": 2}]
    assert r["top_by_class"]["attention"][0]["name"] == FA3  # FA3 is a cutlass::device_kernel, yet attention
    last = 2100.0 + sum(d + 1.0 for _, _, d, _ in KERNELS) - 1.0
    assert r["span_ms_per_step"] == pytest.approx((last - 100.0) / 1e3 / 2)
    table = kc.format_table({"bf16": r})
    assert "gemm" in table and "1.200" in table and "copies" in table


def test_a_trace_without_decode_steps_is_refused():
    with pytest.raises(ValueError, match="no pure-decode step"):
        kc.classify_trace({"traceEvents": [_x("execute_context_1(9)_generation_0(0)", "user_annotation", 0, 1)]})


def test_sweep_runs_vllm_defaults_unless_mode0_is_asked(tmp_path):
    a = sweep.parse_args(["--work", str(tmp_path), "--pages", "p", "-o", str(tmp_path / "o")])
    args = sweep.server_args(a.mode0, a.max_num_seqs, a.server_arg)
    assert not any("compilation-config" in x or "enforce-eager" in x for x in args)
    assert a.compile_cache == str(tmp_path / "vllm-cache") and a.starts == 2 and a.levels == [1, 8, 32, 64]
    assert "fp8-all" in a.variants and sweep.variant_key("bf16", a.mode0) == "bf16"
    m = sweep.parse_args(["--work", "w", "--pages", "p", "-o", "o", "--mode0", "--max-num-seqs", "64"])
    margs = sweep.server_args(m.mode0, m.max_num_seqs)
    assert any('"mode": 0' in x for x in margs) and "--max-num-seqs=64" in margs
    assert sweep.setting_label(True) == "mode 0" and sweep.variant_key("bf16", True) == "bf16 (mode 0)"
    with pytest.raises(SystemExit):
        sweep.parse_args(["-o", "o"])  # --work and --pages needed unless --report-only


def _entry(setting, tok_s, gb, starts, engine):
    levels = [{"concurrency": c, "n_requests": c, "n_errors": 0, "wall_s": 1.0, "pages_per_s": tok_s * c / 1000,
               "output_tokens_per_s": tok_s * c, "per_request_tokens_per_s_p50": tok_s,
               "ttft_s": {"p50": 0.4, "p90": 0.5, "p99": 0.6}, "latency_s": {"p50": 5.0, "p90": 5.5, "p99": 6.0}}
              for c in (1, 8)]
    return {"setting": setting, "starts": starts, "server_start_s": starts[-1]["start_s"], "engine": engine,
            "checkpoint_bytes": int(gb * 1.1e9), "decode_weight_bytes": int(gb * 1e9), "kernels": {}, "levels": levels}


def test_sweep_tables_from_a_speed_json(tmp_path, capsys):
    eng = {"compilation": "VLLM_COMPILE", "cudagraph_mode": "FULL_AND_PIECEWISE", "cudagraph_capture_sizes": [1, 2],
           "prefix_caching": False, "max_num_batched_tokens": 8192, "kv_cache_dtype": "auto"}
    cold, warm = {"start_s": 300.0, "compile_start": "cold"}, {"start_s": 40.0, "compile_start": "warm"}
    speed = {"hbm_copy_gbs": 4000.0, "variants": {
        "bf16": _entry("vLLM default", 280.0, 8.0, [cold, warm], eng),
        "fp8-all": _entry("vLLM default", 350.0, 4.0, [cold, warm], {**eng, "kv_cache_dtype": "fp8"}),
        "bf16 (mode 0)": _entry("mode 0", 196.0, 8.0, [{"start_s": 150.0, "compile_start": "none"}],
                                {**eng, "compilation": "NONE"})}}
    (tmp_path / "speed.json").write_text(json.dumps(speed))
    assert sweep.main(["--report-only", "-o", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "1.25x" in out  # fp8-all over BF16 under the same setting
    assert "bf16 (mode 0)" in out and out.count("1.00x") == 4  # each BF16 is its own setting's baseline
    bf16_bound = next(line for line in out.splitlines() if line.startswith("bf16 ") and "cold" in line)
    assert "500.0" in bf16_bound and "2.00" in bf16_bound and "56%" in bf16_bound and "300 cold, 40 warm" in bf16_bound
    assert "NOTE: under 'vLLM default' the variants differ in kv_cache_dtype (bf16: auto; fp8-all: fp8)" in out
    assert "mode 0" in out and json.loads((tmp_path / "speed.json").read_text()) == speed  # report-only writes nothing


def test_profile_step_arguments_classify_mode_and_bound(tmp_path, capsys):
    from quantgate.demo import READER

    a = prof.parse_args(["--work", str(tmp_path), "--pages", "p", "-o", "o"])
    assert (a.delay, a.steps, a.max_tokens, a.compile_cache) == (16, 32, 512, str(tmp_path / "vllm-cache"))
    cfg = prof.profiler_config(tmp_path / "t", a.delay, a.steps)
    assert cfg["profiler"] == "torch" and cfg["ignore_frontend"] and not cfg["torch_profiler_with_stack"]
    assert Path(cfg["torch_profiler_dir"]).is_absolute() and cfg["max_iterations"] == 32
    with pytest.raises(SystemExit):
        prof.parse_args(["--work", "w", "--pages", "p", "-o", "o", "--max-tokens", "40"])  # no room for 48 steps
    trace = tmp_path / "t.json"
    trace.write_text(json.dumps(synthetic_trace()))
    assert prof.main(["--classify", str(trace)]) == 0
    assert "deltanet" in capsys.readouterr().out
    entry = kc.classify_trace(synthetic_trace())
    prof.bound(entry, READER, 4000.0)
    b = sweep.decode_bytes(READER)["decode_weight_bytes"]
    assert entry["bound_ms_per_step"] == pytest.approx(b / 4e12 * 1e3)
    assert entry["fraction_of_bound"] == pytest.approx(entry["bound_ms_per_step"] / entry["span_ms_per_step"])
    assert entry["gemm_effective_gbs"] == pytest.approx(b / 1.2e-3 / 1e9)
