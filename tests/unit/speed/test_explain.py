"""What bounds a variant's decode step, from its GPU ms and kernels per step, its decode weight
bytes and the measured copy bandwidth — on the committed H200 profiles (2026-11-30, both periods)."""

import gzip
import json

import pytest

from quantgate.speed.explain import explain_step
from tests.support.paths import REPO

RESULTS = REPO / "lab"  # the GPU sessions' committed results


def _committed() -> dict[str, dict]:
    out = {}
    for period in ("2026-11-30-h200-serving-options", "2026-11-30-h200-parallel-studies"):
        for v, e in json.loads(gzip.decompress((RESULTS / period / "profile.json.gz").read_bytes())).items():
            out[v] = e
    return out


def test_the_committed_variants_explain_themselves():
    got = {}
    for v, e in _committed().items():
        b = explain_step(e["gpu_ms_per_step"], e["kernels_per_step"], e["decode_weight_bytes"], e["hbm_copy_gbs"])
        # the bound is profile_step.py's own (weight bytes / the copy bandwidth of hbm.json), computed apart
        assert b.bound_ms == pytest.approx(e["bound_ms_per_step"], rel=1e-12)
        assert b.share == pytest.approx(e["bound_ms_per_step"] / e["gpu_ms_per_step"])
        got[v] = b
    assert set(got) == {"bf16", "fp8-dynamic", "fp8-all", "nvfp4", "mixed"}
    # BF16 reads its 8.41 GB in 1.96 of its 3.39 ms: the read is most of its step
    assert got["bf16"].label == "weight-read bound" and got["bf16"].sentence.startswith(
        "weight-read bound at c=1: reading its 8.41 GB of weights at 4,299.5 GB/s takes 1.96 ms, 58% of its 3.39 ms")
    # every quantized variant spends most of its step beyond its (smaller) read
    for v in ("fp8-dynamic", "fp8-all", "nvfp4", "mixed"):
        assert got[v].label == "kernel-count bound" and got[v].share < 0.5, v
    assert got["fp8-all"].sentence == ("kernel-count bound at c=1: 507 kernels, 2.92 ms/step (5.8 µs each); reading "
                                       "its 4.84 GB of weights at 4,299.5 GB/s would take 1.13 ms (39%), so fewer "
                                       "weight bytes buy little")


def test_the_label_follows_the_share_and_says_less_above_c1():
    bytes_ = 4_000_000_000
    read_ms = bytes_ / 4e12 * 1e3  # 1.0 ms at 4,000 GB/s
    assert explain_step(read_ms / 0.51, 500, bytes_, 4000.0).label == "weight-read bound"
    assert explain_step(read_ms / 0.49, 500, bytes_, 4000.0).label == "kernel-count bound"
    at32 = explain_step(read_ms / 0.3, 500, bytes_, 4000.0, concurrency=32)
    assert at32.label == "not weight-read bound" and "do not separate" in at32.sentence and "c=32" in at32.sentence
    with pytest.raises(ValueError, match="must be positive"):
        explain_step(3.0, 0, bytes_, 4000.0)
