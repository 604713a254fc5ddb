"""The ``fp8-all`` preset (FP8 also on the Gated DeltaNet projections, as llmcompressor's
generic FP8_DYNAMIC does) and ``fp8-all-lm-head``: planned by the width rules, quantized and verified on the
tiny fixture and on the bundled reader; a tied LM head is refused."""

import json

import pytest

from quantgate.errors import InputError
from quantgate.quantize import make_plan, quantize
from quantgate.quantize.verify import verify_checkpoint
from quantgate.recipes import load_recipe
from quantgate.study.demo import READER

DELTANET = ("in_proj_qkv", "in_proj_z", "in_proj_a", "in_proj_b", "out_proj")


def _formats(plan):
    return {r["module"]: (r["kind"], r["format"]) for r in plan.rows()}


@pytest.mark.parametrize("model", ["fixture", "reader"])
def test_fp8_all_quantizes_every_decoder_projection_and_verifies(tiny_models, tmp_path, model):
    src = tiny_models["qwen3_5"] if model == "fixture" else READER
    m = quantize(src, "fp8-all", tmp_path / "fp8-all", log=lambda s: None).manifest.model_dump()  # raises if verification fails
    planned = {r["module"]: r["format"] for r in m["plan"]["modules"]}
    kinds = {r["module"]: r["kind"] for r in m["plan"]["modules"]}
    assert verify_checkpoint(tmp_path / "fp8-all", planned, kinds).modules_checked == len(planned)
    by_kind = {}
    for name, fmt in planned.items():
        by_kind.setdefault(kinds[name], set()).add(fmt)
    assert by_kind["linear_attention"] == by_kind["attention"] == by_kind["mlp"] == {"fp8"}
    assert by_kind["vision"] == by_kind["projector"] == by_kind["lm_head"] == {"bf16"}
    assert {n.rsplit(".", 1)[1] for n, f in planned.items() if kinds[n] == "linear_attention"} == set(DELTANET)
    cfg = json.loads((tmp_path / "fp8-all" / "config.json").read_text())["quantization_config"]
    targets = [t for g in cfg["config_groups"].values() for t in g["targets"]]
    assert any("linear_attn\\.in_proj_a" in t for t in targets) and any("linear_attn\\.out_proj" in t for t in targets)
    # more of the checkpoint in FP8 than the preset that keeps the DeltaNet projections BF16
    dyn = quantize(src, "fp8-dynamic", tmp_path / "fp8-dynamic", log=lambda s: None).manifest.model_dump()
    assert m["size"]["weights_bytes"] < dyn["size"]["weights_bytes"]


def test_narrow_gate_projections_stay_bf16_by_the_width_rule(tmp_path):
    from tests.support.fixtures import build_qwen3_5

    src = tmp_path / "narrow"
    build_qwen3_5(src)
    cfg = json.loads((src / "config.json").read_text())
    cfg["text_config"]["linear_num_value_heads"] = 8  # in_proj_a/b: 8 outputs, fitting no FP8 kernel
    (src / "config.json").write_text(json.dumps(cfg))
    plan = make_plan(src, load_recipe("fp8-all"))
    rows = _formats(plan)
    gates = {f for n, (k, f) in rows.items() if n.endswith(("in_proj_a", "in_proj_b"))}
    rest = {f for n, (k, f) in rows.items() if k == "linear_attention" and not n.endswith(("in_proj_a", "in_proj_b"))}
    assert gates == {"bf16"} and rest == {"fp8"} and any("in_proj_a" in w for w in plan.warnings)


def test_fp8_lm_head_on_an_untied_model_and_refused_on_a_tied_one(tmp_path):
    import shutil

    m = quantize(READER, "fp8-all-lm-head", tmp_path / "lm", log=lambda s: None).manifest.model_dump()
    assert {r["module"]: r["format"] for r in m["plan"]["modules"]}["lm_head"] == "fp8"
    tied = tmp_path / "tied"
    shutil.copytree(READER, tied)
    cfg = json.loads((tied / "config.json").read_text())
    cfg["tie_word_embeddings"] = cfg["text_config"]["tie_word_embeddings"] = True
    (tied / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(InputError, match="quantize lm_head, which this model ties to its input embeddings"):
        make_plan(tied, load_recipe("fp8-all-lm-head"))
    assert _formats(make_plan(tied, load_recipe("fp8-all")))["lm_head"] == ("lm_head", "bf16")
