"""Build a Qwen3.5-4B-class VLM with random weights, offline, for speed runs (no download possible).

Shape as published for Qwen3.5-4B: 32 decoder layers, hidden 2560, MLP 9216, three Gated DeltaNet
layers (16 key heads / 32 value heads, both 128 wide) to one gated attention layer (16 query / 4 KV
heads of 256), vocabulary 248,320 (tied embeddings), and a 24-layer vision encoder (width 1024,
patch 16, 2x2 merge). Random weights decide nothing about accuracy but everything about speed,
so runs with them use a fixed output length (``--ignore-eos``).

    python benchmarks/gpu/build_qwen3_5_4b.py OUT [--device cuda] [--max-pixels 4194304]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from quantgate import fixtures

VOCAB = 248320
TEXT = dict(hidden_size=2560, intermediate_size=9216, num_hidden_layers=32, num_attention_heads=16,
            num_key_value_heads=4, head_dim=256, linear_num_key_heads=16, linear_key_head_dim=128,
            linear_num_value_heads=32, linear_value_head_dim=128, linear_conv_kernel_dim=4,
            max_position_embeddings=32768, tie_word_embeddings=True)
VISION = dict(depth=24, hidden_size=1024, intermediate_size=4096, num_heads=16, patch_size=16, spatial_merge_size=2,
              temporal_patch_size=2, out_hidden_size=2560, num_position_embeddings=2304)


def build(out: Path, device: str = "cuda", max_pixels: int = 2048 * 2048, seed: int = 0) -> Path:
    import torch
    from transformers import Qwen3_5Config, Qwen3_5ForConditionalGeneration, Qwen3VLProcessor
    from transformers.models.qwen3_vl.video_processing_qwen3_vl import Qwen3VLVideoProcessor

    tok = fixtures.build_tokenizer(fixtures.QWEN_SPECIALS, vocab_size=VOCAB)
    assert len(tok) == VOCAB, len(tok)
    layers = TEXT["num_hidden_layers"]
    text = dict(TEXT, vocab_size=VOCAB, hidden_act="silu",
                layer_types=["full_attention" if (i + 1) % 4 == 0 else "linear_attention" for i in range(layers)],
                rope_parameters={"rope_type": "default", "rope_theta": 10_000_000.0, "partial_rotary_factor": 0.25,
                                 "mrope_section": [11, 11, 10], "mrope_interleaved": True},
                eos_token_id=tok.convert_tokens_to_ids("<|im_end|>"))
    assert sum(text["rope_parameters"]["mrope_section"]) == TEXT["head_dim"] * 0.25 / 2
    cfg = Qwen3_5Config(text_config=text, vision_config=VISION, tie_word_embeddings=True, **fixtures._qwen_ids(tok))
    torch.manual_seed(seed)
    with torch.device(device):
        torch.set_default_dtype(torch.bfloat16)
        model = Qwen3_5ForConditionalGeneration(cfg)
        torch.set_default_dtype(torch.float32)
    proc = Qwen3VLProcessor(image_processor=fixtures._qwen_image_processor(max_pixels), tokenizer=tok,
                            video_processor=Qwen3VLVideoProcessor(patch_size=16, merge_size=2, temporal_patch_size=2),
                            chat_template=fixtures.QWEN_TEMPLATE)
    model.to(torch.bfloat16)
    return fixtures._save_common(model, proc, Path(out))


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
