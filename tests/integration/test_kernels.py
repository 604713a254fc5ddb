"""Every linear-kernel choice vLLM logs, counted per scheme, from the committed server logs of
the H200 sessions (plain, gzipped and inside the committed tarballs); the GEMM time per kernel from the committed
decode profiles; run.json / summary.json schema bumps that still read the old files; the engine table telling
two runs apart that differ only in kernels."""

import gzip
import json
import re
import tarfile
from pathlib import Path

import pytest

from quantgate.schema.base import read_record_file
from quantgate.schema.run import RunManifest
from quantgate.serve.kernels import UNATTRIBUTED, gemm_kernel, gemm_time, gemm_time_from_profile, kernels_from_log
from tests.support.paths import REPO

RESULTS = REPO / "lab"  # the GPU sessions' committed results
FP8 = ("CompressedTensorsW8A8Fp8", "CutlassFP8ScaledMMLinearKernel")
FP4 = ("NVFP4", "MarlinNvFp4LinearKernel")


def _text(raw: bytes) -> str:
    return (gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw).decode("utf-8", errors="replace")


def _log(rel: str) -> str:
    if ":" in rel:  # a file inside a committed tarball
        tar, member = rel.split(":", 1)
        with tarfile.open(RESULTS / tar) as tf:
            return _text(tf.extractfile(member).read())
    return _text((RESULTS / rel).read_bytes())


def _starts(text: str) -> list[str]:
    """The starts of one server.log: quantgate writes each start's command line (``$ env …``) before its output."""
    return [s for s in re.split(r"(?m)^\$ ", text) if s.strip()]


# What each committed log says, read by hand from the files (grep "Using .*Kernel for\|Selected"): one line per
# choice per start (vLLM logs each distinct choice once per process); the sweeps' logs hold a cold and a warm start.
COMMITTED = {
    "2026-11-29-h200-4b-speed/session.tar.gz:reader-vllm-bf16/server.log": {},
    "2026-11-29-h200-4b-speed/session.tar.gz:reader-vllm-fp8/server.log": {FP8[0]: {FP8[1]: 1}},
    "2026-11-29-h200-4b-speed/session.tar.gz:speed/sweep-fp8-dynamic/server.log.gz": {FP8[0]: {FP8[1]: 1}},
    "2026-11-29-h200-4b-speed/session.tar.gz:speed/sweep-nvfp4/server.log.gz": {FP4[0]: {FP4[1]: 1}},
    "2026-11-29-h200-4b-speed/session.tar.gz:speed/sweep-mixed/server.log.gz": {FP8[0]: {FP8[1]: 1}, FP4[0]: {FP4[1]: 1}},
    "2026-11-30-h200-serving-options/session.tar.gz:sweeps/bf16/server.log.gz": {},
    "2026-11-30-h200-serving-options/session.tar.gz:sweeps/fp8-all/server.log.gz": {FP8[0]: {FP8[1]: 2}},
    "2026-11-30-h200-serving-options/session.tar.gz:sweeps/mixed/server.log.gz": {FP8[0]: {FP8[1]: 2}, FP4[0]: {FP4[1]: 2}},
    "2026-11-30-h200-parallel-studies/session.tar.gz:sweeps/nvfp4/server.log.gz": {FP4[0]: {FP4[1]: 2}},
    "2026-11-30-h200-parallel-studies/session.tar.gz:sweeps/mixed/server.log.gz": {FP8[0]: {FP8[1]: 2}, FP4[0]: {FP4[1]: 2}},
    "2026-11-30-h200-serving-options/serving_options_study.tar.xz:gpu1/studies/serving_options/runs/nvfp4/server.log":
        {FP4[0]: {FP4[1]: 1}},
    "2026-11-30-h200-serving-options/serving_options_study.tar.xz:gpu1/studies/serving_options/runs/nvfp4-emulation/server.log":
        {"NVFP4": {"EmulationNvFp4LinearKernel": 1}},
    "2026-11-30-h200-parallel-studies/parallel_studies.tar.xz:gpu1/studies/a_parallel_1gpu/runs/mixed/server.log":
        {FP8[0]: {FP8[1]: 1}, FP4[0]: {FP4[1]: 1}},
    # the 2026-12-02 H200 study: W4A16 on Hopper logs both Machete and Marlin
    "2026-12-02-h200-4b-study/session.tar.xz:study/runs/bf16/server.log": {},
    "2026-12-02-h200-4b-study/session.tar.xz:study/runs/fp8-all/server.log": {FP8[0]: {FP8[1]: 1}},
    "2026-12-02-h200-4b-study/session.tar.xz:study/runs/w4a16-all/server.log":
        {"CompressedTensorsWNA16": {"MacheteLinearKernel": 1, "MarlinLinearKernel": 1}},
    # the 2026-12-03 H200 study: the same recipe with VLLM_DISABLED_KERNELS=MacheteLinearKernel logs Marlin only
    "2026-12-03-h200-seven-variant-study/session.tar.gz:study/runs/w4a16-all-marlin/server.log.gz":
        {"CompressedTensorsWNA16": {"MarlinLinearKernel": 1}},
    "2026-12-03-h200-seven-variant-study/session.tar.gz:study/runs/nvfp4-all/server.log.gz": {FP4[0]: {FP4[1]: 1}},
    "2026-12-03-h200-seven-variant-study/session.tar.gz:study/runs/mixed/server.log.gz": {FP8[0]: {FP8[1]: 1}, FP4[0]: {FP4[1]: 1}},
}


