"""Module classification across VLM families, from module names, classes and the config — no
per-model code. Every ``nn.Linear`` gets one kind: vision, projector, attention,
linear_attention (Gated DeltaNet / linear-attention mixers), mlp, lm_head or other."""

from __future__ import annotations

import re
from pathlib import Path

from quantgate.recipes import ModuleInfo

_VISION_NAME = re.compile(r"(^|\.)(visual|vision_tower|vision_model|vision_encoder|vision|image_encoder|vit)(\.|$)")
_PROJECTOR_NAME = re.compile(r"(^|\.)(merger|multi_modal_projector|mm_projector|connector|projector|"
                             r"visual_projection|mlp1|aligner)(\.|$)")
_LINEAR_ATTN = re.compile(r"(^|\.)(linear_attn|gated_delta|deltanet|mamba|mixer)(\.|$)")
_ATTN = re.compile(r"(^|\.)(self_attn|attn|attention|cross_attn)(\.|$)")
_MLP = re.compile(r"(^|\.)(mlp|feed_forward|ffn|experts|shared_expert|block_sparse_moe)(\.|$)")
_LAYER = re.compile(r"(?:^|\.)(?:layers|h|blocks)\.(\d+)\.")


def classify_name(name: str, ancestors: list[str]) -> str:
    classes = " ".join(ancestors).lower()
    if name.split(".")[-1] == "lm_head" or name == "lm_head":
        return "lm_head"
    in_vision = bool(_VISION_NAME.search(name)) or "vision" in classes or "visual" in classes
    if _PROJECTOR_NAME.search(name) or "projector" in classes or "merger" in classes:
        return "projector"
    if in_vision:
        return "vision"
    if _LINEAR_ATTN.search(name) or "gateddelta" in classes or "linearattention" in classes:
        return "linear_attention"
    if _ATTN.search(name):
        return "attention"
    if _MLP.search(name):
        return "mlp"
    return "other"


def load_meta_model(model_dir: Path, trust_remote_code: bool = False):
    """The model's module tree on the meta device (no weights read, no memory)."""
    import torch
    from transformers import AutoConfig, AutoModelForImageTextToText

    cfg = AutoConfig.from_pretrained(model_dir, trust_remote_code=trust_remote_code)
    with torch.device("meta"):
        return AutoModelForImageTextToText.from_config(cfg, trust_remote_code=trust_remote_code)


def list_modules(model) -> tuple[list[ModuleInfo], int, list[str]]:
    """Linear modules with kinds, the number of decoder layers, and embedding module names."""
    import torch

    classes: dict[str, str] = {name: type(mod).__name__ for name, mod in model.named_modules()}
    infos: list[ModuleInfo] = []
    embeddings: list[str] = []
    max_layer = -1
    for name, mod in model.named_modules():
        if isinstance(mod, torch.nn.Embedding):
            embeddings.append(name)
            continue
        if not isinstance(mod, torch.nn.Linear):
            continue
        parts = name.split(".")
        ancestors = [classes.get(".".join(parts[:i]), "") for i in range(1, len(parts))]
        kind = classify_name(name, ancestors)
        layer = None
        if kind in ("attention", "linear_attention", "mlp", "other"):
            m = _LAYER.search(name)
            layer = int(m.group(1)) if m else None
            if layer is not None:
                max_layer = max(max_layer, layer)
        infos.append(ModuleInfo(name=name, kind=kind, layer=layer, in_features=mod.in_features,
                                out_features=mod.out_features))
    return infos, max_layer + 1, embeddings
