"""The truth-free verdict's calibration on texts (benchmarks/truth_free_calibration.py), every cell of its grid at
300 studies, through the real scorer, the real bounds and ``compare_outputs`` at the verdict's resamples. At a true
mean damage of one margin (new errors on a share of pages, whole documents damaged, rare empty outputs, neutral
edits with new errors on top, on each of the three designs) and with a baseline that cannot read, the verdict
passes at most 10% of studies in every cell (the committed run targets 6%, its 95% upper bound 7%). With no damage
it passes where the design says it can, at the targets: neutral edits with a mean bound of 0.4 margins on 3,000
pages with 10 documents labeled at random >= 80%; 1.1 margins, only through the rectified verdict, >= 80%;
identical outputs on 400 one-page documents >= 95%. About 5 minutes of one core on the 2-core machine."""

import importlib.util
import sys

import pytest

from tests.support.paths import REPO

STUDIES = 300  # per cell: a false-pass rate of 10% is 30 passes, and a cell at 6% exceeds it with chance 0.25%
SEED = 7  # not the committed run's: the test is an independent draw of the same grid


def _benchmark():
    spec = importlib.util.spec_from_file_location("tfc", REPO / "benchmarks" / "truth_free_calibration.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # its dataclasses resolve their annotations through the module
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.slow  # about 5 minutes of one core
def test_truth_free_verdict_holds_its_error_in_every_cell_and_passes_where_it_can():
    tf = _benchmark()
    cells = tf.grid()
    damage = [c for c in cells if c.target == "false_pass"]
    assert len(damage) == 13 and sum(c.mode == "unreadable" for c in damage) == 1  # the whole grid, not a sample
    for cell in damage:
        r = tf.run_cell(cell, STUDIES, seed=SEED)
        assert r["studies"] == STUDIES
        assert r["within_noise"] <= 0.10, r
        if cell.mode != "unreadable":
            assert abs(r["true_mean_damage"] - 0.01) < 1e-12
    least = {"600x5_r10/neutral_0.4m": 0.8, "600x5_r30/neutral_1.1m": 0.8, "400x1_r30/identical": 0.95}
    power = {c.name: c for c in cells if c.target == "power"}
    assert set(power) == set(least)
    for name, target in least.items():
        assert power[name].power_target == target  # the grid's target is the one asserted here
        r = tf.run_cell(power[name], STUDIES, seed=SEED)
        assert r["within_noise"] >= target, r
        if name == "600x5_r30/neutral_1.1m":
            assert set(r["methods"]) == {"rectified"}  # the bound alone is above the margin there
