"""Recipes → plan → llmcompressor → compressed-tensors → verification, on every fixture
architecture and preset; refusals before any work; bad input."""

import base64
import io
import json
import shutil

import httpx
import pytest
import torch
import yaml
from PIL import Image

from quantgate.errors import InputError, UnsafeInputError, VerificationError
from quantgate.quantize import make_plan, quantize
from quantgate.quantize.verify import verify_checkpoint
from quantgate.recipes import list_presets, load_recipe
from tests.support import fixtures

PRESETS = ["bf16", "fp8-dynamic", "nvfp4", "nvfp4a16", "mixed", "harmful-all-nvfp4"]


def _png():
    buf = io.BytesIO()
    Image.new("RGB", (256, 192), "white").save(buf, format="PNG")
    return buf.getvalue()


def test_presets_ship():
    assert set(PRESETS) <= set(list_presets())


@pytest.mark.slow  # 1.5 to 3.5 minutes an architecture: every preset quantized, loaded and served
@pytest.mark.parametrize("arch", fixtures.ARCHITECTURES)
def test_every_preset_quantizes_verifies_loads_and_serves(tiny_models, synth_pageset, tmp_path, arch):
    from transformers import AutoModelForImageTextToText, AutoProcessor

    from quantgate.serve.backends.transformers import TransformersBackend

    url = "data:image/png;base64," + base64.b64encode(_png()).decode()
    src_bytes = (tiny_models[arch] / "model.safetensors").stat().st_size
    for preset in PRESETS:
        out = tmp_path / preset
        m = quantize(tiny_models[arch], preset, out, calibration=synth_pageset, samples=2, log=lambda s: None).manifest.model_dump()
        planned = {r["module"]: r["format"] for r in m["plan"]["modules"]}
        kinds = {r["module"]: r["kind"] for r in m["plan"]["modules"]}
        # the checkpoint says what the plan says, module by module
        assert verify_checkpoint(out, planned, kinds).modules_checked == len(planned)
        vision = [f for n, f in planned.items() if kinds[n] in ("vision", "projector")]
        assert vision and all(f == ("nvfp4" if preset == "harmful-all-nvfp4" else "bf16") for f in vision)
        if preset != "bf16":
            assert json.loads((out / "config.json").read_text())["quantization_config"]["quant_method"] == "compressed-tensors"
            assert m["size"]["weights_bytes"] < src_bytes and m["size"]["compression"] > 1.2
        needs_cal = preset in ("nvfp4", "mixed", "harmful-all-nvfp4")
        assert (len(m["calibration"]["page_ids"]) == 2) == needs_cal
        assert set(m["files"]) >= {"config.json", "model.safetensors"}
        # loads in transformers on CPU and generates
        model = AutoModelForImageTextToText.from_pretrained(out)
        proc = AutoProcessor.from_pretrained(out)
        text = proc.apply_chat_template([{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "Read."}]}],
                                        add_generation_prompt=True, tokenize=False)
        inp = proc(text=[text], images=[Image.open(io.BytesIO(_png()))], return_tensors="pt")
        with torch.no_grad():
            assert model.generate(**inp, max_new_tokens=3, do_sample=False).shape[1] > inp["input_ids"].shape[1]
        # and transformers serve serves it
        with TransformersBackend().server(out, tmp_path / f"{preset}.log") as srv:
            r = httpx.post(f"{srv.base_url}/chat/completions", timeout=120, json={
                "model": str(out), "max_tokens": 3, "temperature": 0,
                "messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": url}},
                                                          {"type": "text", "text": "Read."}]}]})
        assert r.status_code == 200 and r.json()["usage"]["completion_tokens"] >= 1, r.text


def test_plan_json_and_compression_figures(tiny_models):
    plan = make_plan(tiny_models["qwen3_5"], load_recipe("mixed"))
    rows = {r["module"]: r for r in plan.rows()}
    assert rows["model.language_model.layers.3.self_attn.q_proj"]["format"] == "fp8"
    assert rows["model.language_model.layers.0.linear_attn.in_proj_qkv"]["kind"] == "linear_attention"
    assert rows["model.language_model.layers.0.linear_attn.in_proj_a"]["format"] == "bf16"
    assert rows["model.language_model.layers.0.mlp.down_proj"]["format"] == "nvfp4"
    assert all(r["format"] == "bf16" for r in rows.values() if r["kind"] in ("vision", "projector", "lm_head"))
    t = plan.totals()
    assert t["estimated_bytes"] < t["bf16_bytes"] and t["compression"] > 1.5


