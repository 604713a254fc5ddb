"""The w4a16-all and nvfp4-all presets the GPU plan measures — every decoder projection in the format,
the rest BF16 — resolved against the committed 4B-class plan (quantize's manifest of 2026-11-30)."""

import gzip
import json

import pytest

from quantgate.recipes import ModuleInfo, load_recipe, resolve
from tests.support.paths import REPO

DECODER = ("attention", "linear_attention", "mlp")


def _modules() -> tuple[list[ModuleInfo], int]:
    path = REPO / "lab" / "2026-11-30-h200-serving-options" / "q4b-fp8-all.quantgate.json.gz"
    rows = json.loads(gzip.decompress(path.read_bytes()))["plan"]["modules"]
    mods = [ModuleInfo(r["module"], r["kind"], r["layer"], r["shape"][1], r["shape"][0]) for r in rows]
    return mods, 1 + max(m.layer for m in mods if m.layer is not None)


@pytest.mark.parametrize("preset,fmt", [("w4a16-all", "w4a16"), ("nvfp4-all", "nvfp4")])
def test_every_decoder_projection_takes_the_format_and_nothing_else_does(preset, fmt):
    mods, n_layers = _modules()
    recipe = load_recipe(preset)
    plan, warnings = resolve(recipe.recipe, mods, n_layers, where=preset)
    assert warnings == []  # the 4B shape's narrowest projections (in_proj_a/b: 32 x 2560) fit both formats
    decoder = [m for m in mods if m.kind in DECODER]
    assert len(decoder) == 24 * 5 + 8 * 4 + 32 * 3
    assert all(plan[m.name] == fmt for m in decoder)
    assert all(plan[m.name] == "bf16" for m in mods if m.kind not in DECODER)  # vision, projector, lm_head
    if fmt == "nvfp4":  # calibrated global activation scales: 16 pages, as the GPU plan builds it
        assert recipe.recipe.calibration.samples == 16