@pytest.mark.parametrize("rel", list(COMMITTED))
def test_committed_logs_give_every_choice_with_its_count(rel):
    text = _log(rel)
    assert kernels_from_log(text) == COMMITTED[rel]
    # one start's text (what the backend is given) counts each choice once
    for start in _starts(text):
        assert all(n == 1 for per in kernels_from_log(start).values() for n in per.values())


def test_other_using_lines_of_a_real_log_are_not_kernels():
    """The committed mixed log also says "Using FlashInfer for top-p & top-k sampling", "Using FLASH_ATTN
    attention backend", "Using Triton/FLA GDN prefill kernel", "Using AttentionBackendEnum.FLASH_ATTN for
    MMEncoderAttention": none of them is a linear kernel."""
    text = _log("2026-11-30-h200-parallel-studies/session.tar.gz:sweeps/mixed/server.log.gz")
    for line in ("Using FlashInfer for top-p", "attention backend out of potential", "GDN prefill kernel",
                 "for MMEncoderAttention"):
        assert line in text
    assert set(kernels_from_log(text)) == {FP8[0], FP4[0]}


# W4A16 on Hopper (2026-12-01, FACTS.md): vLLM logged both Machete and Marlin for CompressedTensorsWNA16 (the
# committed 2026-12-02 log above too), and only Marlin with VLLM_DISABLED_KERNELS=MacheteLinearKernel (the committed
# 2026-12-03 log above). These two are written from vLLM 0.26.0's format string (compressed_tensors_wNa16.py:137,
# `logger.info("Using %s for CompressedTensorsWNA16", ...)`, once per kernel class), for the summary test below.
_WNA16 = "(EngineCore pid=4211) INFO 12-01 10:41:{s:02d} [compressed_tensors_wNa16.py:137] Using {k} for " \
         "CompressedTensorsWNA16\n"
W4A16_DEFAULT = _WNA16.format(s=7, k="MacheteLinearKernel") + _WNA16.format(s=7, k="MarlinLinearKernel")
W4A16_NO_MACHETE = _WNA16.format(s=9, k="MarlinLinearKernel")


def test_machete_and_marlin_both_recorded_and_a_machete_disabled_run_differs():
    both, marlin = kernels_from_log(W4A16_DEFAULT), kernels_from_log(W4A16_NO_MACHETE)
    assert both == {"CompressedTensorsWNA16": {"MacheteLinearKernel": 1, "MarlinLinearKernel": 1}}
    assert marlin == {"CompressedTensorsWNA16": {"MarlinLinearKernel": 1}}
    assert both != marlin  # schema 1 kept the last line per scheme: Marlin in both


