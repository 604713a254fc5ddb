"""Issue 20: the GPU scripts' CPU-checkable parts: the kernel classifier on a synthetic torch-profiler trace,
the speed sweep's arguments (vLLM defaults unless --mode0) and its tables from a speed.json, the profile
step's arguments, trace-only mode and weight-read bound. The GPU session's pure parts (benchmarks/gpu/session):
the step runner's deadline, the batch-invariance comparison, the numerics verdict, the single-stream ratios,
and the fake vLLM's refusal and synthetic trace that its dry run relies on."""

import gzip
import importlib.util
import json
import sys
from pathlib import Path

import pytest

from tests.support.paths import REPO

GPU = REPO / "benchmarks" / "gpu"


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
    # every GEMM name kept, and the GEMM time per vLLM kernel (issue 30): the nvjet GEMM is cuBLAS, the
    # GemmUniversal one names no vLLM kernel class
    assert [g["name"] for g in r["gemm_names"]] == [KERNELS[1][0], KERNELS[2][0]]
    by = r["gemm_by_kernel"]
    assert by["cuBLAS (unquantized layers)"]["ms_per_step"] == pytest.approx(0.9)
    assert by["other GEMM"]["share_of_gemm"] == pytest.approx(0.25) and len(by) == 2


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
    from quantgate.study.demo import READER

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


# --- the GPU session's scripts (benchmarks/gpu/session): their pure parts -----------------------------------------

SESSION = GPU / "session"


