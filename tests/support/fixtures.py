"""Tiny *real* VLM checkpoints built offline, in seconds, for tests and the demo.

Each is a genuine transformers architecture (random weights unless trained) saved as safetensors
with a byte-level BPE tokenizer, a processor ``AutoProcessor`` loads, and a chat template that
inserts the image tokens. Shapes follow the rules the real kernels impose: linear widths are
multiples of 16 (NVFP4 groups of 16; FP8 GEMM tiles), and for Qwen3.5
``sum(mrope_section) == head_dim * partial_rotary_factor / 2`` so vLLM accepts the checkpoint.
"""

from __future__ import annotations

import json
from pathlib import Path

ARCHITECTURES = ("qwen3_5", "qwen2_5_vl", "llava")

QWEN_SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|vision_start|>", "<|vision_end|>",
                 "<|image_pad|>", "<|video_pad|>"]
LLAVA_SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<image>"]
VOCAB_SIZE = 320  # 256 bytes + specials, rounded up to a multiple of 16

QWEN_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}{% else %}"
    "{% for c in message['content'] %}"
    "{% if c['type'] in ('image', 'image_url') %}<|vision_start|><|image_pad|><|vision_end|>"
    "{% elif c['type'] == 'text' %}{{ c['text'] }}{% endif %}{% endfor %}{% endif %}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
LLAVA_TEMPLATE = QWEN_TEMPLATE.replace("<|vision_start|><|image_pad|><|vision_end|>", "<image>\n")


def _bytes_to_unicode() -> dict[int, str]:
    # GPT-2's reversible byte→printable-char table, which ByteLevel pre-tokenization expects.
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs, strict=True)}