def test_the_committed_w4a16_study_recorded_what_its_log_says():
    """The product's own run.json from the 2026-12-02 H200 study holds both kernels, as parsed from its log."""
    run = _log("2026-12-02-h200-4b-study/session.tar.xz:study/runs/w4a16-all/run.json")
    assert json.loads(run)["kernels"] == \
        COMMITTED["2026-12-02-h200-4b-study/session.tar.xz:study/runs/w4a16-all/server.log"]


def test_the_two_committed_w4a16_runs_are_told_apart_by_their_records():
    """Kernel truth on real runs: w4a16-all under vLLM's own kernel choice (2026-12-02) and with Machete disabled
    (2026-12-03) — the same recipe — differ in run.json's kernels and in the environment it records."""
    default = json.loads(_log("2026-12-02-h200-4b-study/session.tar.xz:study/runs/w4a16-all/run.json"))
    marlin = json.loads(_log("2026-12-03-h200-seven-variant-study/session.tar.gz:study/runs/w4a16-all-marlin/run.json"))
    assert default["kernels"] != marlin["kernels"] == {"CompressedTensorsWNA16": {"MarlinLinearKernel": 1}}
    assert marlin["engine"]["env"]["VLLM_DISABLED_KERNELS"] == "MacheteLinearKernel"
    assert "VLLM_DISABLED_KERNELS" not in (default["engine"].get("env") or {})


def test_two_processes_count_twice():
    """A TP=2 start logs each choice from both workers; the count says so."""
    line = "(Worker_TP{r} pid=70{r}) INFO 12-01 10:00:00 [__init__.py:978] Using MarlinNvFp4LinearKernel for NVFP4 GEMM\n"
    assert kernels_from_log(line.format(r=0) + line.format(r=1)) == {"NVFP4": {"MarlinNvFp4LinearKernel": 2}}


# --- GEMM time per kernel, from the committed profiles ---------------------------------------------------------

def _profiles():
    for day in ("2026-11-30-h200-serving-options", "2026-11-30-h200-parallel-studies"):
        for name, entry in json.loads(gzip.decompress((RESULTS / day / "profile.json.gz").read_bytes())).items():
            yield f"{day}/{name}", entry


QUANTIZED_LABELS = ("LinearKernel", "MMKernel")


@pytest.mark.parametrize("key,entry", list(_profiles()), ids=[k for k, _ in _profiles()])
def test_profiled_gemm_kernels_are_the_ones_the_log_named(key, entry):
    """Two independent sources agree: every vLLM kernel class the trace's GEMM names map to (Marlin by the weight
    type in its template arguments) is one that the same start's log named, and each logged kernel ran."""
    shares = gemm_time_from_profile(entry)
    logged = set(entry["kernels"].values())  # these profile.json files predate the counts: {scheme: kernel}
    profiled = {k for k in shares if k.endswith(QUANTIZED_LABELS)}
    assert profiled == logged
    assert sum(t.ms_per_step for t in shares.values()) == pytest.approx(entry["classes"]["gemm"]["ms_per_step"])
    assert sum(t.share_of_gemm for t in shares.values()) == pytest.approx(1.0)
    assert UNATTRIBUTED in shares  # these profiles kept the five heaviest GEMM names only


def test_mixed_profile_splits_as_the_docs_say():
    """lab/2026-11-30-h200-parallel-studies/findings.md: mixed's 2.384 ms of GEMM per step — Marlin 0.98, Cutlass FP8 0.58, a Triton
    kernel with fused activation quantization 0.18, the LM head (cuBLAS) 0.29."""
    entry = json.loads(_log("2026-11-30-h200-parallel-studies/profile.json.gz"))["mixed"]
    s = gemm_time_from_profile(entry)
    assert round(s["MarlinNvFp4LinearKernel"].ms_per_step, 2) == 0.98
    assert round(s["CutlassFP8ScaledMMLinearKernel"].ms_per_step, 2) == 0.58
    assert round(s["Inductor Triton kernel (fused ops)"].ms_per_step, 2) == 0.18
    assert round(s["cuBLAS (unquantized layers)"].ms_per_step, 2) == 0.29
    assert s["cuBLAS (unquantized layers)"].launches_per_step == 1  # the tied LM head, once per step