def _load_session(name):
    key = f"session_{name}"
    if key in sys.modules:
        return sys.modules[key]
    sys.path.insert(0, str(SESSION))  # the session scripts import steps.py by name
    spec = importlib.util.spec_from_file_location(key, SESSION / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[key] = mod
    spec.loader.exec_module(mod)
    return mod


steps = _load_session("steps")


def test_step_time_is_the_cap_cut_to_the_deadline():
    assert steps.step_timeout(now=100.0, deadline=None, cap=60.0) == 60.0
    assert steps.step_timeout(now=100.0, deadline=1000.0, cap=60.0, reserve=15.0) == 60.0
    assert steps.step_timeout(now=100.0, deadline=200.0, cap=600.0, reserve=15.0) == 85.0  # deadline first
    assert steps.step_timeout(now=100.0, deadline=200.0, cap=600.0, min_s=90.0, reserve=15.0) is None  # not worth it
    assert steps.step_timeout(now=300.0, deadline=200.0, cap=600.0) is None  # past the deadline


def test_step_runner_records_ok_failed_skipped_and_kills_a_step_at_its_limit(tmp_path):
    import time

    status = tmp_path / "status.jsonl"
    ok = steps.run_step(["sh", "-c", "echo hi"], name="a", status=status, cap=30, deadline=None, log=tmp_path / "a.log")
    bad = steps.run_step(["sh", "-c", "exit 3"], name="b", status=status, cap=30, deadline=None)
    gone = steps.run_step(["true"], name="c", status=status, cap=30, deadline=None, requires=[str(tmp_path / "nope")])
    late = steps.run_step(["true"], name="d", status=status, cap=30, deadline=time.time() + 20, min_s=60)
    t0 = time.time()
    # a step whose child keeps running: the whole process group goes at the limit
    slow = steps.run_step(["sh", "-c", "sleep 60 & sleep 60"], name="e", status=status, cap=30,
                          deadline=time.time() + 16, min_s=0)
    assert time.time() - t0 < 20
    assert [r["status"] for r in (ok, bad, gone, late, slow)] == ["ok", "failed", "skipped", "skipped", "timeout"]
    assert [steps.exit_code(r) for r in (ok, bad, gone, slow)] == [0, 3, steps.SKIPPED_RC, steps.TIMEOUT_RC]
    assert "missing" in gone["reason"] and "needs 60 s" in late["reason"]
    assert slow["limit_s"] == pytest.approx(1.0, abs=0.6)  # 16 s left, 15 kept back
    recs = [json.loads(line) for line in status.read_text().splitlines()]
    assert [r["step"] for r in recs] == ["a", "b", "c", "d", "e"]  # each written when it ended
    assert "hi" in (tmp_path / "a.log").read_text()
    assert steps.running_steps(status) == []  # nothing left marked running
    assert "timeout" in steps.table([status])


def test_batch_invariance_comparison_on_token_lists():
    bi = _load_session("batch_invariance")
    c1 = {"p1": [1, 2, 3, 4], "p2": [5, 6, 7, 8], "p3": [9, 9], "p4": [1, 1]}
    c8 = {"p1": [1, 2, 3, 4], "p2": [5, 6, 0, 8], "p3": [9, 9, 9], "p5": [3]}
    r = bi.compare_tokens(c1, c8)
    assert (r["pages"], r["identical"], r["identical_rate"]) == (3, 1, pytest.approx(1 / 3))  # p4, p5: in one pass only
    assert r["first_difference"] == {"p2": 2, "p3": 2}  # a longer answer differs where the shorter one ends
    assert r["mean_common_prefix"] == pytest.approx((1 + 2 / 4 + 2 / 3) / 3)
    assert bi.compare_tokens({}, {})["identical_rate"] is None
    log = ("(EngineCore pid=9) ERROR [core.py:1108] EngineCore failed to start.\n"
           "RuntimeError: VLLM batch_invariant mode is not supported for GDN_ATTN.\nRuntimeError: Engine core ...")
    assert bi.refusal_line(log) == "RuntimeError: VLLM batch_invariant mode is not supported for GDN_ATTN."
    assert bi.refusal_line("INFO all fine") is None
    sp = bi.pass_speed([{"token_ids": [1] * 64, "latency_s": 1.0}, {"token_ids": None, "error": "x"}], 2.0)
    assert (sp["output_tokens"], sp["output_tokens_per_s"], sp["errors"]) == (64, 32.0, 1)


def test_speculative_answer_says_lossless_lossy_or_refused():
    """Issue 30 item 7's sentence, from the comparisons the script makes."""
    bi = _load_session("batch_invariance")
    same = {"pages": 16, "identical": 16}
    r = {"comparisons": {"plain_c1_vs_speculative_c1": {"pages": 16, "identical": 11},
                         "batch_invariant_c1_vs_speculative_batch_invariant_c1": same}, "servers": {}}
    assert bi.speculative_answer(r)["answer"] == ("With batch invariance holding numerics still, speculative decoding "
                                                  "changed 0 of 16 pages' greedy tokens at concurrency 1: lossless on "
                                                  "these pages (without batch invariance: 5 of 16).")
    r["comparisons"]["batch_invariant_c1_vs_speculative_batch_invariant_c1"] = {"pages": 16, "identical": 14}
    assert "changed 2 of 16 pages' greedy tokens at concurrency 1: lossy" in bi.speculative_answer(r)["answer"]
    line = "ValueError: Speculative decoding is not supported with batch invariance."
    refused = {"comparisons": {}, "servers": {"speculative_batch_invariant": {"started": False, "error_line": line}}}
    assert bi.speculative_answer(refused)["answer"].startswith("vLLM refuses speculative decoding together with "
                                                               f"batch invariance on this model: {line}")
    assert bi.error_line(f"INFO fine\n(EngineCore pid=1) ERROR x\n{line}\nTraceback (most recent call last):") == line


def test_batch_invariance_with_speculative_servers_against_the_stand_in_vllm(tmp_path, monkeypatch):
    """The script end to end on the stand-in vLLM (its token ids depend on the request only, so every comparison
    is identical here): four servers with the right flags and environment, each compared at c=1."""
    import shlex

    from quantgate.heldout.synth import synth_pages

    bi = _load_session("batch_invariance")
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"model_type": "qwen2_5_vl"}))
    synth_pages(tmp_path / "pages", 6, seed=3, profile="simple", calibration_fraction=0.0)
    monkeypatch.setenv("QUANTGATE_VLLM", f"{shlex.quote(sys.executable)} -m tests.support.fake_vllm")
    monkeypatch.setenv("FAKE_VLLM_START_S", "0.1")
    monkeypatch.chdir(REPO)  # the stand-in is imported as tests.support.fake_vllm
    spec = '{"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 4}'
    assert bi.main(["--model", str(model), "--pages", str(tmp_path / "pages"), "-o", str(tmp_path / "out"),
                    "--n-pages", "4", "--concurrency", "2", "--max-tokens", "8", "--compile-cache", "none",
                    "--startup-timeout", "120", "--speculative", spec]) == 0
    r = json.loads((tmp_path / "out" / "batch_invariance.json").read_text())
    assert set(r["servers"]) == {"plain", "batch_invariant", "speculative", "speculative_batch_invariant"}
    for name, srv in r["servers"].items():
        assert srv["started"], (name, srv)
        assert ("--speculative-config" in srv["command"]) == name.startswith("speculative"), name
        assert (srv["env"].get("VLLM_BATCH_INVARIANT") == "1") == name.endswith("batch_invariant"), name
    for key in ("plain_c1_vs_speculative_c1", "batch_invariant_c1_vs_speculative_batch_invariant_c1"):
        assert (r["comparisons"][key]["pages"], r["comparisons"][key]["identical"]) == (4, 4), key
    assert r["speculative"]["config"]["method"] == "ngram"
    assert "changed 0 of 4 pages' greedy tokens" in r["speculative"]["answer"]


