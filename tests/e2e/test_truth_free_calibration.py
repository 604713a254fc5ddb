"""The truth-free verdict's calibration on texts (benchmarks/truth_free_calibration.py) at 60 studies per damage
cell and 40 per null cell: at a true mean damage of one margin — new errors on a share of pages, whole documents damaged, rare empty
outputs — the verdict passes at most 10% of studies (the committed run targets 6%), and with no
damage it passes where the design says it can: neutral edits with a mean bound of 0.4 margins on the bound alone,
1.1 margins only through the rectified verdict, identical outputs. Real scorer, real bounds, compare_outputs."""

import importlib.util
import sys

import pytest

from tests.support.paths import REPO


def _benchmark():
    spec = importlib.util.spec_from_file_location("tfc", REPO / "benchmarks" / "truth_free_calibration.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # its dataclasses resolve their annotations through the module
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.slow  # about 4 minutes on the 2-core machine
def test_truth_free_verdict_holds_its_error_and_passes_where_it_can():
    tf = _benchmark()
    cells = {c.name: c for c in tf.grid()}
    for name in ("600x5_r30/new_errors", "600x5_r10/documents", "400x1_r30/empty"):
        r = tf.run_cell(cells[name], 60, seed=7)
        assert r["within_noise"] <= 0.10, r  # at most 6 of 60
        assert abs(r["true_mean_damage"] - 0.01) < 1e-12
    for name, least in (("600x5_r10/neutral_0.4m", 0.7), ("600x5_r30/neutral_1.1m", 0.7),
                        ("400x1_r30/identical", 0.9)):
        r = tf.run_cell(cells[name], 40, seed=7)
        assert r["within_noise"] >= least, r
    one = tf.run_cell(cells["600x5_r30/neutral_1.1m"], 10, seed=8)
    assert set(one["methods"]) == {"rectified"}  # the bound alone is above the margin there