def test_marlin_kernels_are_told_apart_by_their_weight_type():
    # ScalarType ids (vllm/scalar_type.py): bf16 1125899906909960, fp4 e2m1 562949953487106 and fp8 e4m3fn
    # 2814749767172868 as they appear in the committed traces; uint4b8 (exponent 0, mantissa 4, bias 8) is
    # 4 << 8 | 8 << 17 = 1049600; float8_e8m0fnu (MXFP4 scales: ScalarType(8, 0, False, 0, True,
    # EXTD_RANGE_MAX_MIN)) 8 | 1 << 49 | 2 << 50 = 2814749767106568
    name = "void marlin::Marlin<1125899906909960l, {w}l, 1125899906909960l, {s}l, 256, 1, 8, 8, true, 4, 1, false>(int4*)"
    assert gemm_kernel(name.format(w=562949953487106, s=2814749767172868)) == "MarlinNvFp4LinearKernel"
    assert gemm_kernel(name.format(w=562949953487106, s=2814749767106568)) == "MarlinMxFp4LinearKernel"
    assert gemm_kernel(name.format(w=1049600, s=1125899906909960)) == "MarlinLinearKernel"
    assert gemm_kernel(name.format(w=2814749767172868, s=1125899906909960)) == "MarlinFP8ScaledMMLinearKernel"
    machete = ("void cutlass::device_kernel<cutlass::gemm::kernel::GemmUniversal<cute::tuple<int, int, int, int>, "
               "machete::MacheteCollectiveMma<cute::tuple<cutlass::vllm_biased_integer_subbyte<4, 8, false>>>>>")
    assert gemm_kernel(machete) == "MacheteLinearKernel"  # a name in vLLM 0.26's _C_stable_libtorch.abi3.so


def test_gemm_time_of_a_w4a16_step_and_its_refusals():
    """A W4A16 step as FACTS.md describes it (Machete 128 GEMMs, 1.93 ms; Marlin 24, 0.54 ms; over 32 steps)."""
    rows = [{"name": "machete::MacheteCollectiveMma<x>", "ms_total": 1.93 * 32, "count": 128 * 32},
            {"name": "marlin::Marlin<1125899906909960l, 1049600l, 1125899906909960l, 1125899906909960l>",
             "ms_total": 0.54 * 32, "count": 24 * 32},
            {"name": "nvjet_sm90_tst_512x8_64x3_2x1_v_bz_TNT", "ms_total": 0.29 * 32, "count": 32}]
    s = gemm_time(rows, 32)
    assert list(s) == ["MacheteLinearKernel", "MarlinLinearKernel", "cuBLAS (unquantized layers)"]
    assert s["MacheteLinearKernel"].launches_per_step == 128
    assert s["MacheteLinearKernel"].share_of_gemm == pytest.approx(1.93 / 2.76)
    with pytest.raises(ValueError, match="different profiles"):
        gemm_time(rows, 32, gemm_ms_per_step=1.0)
    with pytest.raises(ValueError, match="decode_steps"):
        gemm_time(rows, 0)


# --- run.json 2 and summary.json 3 ----------------------------------------------------------------------------

