"""Nvfp4-all's build was refused by one calibration page of 4,342 tokens against its max_seq_len 4096
(lab/2026-12-02-h200-4b-study/study-nvfp4.log). A page too long is now left out with a warning, the
build refused only when no page fits; the preset's bound holds the session's ~4 MP pages."""

from __future__ import annotations

import re

import pytest

from quantgate.errors import InputError
from quantgate.quantize.calibrate import calibration_samples
from quantgate.recipes import load_recipe
from tests.support.paths import REPO

READER = REPO / "quantgate" / "assets" / "reader"


@pytest.fixture(scope="module")
def pages_and_processor(tmp_path_factory):
    from transformers import AutoProcessor

    from quantgate.heldout.synth import synth_pages

    out = tmp_path_factory.mktemp("cal") / "pages"
    synth_pages(out, 8, seed=3, calibration_fraction=1.0, profile="doc")
    return out, AutoProcessor.from_pretrained(READER)


def test_pages_longer_than_max_seq_len_are_left_out_with_a_warning(pages_and_processor):
    pages, proc = pages_and_processor
    samples, ids = calibration_samples(proc, pages, "Read the page.", 8, 10**6)
    lengths = {i: s["input_ids"].shape[1] for i, s in zip(ids, samples, strict=True)}
    assert len(set(lengths.values())) > 1  # the pages differ in length (their truth text)
    bound = sorted(lengths.values())[len(lengths) // 2]
    said = []
    kept, kept_ids = calibration_samples(proc, pages, "Read the page.", 8, bound, warn=said.append)
    assert kept_ids == [i for i in ids if lengths[i] <= bound]  # in order, none cut
    assert all(s["input_ids"].shape[1] == lengths[i] for i, s in zip(kept_ids, kept, strict=True))
    long = [i for i in ids if lengths[i] > bound]
    assert long and len(said) == 1 and all(f"{i} ({lengths[i]} tokens)" in said[0] for i in long)
    assert f"{len(long)} of {len(ids)} page(s)" in said[0]
    with pytest.warns(UserWarning, match="left out"):  # without warn (sensitivity's call): a Python warning
        calibration_samples(proc, pages, "Read the page.", 8, bound)


def test_no_page_fitting_refuses_naming_every_page(pages_and_processor):
    pages, proc = pages_and_processor
    with pytest.raises(InputError, match="every calibration page is longer than max_seq_len 64") as e:
        calibration_samples(proc, pages, "Read the page.", 8, 64)
    assert str(e.value).count("tokens)") == 8 and "--max-seq-len" in str(e.value)


@pytest.mark.parametrize("preset", ["nvfp4-all", "nvfp4", "mixed", "harmful-all-nvfp4"])  # the calibrated presets
def test_calibrated_presets_hold_the_page_nvfp4_all_refused(preset):
    log = (REPO / "lab" / "2026-12-02-h200-4b-study" / "study-nvfp4.log").read_text()
    refused = int(re.search(r"(\d+) tokens exceed max_seq_len", log).group(1))
    assert load_recipe(preset).recipe.calibration.max_seq_len >= refused
