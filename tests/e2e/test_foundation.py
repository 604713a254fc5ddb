"""Tiny real checkpoints load, generate and are served by `transformers serve`; the CLI
answers --help and fails cleanly on bad input."""

import base64
import io
import json
import subprocess
import sys

import httpx
import pytest
import torch
from PIL import Image, ImageDraw

from tests.support import fixtures


def page_png(text="hello 42") -> bytes:
    img = Image.new("RGB", (256, 192), "white")
    ImageDraw.Draw(img).text((10, 10), text, fill="black")
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    return buf.getvalue()


@pytest.mark.parametrize("arch", fixtures.ARCHITECTURES)
def test_fixture_loads_and_generates(tiny_models, arch):
    from transformers import AutoModelForImageTextToText, AutoProcessor

    path = tiny_models[arch]
    cfg = json.loads((path / "config.json").read_text())
    assert (path / "model.safetensors").is_file() and not list(path.glob("*.bin"))
    proc = AutoProcessor.from_pretrained(path)
    model = AutoModelForImageTextToText.from_pretrained(path).eval()
    # Kernel-friendly shapes: every decoder Linear is a multiple of 16 wide on both sides.
    for name, mod in model.named_modules():
        if isinstance(mod, torch.nn.Linear) and "visual" not in name and "vision" not in name:
            assert mod.in_features % 16 == 0 and mod.out_features % 16 == 0, name
    if arch == "qwen3_5":
        rp = cfg["text_config"]["rope_parameters"]
        assert sum(rp["mrope_section"]) == cfg["text_config"]["head_dim"] * rp["partial_rotary_factor"] / 2
    msgs = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "Read this page."}]}]
    text = proc.apply_chat_template(msgs, add_generation_prompt=True, tokenize=False)
    assert text.count("<|image_pad|>" if arch != "llava" else "<image>") == 1
    inputs = proc(text=[text], images=[Image.open(io.BytesIO(page_png()))], return_tensors="pt")
    n_image_tokens = int((inputs["input_ids"] == model.config.image_token_id).sum())
    assert n_image_tokens > 1, "the processor must expand the image placeholder into image tokens"
    with torch.no_grad():
        out = model.generate(**inputs, max_new_tokens=5, do_sample=False)
    assert out.shape[1] == inputs["input_ids"].shape[1] + 5 or int(out[0, -1]) == model.generation_config.eos_token_id


@pytest.mark.parametrize("arch", fixtures.ARCHITECTURES)
def test_fixture_served_by_transformers_serve(tiny_models, arch, tmp_path):
    from quantgate.serve.backends.transformers import TransformersBackend

    path = tiny_models[arch]
    url = "data:image/png;base64," + base64.b64encode(page_png()).decode()
    with TransformersBackend().server(path, tmp_path / "server.log") as srv:
        r = httpx.post(f"{srv.base_url}/chat/completions", timeout=120, json={
            "model": str(path), "max_tokens": 6, "temperature": 0,
            "messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": url}},
                                                      {"type": "text", "text": "Read this page."}]}]})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["object"] == "chat.completion"
    assert isinstance(body["choices"][0]["message"]["content"], str)
    # The image really reached the model: far more prompt tokens than the text alone.
    assert body["usage"]["prompt_tokens"] > 40
    assert not srv.alive()


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "quantgate", *args], capture_output=True, text=True, timeout=120)


def test_help_lists_verbs():
    r = _cli("--help")
    assert r.returncode == 0
    for verb in ("pages", "doctor"):
        assert verb in r.stdout


def test_unknown_verb_is_one_clear_line():
    r = _cli("frobnicate")
    assert r.returncode == 64
    assert "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "frobnicate" in r.stderr


def test_missing_required_path_is_one_clear_line(tmp_path):
    r = _cli("pages", "check", str(tmp_path / "nope"))
    assert r.returncode == 64 and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "nope" in r.stderr


def test_doctor_reports_versions_and_missing_vllm():
    r = _cli("doctor", "--json", "--vllm-cmd", "/nonexistent/vllm")
    assert r.returncode == 0
    info = json.loads(r.stdout)
    assert info["packages"]["transformers"] == "5.17.0"
    assert info["vllm"]["version"] is None and "did not run" in info["vllm"]["status"]
