"""What `transformers serve` computes per quantized format — measured, not assumed —
and the numerics record/notes quantgate writes from it."""

import importlib.metadata as md
import io
import json
from pathlib import Path

import httpx
import pytest

from quantgate.errors import InputError
from quantgate.serve.numerics import (
    MEASURED_BY,
    MEASURED_WITH,
    TRANSFORMERS_CPU,
    numerics_notes,
    scheme_format,
    variant_formats,
    variant_numerics,
)
from tests.support.paths import DATA

ALL_FORMATS = DATA / "all-formats.yaml"


@pytest.fixture(scope="module")
def all_formats_variant(tmp_path_factory, synth_pageset):
    """The tiny Qwen3.5 with every quantized format quantgate produces, each on its own modules."""
    from quantgate.quantize import quantize
    from tests.support import fixtures

    root = tmp_path_factory.mktemp("numerics")
    src = fixtures.build("qwen3_5", root / "tiny")
    return quantize(src, ALL_FORMATS, root / "all-formats", calibration=synth_pageset, samples=2,
                    log=lambda s: None).manifest.model_dump(), root / "all-formats"


def _page(synth_pageset):
    from PIL import Image

    from quantgate.io.pageset import load_pageset

    ps = load_pageset(synth_pageset)
    return Image.open(io.BytesIO(ps.image_bytes(ps.split("heldout")[0]))).convert("RGB")


@pytest.mark.slow
def test_transformers_serve_numerics_per_format(all_formats_variant, synth_pageset):
    """Each quantized module, loaded through `transformers serve`'s own ModelManager, on a page's
    activations and on a Gaussian of the same RMS: W8A8/W4A4 formats differ from x @ W_deq.T by
    more than rounding noise and equal the product with activations rounded by a by-hand reference;
    weight-only formats equal x @ W_deq.T. The conclusion must be the one TRANSFORMERS_CPU states."""
    from quantgate.serve.numerics import measure_transformers_serve

    manifest, variant = all_formats_variant
    # the claims in quantgate.serve.numerics hold for the versions measured; a new version re-measures
    assert {p: md.version(p) for p in MEASURED_WITH} == MEASURED_WITH
    planned = {r["format"] for r in manifest["plan"]["modules"]} - {"bf16"}
    assert set(variant_formats(variant)[1]) == planned == set(TRANSFORMERS_CPU)

    rows = measure_transformers_serve(variant, image=_page(synth_pageset))
    assert {r["format"] for r in rows} == planned  # every format reached by the forward (vision included)
    # lower bounds: half the error FP8 / FP4 activation rounding gave here (fp8 ~2.6%, nvfp4 ~9.5%)
    floor = {"fp8": 0.013, "fp8-static": 0.013, "nvfp4": 0.04}
    for fmt in planned:
        mine = [r for r in rows if r["format"] == fmt]
        assert {r["status_at_load"] for r in mine} == {"compressed"}  # serve leaves the weights compressed at load,
        assert {r["status"] for r in mine} == {"decompressed"}  # unpacks them on the first forward,
        assert {r["weight_dtype"] for r in mine} == {"bfloat16"}  # to BF16: every matmul is a BF16 matmul
        computes, _ = TRANSFORMERS_CPU[fmt]
        for r in mine:
            assert r["input_dtype"] == "bfloat16"
            if computes == "weights+activations":
                assert r["activation_scheme"] is not None
                assert r["rel_err_vs_weight_only"] > floor[fmt], r
                assert r["rel_err_vs_activation_fake_quant"] < 1e-3, r
            else:
                assert r["activation_scheme"] is None
                assert r["equals_weight_only"], r
    nvfp4 = next(r for r in rows if r["format"] == "nvfp4")["activation_scheme"]
    assert (nvfp4["type"], nvfp4["num_bits"], nvfp4["group_size"], nvfp4["scale_dtype"]) == \
        ("float", 4, 16, "torch.float8_e4m3fn")  # what TRANSFORMERS_CPU says NVFP4 activations are