def build_tokenizer(specials: list[str], vocab_size: int | None = None):
    """Byte-level BPE over raw bytes (no merges): any text round-trips, one token per byte.

    ``vocab_size`` pads the vocabulary with filler tokens (lowercase strings no merge produces) so a
    production-sized embedding/LM head (e.g. 248,320 rows) can be decoded from: random weights emit
    any id, and every id must map to text.
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    table = _bytes_to_unicode()
    vocab = {table[b]: b for b in range(256)}
    if vocab_size:
        n_fill = vocab_size - 256 - len(specials)
        letters = "abcdefghijklmnopqrstuvwxyz"
        for i in range(max(0, n_fill)):
            word, j = "", i
            for _ in range(4):
                word, j = letters[j % 26] + word, j // 26
            vocab["Ġ" + word] = 256 + i
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens(specials)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>")
    return fast


def _save_common(model, processor, out: Path) -> Path:
    from transformers import GenerationConfig

    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out, safe_serialization=True)
    processor.save_pretrained(out)
    tok = processor.tokenizer
    gen = GenerationConfig(eos_token_id=tok.convert_tokens_to_ids("<|im_end|>"),
                           pad_token_id=tok.convert_tokens_to_ids("<|endoftext|>"), do_sample=False)
    gen.save_pretrained(out)
    return out


def _qwen_ids(tok) -> dict[str, int]:
    c = tok.convert_tokens_to_ids
    return {"image_token_id": c("<|image_pad|>"), "video_token_id": c("<|video_pad|>"),
            "vision_start_token_id": c("<|vision_start|>"), "vision_end_token_id": c("<|vision_end|>")}


def _qwen_image_processor(max_pixels: int):
    from transformers import Qwen2VLImageProcessor

    return Qwen2VLImageProcessor(patch_size=16, merge_size=2, temporal_patch_size=2,
                                 size={"shortest_edge": 32 * 32, "longest_edge": max_pixels})


def build_qwen3_5(out: Path, *, seed: int = 0, max_pixels: int = 512 * 512, text_layers: int = 4,
                  hidden: int = 256, vision_depth: int = 2, vision_hidden: int = 128, vocab_size: int | None = None,
                  text_overrides: dict | None = None, vision_overrides: dict | None = None,
                  device: str = "cpu") -> Path:
    """The tiny Qwen3.5 VLM; the overrides build other shapes of the same family (the 4B-class speed
    model in lab/2026-12-03-h200-session-scripts/build_qwen3_5_4b.py), ``device`` initialises the weights there."""
    import torch
    from transformers import Qwen3_5Config, Qwen3_5ForConditionalGeneration, Qwen3VLProcessor
    from transformers.models.qwen3_vl.video_processing_qwen3_vl import Qwen3VLVideoProcessor

    tok = build_tokenizer(QWEN_SPECIALS, vocab_size=vocab_size)
    text = dict(vocab_size=vocab_size or VOCAB_SIZE, hidden_size=hidden, intermediate_size=2 * hidden,
                num_hidden_layers=text_layers, num_attention_heads=4, num_key_value_heads=2, head_dim=64,
                linear_num_key_heads=8, linear_key_head_dim=32, linear_num_value_heads=16, linear_value_head_dim=32,
                linear_conv_kernel_dim=4, max_position_embeddings=4096, tie_word_embeddings=False,
                rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.25,
                                 "mrope_section": [3, 3, 2], "mrope_interleaved": True},
                eos_token_id=tok.convert_tokens_to_ids("<|im_end|>"))
    text.update(text_overrides or {})
    layers = text["num_hidden_layers"]
    text.setdefault("layer_types", ["full_attention" if (i + 1) % 4 == 0 else "linear_attention" for i in range(layers)])
    rope = text["rope_parameters"]
    assert sum(rope["mrope_section"]) == text["head_dim"] * rope["partial_rotary_factor"] / 2
    vision = dict(depth=vision_depth, hidden_size=vision_hidden, intermediate_size=2 * vision_hidden, num_heads=4,
                  patch_size=16, spatial_merge_size=2, temporal_patch_size=2, out_hidden_size=text["hidden_size"],
                  num_position_embeddings=1024)
    vision.update(vision_overrides or {})
    cfg = Qwen3_5Config(text_config=text, vision_config=vision, tie_word_embeddings=text["tie_word_embeddings"],
                        **_qwen_ids(tok))
    torch.manual_seed(seed)
    with torch.device(device):
        model = Qwen3_5ForConditionalGeneration(cfg).to(torch.bfloat16)
    proc = Qwen3VLProcessor(image_processor=_qwen_image_processor(max_pixels), tokenizer=tok,
                            video_processor=Qwen3VLVideoProcessor(patch_size=16, merge_size=2, temporal_patch_size=2),
                            chat_template=QWEN_TEMPLATE)
    return _save_common(model, proc, Path(out))


def build_qwen2_5_vl(out: Path, *, seed: int = 0, max_pixels: int = 512 * 512) -> Path:
    import torch
    from transformers import Qwen2_5_VLConfig, Qwen2_5_VLForConditionalGeneration, Qwen2_5_VLProcessor
    from transformers.models.qwen2_vl.video_processing_qwen2_vl import Qwen2VLVideoProcessor

    tok = build_tokenizer(QWEN_SPECIALS)
    text = dict(vocab_size=VOCAB_SIZE, hidden_size=256, intermediate_size=512, num_hidden_layers=2,
                num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=4096,
                rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "mrope_section": [8, 12, 12]},
                tie_word_embeddings=False, bos_token_id=None, eos_token_id=tok.convert_tokens_to_ids("<|im_end|>"))
    vision = dict(depth=2, hidden_size=128, intermediate_size=256, num_heads=4, patch_size=14, spatial_merge_size=2,
                  temporal_patch_size=2, out_hidden_size=256, window_size=112, fullatt_block_indexes=[1])
    cfg = Qwen2_5_VLConfig(text_config=text, vision_config=vision, **_qwen_ids(tok))
    torch.manual_seed(seed)
    model = Qwen2_5_VLForConditionalGeneration(cfg).to(torch.bfloat16)
    from transformers import Qwen2VLImageProcessor

    ip = Qwen2VLImageProcessor(patch_size=14, merge_size=2, temporal_patch_size=2,
                               size={"shortest_edge": 28 * 28, "longest_edge": max_pixels})
    proc = Qwen2_5_VLProcessor(image_processor=ip, tokenizer=tok,
                               video_processor=Qwen2VLVideoProcessor(patch_size=14, merge_size=2, temporal_patch_size=2),
                               chat_template=QWEN_TEMPLATE)
    return _save_common(model, proc, Path(out))


def build_llava(out: Path, *, seed: int = 0, image_size: int = 224) -> Path:
    import torch
    from transformers import (
        CLIPImageProcessor,
        CLIPVisionConfig,
        LlamaConfig,
        LlavaConfig,
        LlavaForConditionalGeneration,
        LlavaProcessor,
    )

    tok = build_tokenizer(LLAVA_SPECIALS)
    patch = 16
    vision = CLIPVisionConfig(hidden_size=128, intermediate_size=256, num_hidden_layers=2, num_attention_heads=4,
                              image_size=image_size, patch_size=patch, projection_dim=128)
    text = LlamaConfig(vocab_size=VOCAB_SIZE, hidden_size=256, intermediate_size=512, num_hidden_layers=2,
                       num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=4096,
                       tie_word_embeddings=False)
    cfg = LlavaConfig(vision_config=vision, text_config=text, image_token_id=tok.convert_tokens_to_ids("<image>"),
                      vision_feature_select_strategy="full", vision_feature_layer=-2, tie_word_embeddings=False)
    torch.manual_seed(seed)
    model = LlavaForConditionalGeneration(cfg).to(torch.bfloat16)
    ip = CLIPImageProcessor(size={"shortest_edge": image_size}, crop_size={"height": image_size, "width": image_size})
    proc = LlavaProcessor(image_processor=ip, tokenizer=tok, patch_size=patch, vision_feature_select_strategy="full",
                          chat_template=LLAVA_TEMPLATE, image_token="<image>",
                          num_additional_image_tokens=1)  # CLIP CLS token, kept by "full"
    return _save_common(model, proc, Path(out))


BUILDERS = {"qwen3_5": build_qwen3_5, "qwen2_5_vl": build_qwen2_5_vl, "llava": build_llava}


def build(arch: str, out: Path, **kw) -> Path:
    if arch not in BUILDERS:
        raise ValueError(f"unknown fixture architecture {arch!r}; choose from {', '.join(BUILDERS)}")
    path = BUILDERS[arch](Path(out), **kw)
    (Path(out) / "FIXTURE.json").write_text(json.dumps({"architecture": arch, "weights": "random", **kw}, default=str))
    return path
