"""Build a Qwen3.5-4B-class VLM with random weights, offline, for speed runs (no download possible).

Shape as published for Qwen3.5-4B: 32 decoder layers, hidden 2560, MLP 9216, three Gated DeltaNet
layers (16 key heads / 32 value heads, both 128 wide) to one gated attention layer (16 query / 4 KV
heads of 256), vocabulary 248,320 (tied embeddings), and a 24-layer vision encoder (width 1024,
patch 16, 2x2 merge). Random weights decide nothing about accuracy but everything about speed,
so runs with them use a fixed output length (``--ignore-eos``).

    python lab/2026-12-03-h200-session-scripts/build_qwen3_5_4b.py OUT [--device cuda] [--max-pixels 4194304]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the fixtures live with the tests (tests/support)
from tests.support import fixtures  # noqa: E402

VOCAB = 248320
TEXT = dict(hidden_size=2560, intermediate_size=9216, num_hidden_layers=32, num_attention_heads=16,
            num_key_value_heads=4, head_dim=256, linear_num_key_heads=16, linear_key_head_dim=128,
            linear_num_value_heads=32, linear_value_head_dim=128, linear_conv_kernel_dim=4,
            max_position_embeddings=32768, tie_word_embeddings=True)
VISION = dict(depth=24, hidden_size=1024, intermediate_size=4096, num_heads=16, patch_size=16, spatial_merge_size=2,
              temporal_patch_size=2, out_hidden_size=2560, num_position_embeddings=2304)


def build(out: Path, device: str = "cuda", max_pixels: int = 2048 * 2048, seed: int = 0) -> Path:
    text = dict(TEXT, hidden_act="silu",
                rope_parameters={"rope_type": "default", "rope_theta": 10_000_000.0, "partial_rotary_factor": 0.25,
                                 "mrope_section": [11, 11, 10], "mrope_interleaved": True})
    # fp32 init of 4.5 B parameters would need 18 GB; on the GPU in BF16 it takes seconds
    import torch

    torch.set_default_dtype(torch.bfloat16)
    try:
        return fixtures.build_qwen3_5(out, seed=seed, max_pixels=max_pixels, vocab_size=VOCAB, text_overrides=text,
                                      vision_overrides=VISION, device=device)
    finally:
        torch.set_default_dtype(torch.float32)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--max-pixels", type=int, default=2048 * 2048)
    a = ap.parse_args(argv)
    out = build(a.out, a.device, a.max_pixels)
    n = sum(f.stat().st_size for f in out.glob("*.safetensors"))
    print(f"{out}: {n / 1e9:.2f} GB of safetensors")
    return 0


if __name__ == "__main__":
    sys.exit(main())