@pytest.mark.slow
def test_served_text_is_the_activation_quantized_forward(all_formats_variant, tmp_path):
    """End to end: a real `transformers serve` process (quantgate's TransformersBackend) answers with
    the text the in-process forward gives with activation quantization on — not with it off."""
    import torch
    from transformers.cli.serving.model_manager import ModelManager
    from transformers.cli.serving.utils import parse_assistant_message

    from quantgate.serve.backends.transformers import TransformersBackend

    _, variant = all_formats_variant
    n = 48
    messages = [{"role": "user", "content": [{"type": "text", "text": "Convert this page to markdown."}]}]
    with TransformersBackend().server(variant, tmp_path / "server.log") as srv:
        r = httpx.post(f"{srv.base_url}/chat/completions", timeout=300, json={
            "model": str(variant), "max_tokens": n, "temperature": 0, "messages": messages})
    assert r.status_code == 200, r.text
    served = r.json()["choices"][0]["message"]["content"]

    mm = ModelManager(device="cpu", dtype="auto", force_model=str(variant))
    timed = mm.loaded_models[mm.process_model_name(str(variant))]
    model, proc = timed.model, timed.processor
    inputs = proc.apply_chat_template(messages, add_generation_prompt=True, tokenize=True, return_dict=True,
                                      return_tensors="pt")
    quantized = [m for m in model.modules() if getattr(m, "quantization_scheme", None) is not None]

    def answer(activations_quantized: bool) -> str:
        # After the first forward the weights are dequantized in place and weight rounding is skipped,
        # so this switch turns off activation rounding only.
        for m in quantized:
            m.quantization_enabled = activations_quantized
        with torch.no_grad():
            out = model.generate(**inputs, max_new_tokens=n, do_sample=False)
        ids = out[0, inputs["input_ids"].shape[1]:]
        # the served content goes through serve's response parser: apply the same one
        return parse_assistant_message(proc, model, ids, inputs["input_ids"], proc.decode(ids, skip_special_tokens=True))[0]

    with_act, without_act = answer(True), answer(False)
    timed.delete_model()
    assert with_act != without_act  # else this input cannot tell the two apart
    assert served == with_act


# --- the record and the notes (no model) ------------------------------------------------------------

def _scheme(preset: str) -> dict:
    from compressed_tensors.quantization import preset_name_to_scheme

    return preset_name_to_scheme(preset, ["Linear"]).model_dump(mode="json")


def test_scheme_format_names_every_quantgate_preset():
    from quantgate.recipes.model import PRESET

    for fmt, preset in PRESET.items():
        assert scheme_format(_scheme(preset)) == fmt
    assert scheme_format(_scheme("W8A8")).startswith("other (int8 weights, int8 activations")


def _variant(tmp_path, presets: list[str], kv: bool = False) -> Path:
    groups = {f"group_{i}": {**_scheme(p), "targets": [f"re:.*layer{i}$"]} for i, p in enumerate(presets)}
    q = {"quant_method": "compressed-tensors", "format": "mixed-precision", "config_groups": groups,
         "kv_cache_scheme": {"num_bits": 8, "type": "float"} if kv else None}
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "x", "quantization_config": q}))
    return tmp_path


def test_transformers_numerics_on_cpu_are_the_measured_ones(tmp_path):
    v = _variant(tmp_path, ["FP8_DYNAMIC", "NVFP4", "W4A16", "W8A8"])
    rec = variant_numerics(v, "transformers", device="cpu", versions=dict(MEASURED_WITH))
    assert rec.quantized and list(rec.formats) == ["fp8", "nvfp4", "w4a16", "other (int8 weights, int8 activations)"]
    assert rec.formats["fp8"].computes == rec.formats["nvfp4"].computes == "weights+activations"
    assert rec.formats["w4a16"].computes == "weights-only" and "BF16" in rec.formats["w4a16"].activations
    assert "W4A4" in rec.formats["nvfp4"].activations
    assert {f.evidence for k, f in rec.formats.items() if k != "other (int8 weights, int8 activations)"} == {"measured"}
    assert {f.measured_by for k, f in rec.formats.items() if k.startswith(("fp8", "nvfp4", "w4"))} == {MEASURED_BY}
    other = rec.formats["other (int8 weights, int8 activations)"]
    assert (other.computes, other.evidence) == (None, "not measured")
    notes = numerics_notes(rec)
    assert any("nvfp4 runs weights+activations" in n and "Blackwell" in n for n in notes)
    assert any("fp8 runs weights+activations" in n for n in notes)
    assert any("BF16 matmuls" in n for n in notes)
    assert not any("activation quantization is not simulated" in n for n in notes)  # the old, unmeasured claim
    # a round trip through JSON (run.json / summary.json)
    assert type(rec).model_validate_json(rec.model_dump_json()) == rec