def test_flashinfer_wait_tells_a_build_waited_on_a_lock_from_a_built_module(tmp_path, monkeypatch):
    """Issue 30 item 6's script end to end on the stand-in vLLM, whose profiling run builds a stand-in FlashInfer
    module under a file lock as vLLM 0.26 + flashinfer 0.6.14 do: A (one server, the machine's workspace) and B
    (three at once, an empty workspace) wait the build — B's servers leave together —, C (B's workspace, built)
    does not."""
    import shlex

    fw = _load_session("flashinfer_wait")
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"model_type": "qwen2_5_vl"}))
    monkeypatch.setenv("QUANTGATE_VLLM", f"{shlex.quote(sys.executable)} -m tests.support.fake_vllm")
    monkeypatch.setenv("FAKE_VLLM_START_S", "0.1")
    monkeypatch.setenv("FAKE_VLLM_FLASHINFER_BUILD_S", "4")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # the machine's default workspace
    monkeypatch.delenv("FLASHINFER_WORKSPACE_BASE", raising=False)
    monkeypatch.chdir(REPO)
    out = tmp_path / "out"
    assert fw.main(["--model", str(model), "-o", str(out), "--servers", "3", "--compile-cache", "none",
                    "--startup-timeout", "120", "--phases", "A,B,C"]) == 0
    r = json.loads((out / "flashinfer_wait.json").read_text())
    a, b, c = (r["phases"][p] for p in "ABC")
    assert a["workspace"] == "machine default" and "FLASHINFER_WORKSPACE_BASE" not in a["env"]
    assert (tmp_path / "home" / ".cache" / "flashinfer" / "fake" / "sampling.so").is_file()
    assert b["workspace"] == c["workspace"] == str((out / "flashinfer-B").resolve())
    assert [p["summary"]["started"] for p in (a, b, c)] == [1, 3, 3]
    assert a["summary"]["profile_wait_s"][0] >= 3  # the build, seen from one server
    assert b["summary"]["profile_wait_s"][1] >= 3 and b["summary"]["kv_lines_spread_s"] <= 2  # one lock, left together
    assert c["summary"]["profile_wait_s"][1] <= 1  # built: no wait
    for srv in b["servers"].values():  # the product's run record reads the same span as the script
        assert srv["engine_profile_wait_s"] == srv["profile_wait_s"] and srv["encoder_to_kv_s"] >= srv["profile_wait_s"]
    with pytest.raises(SystemExit):
        fw.parse_args(["--model", "m", "-o", "o", "--compile-cache", "none", "--phases", "C,B"])
    with pytest.raises(SystemExit, match="exists from an earlier run"):  # B's workspace would not be empty
        fw.main(["--model", str(model), "-o", str(out), "--compile-cache", "none", "--phases", "B"])