def test_old_run_json_reads_with_its_one_kernel_and_no_count(tmp_path):
    old = tmp_path / "old" / "run.json"  # a schema-1 run.json of 2026-11-30b's sweeps, packed with that session
    old.parent.mkdir()
    old.write_text(_log("2026-11-30-h200-parallel-studies/session.tar.gz:sweeps/mixed/run.json"))
    obj = json.loads(old.read_text())
    assert obj["schema_version"] == 1 and obj["kernels"] == {FP8[0]: FP8[1], FP4[0]: FP4[1]}
    m = read_record_file(RunManifest, old)
    assert m.schema_version == 2 and m.kernels == {FP8[0]: {FP8[1]: None}, FP4[0]: {FP4[1]: None}}
    f = tmp_path / "run.json"
    f.write_text(m.model_dump_json())
    assert read_record_file(RunManifest, f) == m  # what it writes back is schema 2 and reads as itself
    f.write_text(json.dumps({**obj, "schema_version": 0}))
    with pytest.raises(Exception, match="older quantgate"):
        read_record_file(RunManifest, f)


def _with_kernels(out: Path, name: str, log: str, env: dict) -> None:
    p = out / "runs" / name / "run.json"
    run = json.loads(p.read_text())
    run["kernels"] = kernels_from_log(log)
    run["engine"] = {"compilation": "VLLM_COMPILE", "env": env}
    p.write_text(json.dumps(run))


def test_runs_that_differ_only_in_kernels_differ_in_summary_and_report(tmp_path):
    from quantgate.reports import build_summary, load_summary, write_reports
    from quantgate.reports.engine import engine_table
    from quantgate.study.spec import Study
    from quantgate.study.verdicts import study_verdicts, verdict_inputs
    from tests.support.study_folder import finished_study

    out = finished_study(tmp_path / "out", {"w4a16": 0.0, "w4a16-marlin": 0.0})
    _with_kernels(out, "bf16", "", {})
    _with_kernels(out, "w4a16", W4A16_DEFAULT, {})
    _with_kernels(out, "w4a16-marlin", W4A16_NO_MACHETE, {"VLLM_DISABLED_KERNELS": "MacheteLinearKernel"})
    s = json.loads((out / "summary.json").read_text())
    st = Study.model_validate(s["study"])
    dirs = {n: out / "variants" / n for n in ("bf16", "w4a16", "w4a16-marlin")}
    pages = out / "pages" / "pages.jsonl"
    from quantgate.io.fileio import sha256_file

    summary = build_summary(st, out, sha256_file(pages), dirs, study_verdicts(st, out)[0],
                            {"w4a16": [], "w4a16-marlin": []}, inputs=verdict_inputs(st, out, pages))
    write_reports(summary, out)
    written = json.loads((out / "summary.json").read_text())
    from quantgate.schema.summary import SUMMARY_SCHEMA_VERSION

    assert written["schema_version"] == SUMMARY_SCHEMA_VERSION
    by = {v["name"]: v["kernels"] for v in written["variants"]}
    assert by["w4a16"] == {"CompressedTensorsWNA16": {"MacheteLinearKernel": 1, "MarlinLinearKernel": 1}}
    assert by["w4a16-marlin"] == {"CompressedTensorsWNA16": {"MarlinLinearKernel": 1}}
    cols, rows = engine_table(load_summary(out))
    cell = {r[0]: r[cols.index("linear kernels")] for r in rows}
    assert cell == {"bf16": "–", "w4a16": "CompressedTensorsWNA16: MacheteLinearKernel, MarlinLinearKernel",
                    "w4a16-marlin": "CompressedTensorsWNA16: MarlinLinearKernel"}
    md, page = (out / "report.md").read_text(), (out / "report.html").read_text()
    assert "| w4a16 | VLLM_COMPILE | – | CompressedTensorsWNA16: MacheteLinearKernel, MarlinLinearKernel |" in md
    assert "<td>CompressedTensorsWNA16: MarlinLinearKernel</td>" in page
    # a summary.json 2 (kernels as {scheme: kernel}) still reads, its kernels upgraded
    old = {**written, "schema_version": 2,
           "variants": [{**v, "kernels": {k: next(iter(x)) for k, x in v["kernels"].items()}} for v in written["variants"]]}
    (out / "summary.json").write_text(json.dumps(old))
    v2 = {v.name: v.kernels for v in load_summary(out).variants}
    assert v2["w4a16"] == {"CompressedTensorsWNA16": {"MacheteLinearKernel": None}}