def test_transformers_numerics_elsewhere_are_not_measured(tmp_path):
    v = _variant(tmp_path, ["NVFP4"])
    other_version = variant_numerics(v, "transformers", device="cpu",
                                     versions={"transformers": "5.18.0", "compressed-tensors": "0.19.0"})
    on_gpu = variant_numerics(v, "transformers", device="cuda", versions=dict(MEASURED_WITH))
    for rec in (other_version, on_gpu):
        f = rec.formats["nvfp4"]
        assert (f.computes, f.evidence) == (None, "not measured")
        assert numerics_notes(rec) == [f"transformers serve ({rec.device}): nvfp4: weights-only or weights+activations "
                                       f"not measured ({f.detail})"]
    assert "5.18.0" in other_version.formats["nvfp4"].detail and "CPU only" in on_gpu.formats["nvfp4"].detail


def test_vllm_numerics_come_from_the_kernels_its_log_names(tmp_path):
    v = _variant(tmp_path, ["FP8_DYNAMIC", "NVFP4", "NVFP4A16"])
    kernels = {"CompressedTensorsW8A8Fp8": {"CutlassFP8ScaledMMLinearKernel": 1}, "NVFP4": {"MarlinNvFp4LinearKernel": 1}}
    rec = variant_numerics(v, "vllm", kernels=kernels)
    fp8, nvfp4, a16 = rec.formats["fp8"], rec.formats["nvfp4"], rec.formats["nvfp4a16"]
    assert (fp8.computes, fp8.kernel, fp8.evidence) == \
        ("weights+activations", "CutlassFP8ScaledMMLinearKernel", "kernel reported by vLLM's log")
    assert (nvfp4.computes, nvfp4.kernel) == ("weights-only", "MarlinNvFp4LinearKernel")
    assert "not measured" in nvfp4.detail and nvfp4.measured_by is None  # no GPU measurement yet
    assert (a16.computes, a16.evidence) == (None, "not measured")  # no kernel seen serving nvfp4a16
    notes = numerics_notes(rec)
    assert any("nvfp4 runs weights-only" in n and "not Blackwell's W4A4" in n for n in notes)
    # no log parsed (yet): nothing is claimed
    assert {f.evidence for f in variant_numerics(v, "vllm", kernels={}).formats.values()} == {"not measured"}
    assert {f.evidence for f in variant_numerics(v, "openai").formats.values()} == {"not measured"}


def test_unquantized_missing_and_broken_configs(tmp_path):
    (tmp_path / "bf16").mkdir()
    (tmp_path / "bf16" / "config.json").write_text(json.dumps({"model_type": "x"}))
    rec = variant_numerics(tmp_path / "bf16", "transformers")
    assert not rec.quantized and rec.formats == {} and numerics_notes(rec) == []
    assert variant_numerics(tmp_path / "absent", "openai").formats == {}  # an endpoint's model: no folder
    kv = variant_numerics(_variant(tmp_path / "kv", ["FP8_DYNAMIC"], kv=True), "transformers",
                          versions=dict(MEASURED_WITH))
    assert kv.kv_cache and any("KV cache" in n for n in numerics_notes(kv))
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "config.json").write_text("{not json")
    with pytest.raises(InputError, match=r"bad/config.json:1: not valid JSON"):
        variant_numerics(tmp_path / "bad", "transformers")
    (tmp_path / "bad" / "config.json").write_text(json.dumps({"quantization_config": {
        "quant_method": "compressed-tensors", "config_groups": ["x"]}}))
    with pytest.raises(InputError, match="config_groups"):
        variant_numerics(tmp_path / "bad", "transformers")


def test_reference_fp4_rounding_is_nearest_with_ties_to_even():
    import torch

    from quantgate.serve.numerics import _fp4_round

    x = torch.tensor([0.0, 0.2, 0.25, 0.3, 0.75, 1.25, 1.7, 1.75, 2.5, 2.6, 3.5, 4.9, 5.0, 5.1, 9.0])
    want = torch.tensor([0.0, 0.0, 0.0, 0.5, 1.0, 1.0, 1.5, 2.0, 2.0, 3.0, 4.0, 4.0, 4.0, 6.0, 6.0])
    assert torch.equal(_fp4_round(x), want)
    assert torch.equal(_fp4_round(-x), -want)
    assert _fp4_round(x.bfloat16()).dtype == torch.bfloat16
