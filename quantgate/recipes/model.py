"""Quantgate recipes: YAML that assigns a format to each module of a VLM.

    name: mixed
    description: attention FP8, MLPs NVFP4, vision/projector/embeddings/lm_head BF16
    rules:                       # later rules override earlier ones; unselected modules stay bf16
      - {kinds: [attention, linear_attention], format: fp8}
      - {kinds: [mlp], format: nvfp4}
      - {match: 're:.*linear_attn\\.in_proj_[ab]$', format: bf16}
      - {kinds: [mlp], layers: {last: 1}, format: fp8}
    allow_vision: false          # the vision encoder and projector stay BF16 unless this is true

A rule selects modules by ``kinds``, ``layers`` (decoder layer indices: "0-3,7", {first: N} or
{last: N}) and ``match`` (regexes, ``re:`` prefix optional); every selector given must match."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from quantgate.errors import InputError

Format = Literal["bf16", "fp8", "fp8-static", "nvfp4", "nvfp4a16", "w4a16", "w2a16"]
FORMATS: tuple[str, ...] = ("bf16", "fp8", "fp8-static", "nvfp4", "nvfp4a16", "w4a16", "w2a16")
KINDS = ("vision", "projector", "attention", "linear_attention", "mlp", "lm_head", "embeddings", "other")

# Format → compressed-tensors preset scheme that llmcompressor applies.
# w4a16/w2a16: INT4/INT2 weights, groups of 128, round-to-nearest (no GPTQ): w4a16 is the common
# weight-only format; w2a16 exists to build deliberately harmful variants for gate tests.
PRESET = {"fp8": "FP8_DYNAMIC", "fp8-static": "FP8", "nvfp4": "NVFP4", "nvfp4a16": "NVFP4A16", "w4a16": "W4A16",
          "w2a16": "W2A16"}
# Formats whose activation scales come from calibration data.
NEEDS_CALIBRATION = {"fp8-static", "nvfp4"}
# Bits per weight including scales: fp8 per-channel ≈ 8; nvfp4 = 4 + one fp8 scale per 16 weights.
BITS_PER_WEIGHT = {"bf16": 16.0, "fp8": 8.0, "fp8-static": 8.0, "nvfp4": 4.5, "nvfp4a16": 4.5, "w4a16": 4.125,
                   "w2a16": 2.125}


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class LayerRange(_Strict):
    first: int | None = Field(default=None, ge=1)
    last: int | None = Field(default=None, ge=1)


class Rule(_Strict):
    format: Format
    kinds: list[Literal["vision", "projector", "attention", "linear_attention", "mlp", "lm_head", "embeddings",
                        "other"]] | None = None
    layers: str | LayerRange | None = None
    match: list[str] | str | None = None
    optional: bool = False  # may match nothing (presets meant for several architectures)
    note: str | None = None

    @field_validator("match")
    @classmethod
    def _compile(cls, v):
        pats = [v] if isinstance(v, str) else v
        for p in pats or []:
            try:
                re.compile(p.removeprefix("re:"))
            except re.error as e:
                raise ValueError(f"bad regex {p!r}: {e}") from None
        return v

    @field_validator("layers")
    @classmethod
    def _layers(cls, v):
        if isinstance(v, str) and not re.fullmatch(r"\s*\d+(\s*-\s*\d+)?(\s*,\s*\d+(\s*-\s*\d+)?)*\s*", v):
            raise ValueError(f"layers {v!r}: use '0-3,7', {{first: N}} or {{last: N}}")
        return v

    def describe(self) -> str:
        parts = []
        if self.kinds:
            parts.append(f"kinds={','.join(self.kinds)}")
        if self.layers is not None:
            parts.append(f"layers={self.layers if isinstance(self.layers, str) else self.layers.model_dump(exclude_none=True)}")
        if self.match:
            parts.append(f"match={self.match}")
        return f"[{' '.join(parts) or 'all'} -> {self.format}]"


class Calibration(_Strict):
    samples: int = Field(default=32, ge=1)
    max_seq_len: int = Field(default=4096, ge=64)
    pipeline: Literal["basic", "sequential", "independent"] = "basic"
    text_only: bool = False


class Recipe(_Strict):
    schema_version: int = 1
    name: str
    description: str = ""
    rules: list[Rule] = Field(default_factory=list)
    allow_vision: bool = False
    calibration: Calibration = Field(default_factory=Calibration)


@dataclass(frozen=True)
class ModuleInfo:
    """A quantizable Linear module as the planner sees it."""

    name: str
    kind: str
    layer: int | None  # decoder layer index (language model), else None
    in_features: int
    out_features: int

    @property
    def params(self) -> int:
        return self.in_features * self.out_features


def _layer_set(spec: str | LayerRange, n_layers: int) -> set[int]:
    if isinstance(spec, LayerRange):
        s: set[int] = set()
        if spec.first:
            s |= set(range(min(spec.first, n_layers)))
        if spec.last:
            s |= set(range(max(0, n_layers - spec.last), n_layers))
        return s
    out: set[int] = set()
    for part in spec.split(","):
        a, _, b = part.strip().partition("-")
        out |= set(range(int(a), int(b or a) + 1))
    return out


def rule_matches(rule: Rule, mod: ModuleInfo, n_layers: int) -> bool:
    if rule.kinds and mod.kind not in rule.kinds:
        return False
    if rule.layers is not None and (mod.layer is None or mod.layer not in _layer_set(rule.layers, n_layers)):
        return False
    if rule.match:
        pats = [rule.match] if isinstance(rule.match, str) else rule.match
        if not any(re.fullmatch(p.removeprefix("re:"), mod.name) for p in pats):
            return False
    return True


def min_width_ok(fmt: str, mod: ModuleInfo) -> bool:
    """FP8 and FP4 GEMM kernels (and NVFP4's groups of 16) need both widths divisible by 16; the
    INT formats' groups of 128 need the input width divisible by 128."""
    if fmt in ("w4a16", "w2a16"):
        return mod.in_features % 128 == 0 and mod.out_features % 16 == 0
    return fmt == "bf16" or (mod.in_features % 16 == 0 and mod.out_features % 16 == 0)


def resolve(recipe: Recipe, modules: list[ModuleInfo], n_layers: int, *, where: str = "recipe") -> tuple[dict[str, str], list[str]]:
    """Module name → format, and warnings. Refuses (before any work) rules that match nothing
    and plans that quantize the vision encoder or projector without ``allow_vision``."""
    plan = {m.name: "bf16" for m in modules}
    for i, rule in enumerate(recipe.rules):
        hits = [m for m in modules if rule_matches(rule, m, n_layers)]
        if not hits and not rule.optional:
            raise InputError(f"{where}: rule {i + 1} {rule.describe()} matches no module of this model; "
                             "fix or remove it (see `quantgate plan MODEL --recipe ...` for module names and kinds)")
        for m in hits:
            plan[m.name] = rule.format
    by_name = {m.name: m for m in modules}
    touched_vision = sorted(n for n, f in plan.items() if f != "bf16" and by_name[n].kind in ("vision", "projector"))
    if touched_vision and not recipe.allow_vision:
        raise InputError(f"{where}: would quantize {len(touched_vision)} vision/projector module(s) "
                         f"(e.g. {touched_vision[0]}); the vision encoder stays BF16 unless the recipe sets "
                         "allow_vision: true")
    _check_fused(plan, where)
    warnings = []
    narrow = sorted(n for n, f in plan.items() if not min_width_ok(f, by_name[n]))
    if narrow:
        for n in narrow:
            plan[n] = "bf16"
        warnings.append(f"{len(narrow)} module(s) kept BF16: a width not divisible by 16 (128 for INT groups) "
                        "fits no kernel: "
                        + ", ".join(narrow[:8]) + (" …" if len(narrow) > 8 else ""))
    return plan, warnings


# Projections that vLLM fuses into one GEMM (q/k/v, gate/up, Gated DeltaNet's qkv+z and b+a):
# one fused weight can hold one format only, so siblings must agree.
FUSED_SIBLINGS = [{"q_proj", "k_proj", "v_proj"}, {"gate_proj", "up_proj"}, {"in_proj_qkv", "in_proj_z"},
                  {"in_proj_a", "in_proj_b"}]


def _check_fused(plan: dict[str, str], where: str) -> None:
    groups: dict[tuple[str, int], dict[str, str]] = {}
    for name, fmt in plan.items():
        parent, _, leaf = name.rpartition(".")
        for i, sib in enumerate(FUSED_SIBLINGS):
            if leaf in sib:
                groups.setdefault((parent, i), {})[name] = fmt
    for members in groups.values():
        if len(set(members.values())) > 1:
            desc = ", ".join(f"{n} -> {f}" for n, f in sorted(members.items()))
            raise InputError(f"{where}: projections that inference servers fuse into one GEMM get different formats "
                             f"({desc}); give them the same format")


_LAYER_COMPONENT = re.compile(r"^(layers|blocks|h)$")
VISION_IGNORE = ["re:(^|.*\\.)(visual|vision_tower|vision_model|vision_encoder)\\..*",
                 "re:(^|.*\\.)(multi_modal_projector|mm_projector)\\..*"]


def target_for(name: str) -> str:
    """A target regex for one module that survives checkpoint renaming: servers and transformers
    rename *prefixes* (``model.language_model.`` ↔ ``language_model.model.``), never the part from
    the decoder layer on, so the pattern anchors on that suffix."""
    parts = name.split(".")
    start = next((i for i in range(len(parts) - 1) if _LAYER_COMPONENT.match(parts[i]) and parts[i + 1].isdigit()),
                 max(0, len(parts) - 2))
    if start > 0 and parts[start - 1] in ("encoder", "merger", "decoder"):
        start -= 1
    return "re:(^|.*\\.)" + re.escape(".".join(parts[start:])) + "$"


def _matches(pattern: str, name: str) -> bool:
    return bool(re.match(pattern.removeprefix("re:"), name)) if pattern.startswith("re:") else name == pattern


def to_llmcompressor(plan: dict[str, str], kinds: dict[str, str]) -> dict:
    """The plan as llmcompressor's own recipe format: one QuantizationModifier whose ``scheme``
    maps each preset to the modules it covers; vision/projector (when all BF16) and lm_head are
    ignored. Raises if the patterns would select anything other than the plan (checked on the
    model's own module names), so the saved ``quantization_config`` says exactly what the plan says."""
    groups: dict[str, list[str]] = {}
    for name, fmt in sorted(plan.items()):
        if fmt != "bf16":
            groups.setdefault(PRESET[fmt], []).append(target_for(name))
    vision_bf16 = all(f == "bf16" for n, f in plan.items() if kinds.get(n) in ("vision", "projector"))
    ignore = (list(VISION_IGNORE) if vision_bf16 else []) + ["re:(^|.*\\.)lm_head$"] * (plan.get("lm_head", "bf16") == "bf16")
    for name, fmt in plan.items():
        if any(_matches(p, name) for p in ignore):
            got = "bf16"
        else:
            hits = [preset for preset, pats in groups.items() if any(_matches(p, name) for p in pats)]
            if len(hits) > 1:
                raise InputError(f"module {name} would match two formats ({', '.join(hits)}); the plan cannot be "
                                 "written as a checkpoint config — make the rules for its neighbours agree")
            got = next((f for f, pr in PRESET.items() if hits and pr == hits[0]), "bf16")
        if got != fmt:
            raise InputError(f"module {name}: planned {fmt} but its checkpoint pattern would give {got}; "
                             "this model's module names defeat quantgate's target patterns — please report it")
    return {"quant_stage": {"quant_modifiers": {"QuantizationModifier": {"scheme": groups, "ignore": ignore}}}}
