"""The study report's decode-step section on the 2026-12-02 H200 session's own files: its
study summary, the bf16 and fp8-all decode profiles at c=1 and its measured copy bandwidth (hbm.json)."""

from __future__ import annotations

import gzip
import json
import shutil
import tarfile
from pathlib import Path

import pytest

from quantgate.speed.report import markdown_lines, step_rows

SESSION = Path(__file__).resolve().parents[3] / "lab" / "2026-12-02-h200-4b-study"


@pytest.fixture(scope="module")
def session(tmp_path_factory) -> Path:
    """The session's files, packed in its session.tar.xz (README there), unpacked in-process once."""
    d = tmp_path_factory.mktemp("dec02")
    with tarfile.open(SESSION / "session.tar.xz") as t:
        t.extractall(d, filter="data")
    return d


@pytest.fixture
def study(tmp_path: Path, session: Path) -> Path:
    shutil.copy(session / "study" / "summary.json", tmp_path / "summary.json")
    for v in ("bf16", "fp8-all"):
        (tmp_path / "speed" / v).mkdir(parents=True)
        (tmp_path / "speed" / v / "c1.profile.json").write_bytes(
            gzip.decompress((session / "prof" / v / "c1.profile.json.gz").read_bytes()))
    gbs = json.loads((session / "hbm.json").read_text())["hbm_copy_gbs"]
    (tmp_path / "speed" / "copy-bandwidth.json").write_text(json.dumps(
        {"schema_version": 1, "kind": "quantgate.copy_bandwidth", "gbs": gbs, "source": "hbm.json"}))
    return tmp_path


def _row(md: list[str], variant: str, c: int) -> list[str]:
    return next(x for x in md if x.startswith(f"| {variant} | {c} |")).strip("| ").split(" | ")


def test_the_sentence_follows_the_measured_step(study):
    md = markdown_lines(study)
    assert "## Decode step" in md
    bf16, fp8 = _row(md, "bf16", 1), _row(md, "fp8-all", 1)
    # pages/s from the study's own speed waves (its speed measurement, ignore_eos: not the accuracy pass's 0.454
    # and 0.524), the step from its profile
    waves = {v["name"]: [w["pages_per_s"] for w in v["speed"][0]["waves"]]
             for v in json.loads((study / "summary.json").read_text())["variants"]}
    assert len(waves["bf16"]) == len(waves["fp8-all"]) == 3
    assert bf16[2:5] == [f"{sum(waves['bf16']) / 3:.3f}", "3.387", "564"] and bf16[2] == "0.493"
    assert fp8[2:5] == [f"{sum(waves['fp8-all']) / 3:.3f}", "2.921", "507"]
    rows = {(r.variant, r.concurrency): r.bound for r in step_rows(study)}
    b, f = rows[("bf16", 1)], rows[("fp8-all", 1)]
    # the bf16 bound agrees with the earlier sweep's (508 tok/s by weight bytes at this bandwidth, speed_sweep.py)
    assert 1e3 / b.bound_ms == pytest.approx(508, rel=0.02)
    # half the bytes, but only 14% less step: fp8-all's read is under half its step, bf16's over
    assert f.bound_ms < 0.6 * b.bound_ms and f.gpu_ms_per_step > 0.85 * b.gpu_ms_per_step
    assert b.share >= 0.5 > f.share
    assert bf16[5] == f"{b.share:.0%}" and bf16[7].startswith("weight-read bound at c=1") and "564 kernels" in bf16[7]
    assert fp8[5] == f"{f.share:.0%}" and fp8[7].startswith("kernel-count bound at c=1")
    assert "507 kernels, 2.92 ms/step" in fp8[7] and "fewer weight bytes buy little" in fp8[7]
    # which kernels ran the GEMMs, measured: bf16 all cuBLAS; fp8-all Cutlass FP8, its BF16 LM head cuBLAS
    assert bf16[6] == "cuBLAS (unquantized layers) 100%"
    assert fp8[6].startswith("CutlassFP8ScaledMMLinearKernel ") and "cuBLAS (unquantized layers)" in fp8[6]