def _recipe(tmp_path, body):
    f = tmp_path / "r.yaml"
    f.write_text(yaml.safe_dump(body))
    return f


def test_rule_matching_nothing_is_refused_before_work(tiny_models, tmp_path):
    f = _recipe(tmp_path, {"name": "x", "rules": [{"kinds": ["mlp"], "format": "fp8"},
                                                   {"match": "re:.*no_such_module$", "format": "nvfp4"}]})
    out = tmp_path / "out"
    with pytest.raises(InputError, match=r"rule 2 .*matches no module"):
        quantize(tiny_models["qwen2_5_vl"], f, out)
    assert not out.exists() and not list(tmp_path.glob(".out.*"))


def test_vision_needs_allow_vision(tiny_models, tmp_path):
    f = _recipe(tmp_path, {"name": "x", "rules": [{"kinds": ["vision"], "format": "fp8"}]})
    with pytest.raises(InputError, match="allow_vision"):
        make_plan(tiny_models["llava"], load_recipe(f))
    f = _recipe(tmp_path, {"name": "x", "allow_vision": True, "rules": [{"kinds": ["vision"], "format": "fp8"}]})
    assert any(r["format"] == "fp8" and r["kind"] == "vision" for r in make_plan(tiny_models["llava"], load_recipe(f)).rows())


@pytest.mark.parametrize("body,msg", [
    ({"name": "x", "rules": [{"kinds": ["mlp"], "format": "int3"}]}, r"rules\.0\.format"),
    ({"name": "x", "rules": [{"kinds": ["mlp"], "format": "fp8", "colour": 1}]}, r"rules\.0\.colour"),
    ({"name": "x", "rules": [{"layers": "first two", "format": "fp8"}]}, r"rules\.0\.layers"),
])
def test_bad_recipes_name_the_field(tmp_path, body, msg):
    with pytest.raises(InputError, match=msg):
        load_recipe(_recipe(tmp_path, body))


def test_fused_siblings_must_agree(tiny_models, tmp_path):
    f = _recipe(tmp_path, {"name": "x", "rules": [{"kinds": ["attention"], "format": "fp8"},
                                                   {"match": "re:.*q_proj$", "format": "nvfp4"}]})
    with pytest.raises(InputError, match="fuse"):
        make_plan(tiny_models["qwen2_5_vl"], load_recipe(f))


def test_layer_ranges(tiny_models, tmp_path):
    f = _recipe(tmp_path, {"name": "x", "rules": [{"kinds": ["mlp"], "format": "fp8"},
                                                   {"kinds": ["mlp"], "layers": {"last": 1}, "format": "bf16"}]})
    rows = make_plan(tiny_models["qwen3_5"], load_recipe(f)).rows()
    mlp = {r["layer"]: r["format"] for r in rows if r["kind"] == "mlp"}
    assert mlp == {0: "fp8", 1: "fp8", 2: "fp8", 3: "bf16"}


def test_narrow_modules_kept_bf16_with_warning(tmp_path):
    # A Qwen3.5 whose Gated DeltaNet has 8 value heads: in_proj_a/b are 8 wide, fitting no FP8 kernel.
    from tests.support.fixtures import build_qwen3_5

    src = tmp_path / "narrow"
    build_qwen3_5(src)
    cfg = json.loads((src / "config.json").read_text())
    cfg["text_config"]["linear_num_value_heads"] = 8
    cfg["text_config"]["linear_value_head_dim"] = 32
    (src / "config.json").write_text(json.dumps(cfg))
    f = _recipe(tmp_path, {"name": "x", "rules": [{"kinds": ["linear_attention"], "format": "fp8"}]})
    plan = make_plan(src, load_recipe(f))
    assert any("in_proj_a" in w and "divisible by 16" in w for w in plan.warnings)
    assert {r["format"] for r in plan.rows() if r["module"].endswith(("in_proj_a", "in_proj_b"))} == {"bf16"}


