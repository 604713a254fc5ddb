import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

REPO = Path(__file__).resolve().parent.parent
SHARED = REPO.parent / "shared"
OLMOCR_SAMPLE = SHARED / "data" / "olmocr-bench-sample"


@pytest.fixture(scope="session")
def tiny_models(tmp_path_factory):
    """The three fixture architectures, built once per test session (a few seconds each)."""
    from quantgate.testing import fixtures

    root = tmp_path_factory.mktemp("models")
    return {arch: fixtures.build(arch, root / arch) for arch in fixtures.ARCHITECTURES}


@pytest.fixture(scope="session")
def synth_pageset(tmp_path_factory):
    from quantgate.heldout.synth import synth_pages

    out = tmp_path_factory.mktemp("pages") / "synth"
    synth_pages(out, 10, seed=3, calibration_fraction=0.3)
    return out