def test_levels_and_variants_without_a_profile_say_not_measured(study):
    md = markdown_lines(study)
    for v, c in (("bf16", 32), ("w4a16-all", 1)):
        assert _row(md, v, c)[3:] == ["not measured"] * 5
    (study / "speed" / "copy-bandwidth.json").unlink()  # profiles, no bandwidth: the step shown, no bound
    row = _row(markdown_lines(study), "fp8-all", 1)
    assert row[3:5] == ["2.921", "507"] and row[5] == "not measured (no copy bandwidth)"


def test_a_study_without_profiles_gets_no_section(study):
    shutil.rmtree(study / "speed")
    assert markdown_lines(study) == []


def test_speed_profile_into_a_study_rewrites_its_report(study, session):
    """``speed-profile -o STUDY/speed``: the bandwidth recorded, the levels already profiled kept (no server
    started), and the study's report.md / report.html written again with the section."""
    from quantgate.cli import main

    for v in ("bf16", "fp8-all"):
        (study / "variants" / v).mkdir(parents=True)
        shutil.copy(session / "study" / "variants" / v / "quantgate.json", study / "variants" / v / "quantgate.json")
    (study / "speed" / "copy-bandwidth.json").unlink()
    assert not (study / "report.md").exists()
    rc = main(["speed-profile", str(study / "variants" / "bf16"), str(study / "variants" / "fp8-all"),
               "--pages", str(study), "--copy-gbs", "4299.5", "-o", str(study / "speed")])
    assert rc == 0
    assert json.loads((study / "speed" / "copy-bandwidth.json").read_text())["gbs"] == 4299.5
    md = (study / "report.md").read_text()
    assert "## Speed" in md and "## Decode step" in md
    assert "| fp8-all | 1 | 0.556 | 2.921 | 507 |" in md and "kernel-count bound at c=1" in md
    assert "Decode step" in (study / "report.html").read_text()


DEC03 = SESSION.parent / "2026-12-03-h200-seven-variant-study"


@pytest.fixture(scope="module")
def dec03(tmp_path_factory) -> Path:
    """The 2026-12-03 H200 study's decode profiles (study/speed.tar.xz, taken by its own servers: speed.profile)."""
    d = tmp_path_factory.mktemp("dec03")
    with tarfile.open(DEC03 / "study" / "speed.tar.xz") as t:
        t.extractall(d, filter="data")
    return d / "speed"


def test_the_gemm_time_by_kernel_tells_the_kernels_that_ran_apart(dec03):
    """Measured: vLLM's log names each kernel class once per process; the profile says how much of
    the step's GEMM time each one took — mixed runs FP8 Cutlass (attention, DeltaNet) and NVFP4 Marlin (MLP) beside
    cuBLAS (the BF16 LM head and DeltaNet's in_proj_a/b); w4a16-all with Machete disabled runs Marlin only."""
    from quantgate.schema.speed import load_step_profile
    from quantgate.speed.report import gemm_by_kernel

    mixed = gemm_by_kernel(load_step_profile(dec03 / "mixed" / "c1.profile.json"))
    assert {"CutlassFP8ScaledMMLinearKernel", "MarlinNvFp4LinearKernel", "cuBLAS (unquantized layers)"} <= set(mixed)
    assert sum(t.share_of_gemm for t in mixed.values()) == pytest.approx(1.0)
    assert mixed["MarlinNvFp4LinearKernel"].launches_per_step == 64  # gate_up and down_proj in each of 32 layers
    marlin = gemm_by_kernel(load_step_profile(dec03 / "w4a16-all-marlin" / "c1.profile.json"))
    assert "MacheteLinearKernel" not in marlin and marlin["MarlinLinearKernel"].share_of_gemm > 0.5
    bf16 = gemm_by_kernel(load_step_profile(dec03 / "bf16" / "c32.profile.json"))
    assert list(bf16) == ["cuBLAS (unquantized layers)"]
