"""The shipped reader and the rewrite that made it servable by vLLM (training/widen_values.py)."""

import json
import subprocess
import sys

import torch

from tests.support import fixtures
from tests.support.paths import REPO

ROOT = REPO


def test_shipped_reader_has_the_shape_vllm_needs():
    tc = json.loads((ROOT / "quantgate/assets/reader/config.json").read_text())["text_config"]
    assert tc["linear_key_head_dim"] == tc["linear_value_head_dim"]
    assert (ROOT / "quantgate/assets/reader/model.safetensors").stat().st_size < 10_500_000


def test_widening_value_heads_changes_no_output(tmp_path):
    from transformers import AutoModelForImageTextToText, Qwen3_5Config, Qwen3_5ForConditionalGeneration

    src = tmp_path / "narrow"
    fixtures.build_qwen3_5(src)
    cfg = json.loads((src / "config.json").read_text())
    cfg["text_config"]["linear_value_head_dim"] = 16  # the first reader's shape, which vLLM 0.26 refused
    torch.manual_seed(1)
    model = Qwen3_5ForConditionalGeneration(Qwen3_5Config(**cfg)).to(torch.float32)
    with torch.no_grad():  # DeltaNet weights far from init so a wrong rewrite shows
        for n, p in model.named_parameters():
            if "linear_attn" in n:
                p.normal_(0, 0.2)
    model.save_pretrained(src)
    p = subprocess.run([sys.executable, str(ROOT / "training/widen_values.py"), str(src), str(tmp_path / "wide")],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    wide = json.loads((tmp_path / "wide/config.json").read_text())["text_config"]
    assert wide["linear_value_head_dim"] == 32
    a = AutoModelForImageTextToText.from_pretrained(src, dtype=torch.float32).eval()
    b = AutoModelForImageTextToText.from_pretrained(tmp_path / "wide", dtype=torch.float32).eval()
    ids = torch.randint(0, 256, (2, 24), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        la, lb = a(input_ids=ids).logits, b(input_ids=ids).logits
    assert la.abs().max() > 1.0  # the comparison is not between two near-zero tensors
    assert torch.allclose(la, lb, atol=1e-4, rtol=1e-4), (la - lb).abs().max()
    # and refuses a second pass rather than silently doing nothing
    q = subprocess.run([sys.executable, str(ROOT / "training/widen_values.py"), str(tmp_path / "wide"),
                        str(tmp_path / "again")], capture_output=True, text=True)
    assert q.returncode != 0 and "already equals" in q.stderr
