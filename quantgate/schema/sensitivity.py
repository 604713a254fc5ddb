"""Typed records of a sensitivity file: which groups, which formats, how much damage and how many
bytes each costs. Read by ``recommend`` (and later ``tune``); refused when it names another model."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from quantgate.schema.base import Record

SCHEMA_VERSION = 1
# H200 HBM3e bandwidth from NVIDIA's spec sheet (4.8 TB/s): a stated figure, not a measurement.
DEFAULT_BANDWIDTH_GBPS = 4800.0
# Gated DeltaNet's gate projections (one output per value head; they feed the decay and beta
# gates): BF16 in the `mixed` preset and in llmcompressor's Qwen3.5 examples, so here too.
DEFAULT_KEEP_BF16 = [r"re:.*linear_attn\.in_proj_[ab]$"]
QUANT_FORMATS = ("fp8", "fp8-static", "nvfp4", "nvfp4a16", "w4a16", "w2a16")
# A layer group's name is part of sensitivity.json's format, and the speed cost table keys its GEMMs by the same
# names: one rule, here.
DECODER_KINDS = {"attention": "attn", "linear_attention": "linear_attn", "mlp": "mlp"}


def decoder_group_name(layer: int, kind: str) -> str:
    """The group of one decoder layer's projections of one kind, e.g. ``layers.3.mlp``."""
    return f"layers.{layer}.{DECODER_KINDS[kind]}"


class ModuleEntry(Record):
    name: str
    kind: str
    layer: int | None = None
    in_features: int
    out_features: int


class Group(Record):
    """A unit the recommender gives one format: one layer's projections of one kind."""

    name: str  # e.g. "layers.3.mlp"
    kind: str
    layer: int | None = None
    modules: list[str]  # candidates (keep-BF16 modules excluded)
    selector: dict  # the recipe rule fields (minus format) that select exactly these modules
    params: int
    bf16_bytes: int
    decode: bool  # weights read for every decoded token (decoder), not once per page (vision)


class KlResult(Record):
    """The damage of one configuration against the BF16 reference answers, over the scored tokens."""

    kl_mean: float = Field(ge=0)  # mean KL(BF16 || quantized) per scored token, nats
    kl_pages: list[float]  # mean per page, in page_ids order
    top1_agreement: float  # share of scored tokens whose argmax is unchanged
    tokens: int


class Measurement(Record):
    """One group quantized alone in one format, everything else BF16."""

    schema_version: Literal[1] = 1
    group: str
    format: str
    kl_mean: float = Field(ge=0)  # mean KL(BF16 || quantized) per scored token, nats
    kl_pages: list[float]  # mean per page, in page_ids order
    top1_agreement: float  # share of scored tokens whose argmax is unchanged
    tokens: int
    bytes: int  # this group's weights in this format, scales included
    quantized: list[str]  # modules that took the format
    kept_bf16: list[str] = Field(default_factory=list)  # widths no kernel fits: stay BF16 (as quantize does)
    wall_s: float


class Sizes(Record):
    bf16_bytes: int  # every weight tensor of the model, as loaded (safetensors payload, no headers)
    fixed_bytes: int  # outside every group (embeddings, norms, lm_head, vision unless allowed, kept-BF16)
    fixed_decode_bytes: int  # of those, read per decoded token (decoder side, lm_head; not vision or embeddings)


class Reference(Record):
    """The BF16 model's own greedy outputs on the calibration pages, which every variant is
    teacher-forced on."""

    tokens: int  # scored tokens (answer tokens incl. end-of-turn)
    rounds: int  # batched verification rounds (drafts: the pages' truth text)
    pages_generated: int  # pages finished by model.generate (no truth, or drafts too far off)
    answers: list[list[int]]  # token ids per page


class Baseline(Record):
    """Damage every quantized variant carries whatever its recipe, measured once with no group
    quantized: llmcompressor's round trip of offset-norm weights (see fakequant.oneshot_norms)."""

    what: str
    params_changed: int
    kl_mean: float = Field(ge=0)
    kl_pages: list[float]


class SensitivityFile(Record):
    schema_version: Literal[1] = 1
    kind: Literal["quantgate.sensitivity"] = "quantgate.sensitivity"
    model: str
    model_weights_sha256: str
    pageset: str
    pageset_sha256: str
    split: Literal["calibration"] = "calibration"
    page_ids: list[str]
    prompt: str
    max_new_tokens: int
    max_seq_len: int
    formats: list[str]
    allow_vision: bool
    keep_bf16: list[str]
    bandwidth_gbps: float
    bandwidth_source: str
    metric: str = "kl_mean: KL(BF16 || quantized) of next-token distributions, nats per token, teacher-forced"
    n_layers: int
    modules: list[ModuleEntry]
    groups: list[Group]
    sizes: Sizes
    reference: Reference
    baseline: Baseline | None = None
    measurements: list[Measurement]
    timings: dict[str, float]
    versions: dict[str, str | None]
    created_utc: str
    notes: list[str] = Field(default_factory=list)

    def table(self) -> dict[tuple[str, str], Measurement]:
        return {(m.group, m.format): m for m in self.measurements}