def test_numerics_verdict_names_the_reference_a_layer_matches():
    num = _load_session("vllm_numerics")
    assert num.verdict(0.002, 0.03) == "weights-only"  # Marlin NVFP4 / BF16 activations
    assert num.verdict(0.03, 0.002) == "weights+activations"  # CUTLASS W8A8
    assert num.verdict(0.004, 0.008) == "unclear"  # both close: the input cannot tell them apart
    assert num.verdict(0.2, 0.3) == "unclear"  # neither
    rows = [{"verdict": "weights-only", "rel_err_vs_weight_only": 0.001, "rel_err_vs_activation_fake_quant": 0.1},
            {"verdict": "weights-only", "rel_err_vs_weight_only": 0.003, "rel_err_vs_activation_fake_quant": 0.09}]
    s = num.summarize(rows)
    assert (s["computes"], s["max_rel_err_vs_weight_only"], s["max_rel_err_vs_activation_fake_quant"]) == \
        ("weights-only", 0.003, 0.1)
    assert num.summarize(rows + [{**rows[0], "verdict": "unclear"}])["computes"] == "mixed: unclear, weights-only"
    assert num.find_prefix(["model.layers.0.mlp.down_proj.weight", "model.layers.10.mlp.down_proj.weight",
                            "visual.blocks.0.mlp.down_proj.weight"], "layers.0.mlp.down_proj") == \
        "model.layers.0.mlp.down_proj"


def test_session_speed_ratios_beside_the_weight_bytes_bound():
    s4 = _load_session("helpers")

    def lv(rate):
        return [{"concurrency": 1, "per_request_tokens_per_s_p50": rate},
                {"concurrency": 8, "per_request_tokens_per_s_p50": 1.0}]

    speed = {"variants": {"bf16": {"decode_weight_bytes": 8e9, "levels": lv(200.0)},
                          "fp8-dynamic": {"decode_weight_bytes": 5e9, "levels": lv(220.0)},
                          "fp8-all": {"decode_weight_bytes": 4e9, "levels": []}}}
    r = s4.single_stream_ratios(speed)
    assert r["fp8-dynamic/bf16"] == {"measured_c1": pytest.approx(1.1), "weight_bytes_bound": pytest.approx(1.6),
                                     "share_of_possible_gain": pytest.approx(0.1 / 0.6)}
    assert r["fp8-all/bf16"]["measured_c1"] is None and r["fp8-all/bf16"]["weight_bytes_bound"] == 2.0
    assert s4.single_stream_ratios({"variants": {"bf16": speed["variants"]["bf16"]}}) == {}
    assert s4.parse_bytes("12GiB") == 12 * 2**30 and s4.parse_bytes("64MiB") == 64 * 2**20 and s4.parse_bytes("7") == 7


def test_fake_vllm_refuses_batch_invariance_on_gdn_and_writes_a_classifiable_trace(tmp_path):
    from tests.support import fake_vllm

    (tmp_path / "config.json").write_text(json.dumps({"model_type": "qwen3_5"}))
    assert fake_vllm._refuses(str(tmp_path), {"VLLM_BATCH_INVARIANT": "1"})
    assert not fake_vllm._refuses(str(tmp_path), {})
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "qwen2_5_vl"}))
    assert not fake_vllm._refuses(str(tmp_path), {"VLLM_BATCH_INVARIANT": "1"})
    r = kc.classify_trace(fake_vllm.synthetic_trace(32))
    assert r["decode_steps"] == 32 and r["classes"]["other"]["ms_per_step"] == 0.0