def test_pickle_only_and_remote_code_refused(tiny_models, tmp_path):
    pk = tmp_path / "pickle"
    pk.mkdir()
    shutil.copy(tiny_models["llava"] / "config.json", pk)
    (pk / "pytorch_model.bin").write_bytes(b"\x80\x04not really")
    with pytest.raises(UnsafeInputError, match="safetensors only"):
        make_plan(pk, load_recipe("fp8-dynamic"))
    rc = tmp_path / "remote"
    shutil.copytree(tiny_models["llava"], rc)
    cfg = json.loads((rc / "config.json").read_text())
    cfg["auto_map"] = {"AutoModel": "evil.Model"}
    (rc / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(UnsafeInputError, match="trust-remote-code"):
        make_plan(rc, load_recipe("fp8-dynamic"))


def test_output_holding_another_variant_is_refused(tiny_models, tmp_path):
    out = tmp_path / "v"
    quantize(tiny_models["llava"], "fp8-dynamic", out, log=lambda s: None)
    before = (out / "quantgate.json").read_bytes()
    again = quantize(tiny_models["llava"], "fp8-dynamic", out, log=lambda s: None).manifest.model_dump()  # same inputs: reused
    assert (out / "quantgate.json").read_bytes() == before and again["recipe"]["name"] == "fp8-dynamic"
    with pytest.raises(InputError, match="--overwrite"):
        quantize(tiny_models["llava"], "nvfp4a16", out, log=lambda s: None)
    assert (out / "quantgate.json").read_bytes() == before
    quantize(tiny_models["llava"], "nvfp4a16", out, overwrite=True, log=lambda s: None)
    assert json.loads((out / "quantgate.json").read_text())["recipe"]["name"] == "nvfp4a16"


def test_verification_catches_a_plan_mismatch(tiny_models, tmp_path):
    out = tmp_path / "v"
    m = quantize(tiny_models["qwen2_5_vl"], "fp8-dynamic", out, log=lambda s: None).manifest.model_dump()
    planned = {r["module"]: r["format"] for r in m["plan"]["modules"]}
    kinds = {r["module"]: r["kind"] for r in m["plan"]["modules"]}
    wrong = dict(planned)
    victim = next(n for n, f in planned.items() if kinds[n] == "vision")
    wrong[victim] = "fp8"  # as if a regex had silently caught a vision module
    with pytest.raises(VerificationError, match=victim.replace(".", r"\.")):
        verify_checkpoint(out, wrong, kinds)


def test_raw_llmcompressor_recipe_accepted(tiny_models, tmp_path):
    raw = {"quant_stage": {"quant_modifiers": {"QuantizationModifier": {
        "targets": ["Linear"], "scheme": "FP8_DYNAMIC",
        "ignore": ["re:.*lm_head", "re:.*visual.*", "re:.*merger.*"]}}}}
    f = tmp_path / "raw.yaml"
    f.write_text(yaml.safe_dump(raw))
    m = quantize(tiny_models["qwen2_5_vl"], f, tmp_path / "v", log=lambda s: None).manifest.model_dump()
    fmts = {r["kind"]: set() for r in m["plan"]["modules"]}
    for r in m["plan"]["modules"]:
        fmts[r["kind"]].add(r["format"])
    assert fmts["mlp"] == {"fp8"} and fmts["vision"] == {"bf16"} and fmts["lm_head"] == {"bf16"}


def _tie_embeddings(src, dst):
    # The tiny Qwen3.5 with its LM head tied to the embedding table, as Qwen3.5-4B ships: no lm_head tensor.
    from safetensors.torch import load_file, save_file

    shutil.copytree(src, dst)
    cfg = json.loads((dst / "config.json").read_text())
    cfg["tie_word_embeddings"] = cfg["text_config"]["tie_word_embeddings"] = True
    (dst / "config.json").write_text(json.dumps(cfg))
    w = {k: v for k, v in load_file(str(dst / "model.safetensors")).items() if k != "lm_head.weight"}
    save_file(w, str(dst / "model.safetensors"), metadata={"format": "pt"})


def test_tied_lm_head_verifies_but_a_missing_module_does_not(tiny_models, tmp_path):
    _tie_embeddings(tiny_models["qwen3_5"], tmp_path / "tied")
    quantize(tmp_path / "tied", "fp8-dynamic", tmp_path / "out", log=lambda s: None)  # raises if verification fails
    assert verify_checkpoint(tmp_path / "out", {"lm_head": "bf16"}, {"lm_head": "lm_head"}).formats == {"bf16": 1}
    cfg = json.loads((tmp_path / "out" / "config.json").read_text())
    cfg["tie_word_embeddings"] = cfg["text_config"]["tie_word_embeddings"] = False  # now nothing stands in for it
    (tmp_path / "out" / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(VerificationError, match="lm_head.*no tensors"):
        verify_checkpoint(tmp_path / "out", {"lm_head": "bf16"}, {"lm_head": "lm_head"})


# --- every option that changes the weights is in the fingerprint ------------------------

def _copy_pageset(src, dst):
    shutil.copytree(src, dst)
    return dst


def test_every_option_that_changes_the_weights_is_in_the_fingerprint(synth_pageset, tmp_path, monkeypatch):
    """input_fingerprint decides reuse. Each input that changes the weights flips it; what does not
    (a README, the held-out pages, more samples than the split holds, the device) leaves it alone."""
    import quantgate.quantize.build as qrun
    from quantgate.io.pageset import load_pageset
    from quantgate.quantize.build import input_fingerprint

    model = tmp_path / "m"
    model.mkdir()
    for name, data in {"model.safetensors": b"w", "config.json": b"{}", "chat_template.jinja": b"t",
                       "tokenizer.json": b"{}", "README.md": b"r"}.items():
        (model / name).write_bytes(data)
    nvfp4 = load_recipe("nvfp4")
    kw = {"samples": 2, "max_seq_len": 512, "prompt": "p", "pipeline": "basic", "text_only": False}

    def fp(recipe=nvfp4, cal=synth_pageset, **over):
        return input_fingerprint(model, recipe, cal, **{**kw, **over}).model_dump()

    base = fp()
    assert base["samples"] == 2 and base["text_only"] is False and set(base["model_files"]) == \
        {"config.json", "chat_template.jinja", "tokenizer.json"}
    for key, value in {"text_only": True, "pipeline": "sequential", "samples": 1, "max_seq_len": 256,
                       "prompt": "q"}.items():
        assert fp(**{key: value})[key] != base[key], key
    assert fp(recipe=load_recipe("fp8-dynamic")) != base
    # the calibration pages: an image or a truth of a page used changes it; a held-out page does not
    ps = load_pageset(synth_pageset)
    used = ps.split("calibration")[:2]
    for what in ("image", "truth"):
        cal = _copy_pageset(synth_pageset, tmp_path / f"cal-{what}")
        with open(cal / getattr(used[0], what), "ab") as f:
            f.write(b"\n")
        assert fp(cal=cal)["calibration_pages_sha256"] != base["calibration_pages_sha256"], what
    cal = _copy_pageset(synth_pageset, tmp_path / "cal-heldout")
    (cal / ps.split("heldout")[0].image).write_bytes(b"another image")
    assert fp(cal=cal) == base
    assert fp(samples=100) == fp(samples=len(ps.split("calibration")))  # counts the pages used
    # the source model: weights, config, chat template; not its README
    for name in ("model.safetensors", "config.json", "chat_template.jinja"):
        old = (model / name).read_bytes()
        (model / name).write_bytes(old + b" ")
        assert fp() != base, name
        (model / name).write_bytes(old)
    (model / "README.md").write_text("edited")
    assert fp() == base
    # the packages that quantize and write the format
    real = qrun.package_versions
    monkeypatch.setattr(qrun, "package_versions", lambda names: {**real(names), "llmcompressor": "0.0.1"})
    assert fp() != base
    monkeypatch.setattr(qrun, "package_versions", real)
    # without calibration data the calibration options change nothing
    none = input_fingerprint(model, load_recipe("fp8-dynamic"), None, **kw).model_dump()
    assert none == input_fingerprint(model, load_recipe("fp8-dynamic"), None,
                                     **{**kw, "text_only": True, "pipeline": "sequential", "samples": 9,
                                        "prompt": "q"}).model_dump()
    assert (none["calibration_pages_sha256"], none["text_only"], none["pipeline"]) == (None, None, None)


def test_text_only_calibration_after_an_image_one_rebuilds(tiny_models, synth_pageset, tmp_path):
    """The bug: a --text-only run after an image-calibrated one "reused" the old variant."""
    out = tmp_path / "v"
    logs = []
    first = quantize(tiny_models["llava"], "nvfp4", out, calibration=synth_pageset, samples=2, log=logs.append).manifest.model_dump()
    assert first["calibration"]["text_only"] is False and first["inputs"]["text_only"] is False
    with pytest.raises(InputError, match=r"built from other inputs \(text_only\).*--overwrite"):
        quantize(tiny_models["llava"], "nvfp4", out, calibration=synth_pageset, samples=2, text_only=True,
                 log=logs.append)
    again = quantize(tiny_models["llava"], "nvfp4", out, calibration=synth_pageset, samples=2, text_only=True,
                     overwrite=True, log=logs.append).manifest.model_dump()
    assert again["calibration"]["text_only"] is True and again["inputs"]["text_only"] is True
    assert any("rebuilding" in x for x in logs) and not any("reusing" in x for x in logs)
    assert json.loads((out / "quantgate.json").read_text())["inputs"] == again["inputs"]
    assert again["files"] != first["files"]  # other calibration data, other scales
