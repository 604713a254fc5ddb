"""The GEMMs of one decode step, read from a variant's plan: which projections vLLM runs as one GEMM, in
what order a step runs them, and the sensitivity group each belongs to (the unit ``recommend`` gives a format)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from quantgate.errors import InputError
from quantgate.recipes.model import FUSED_SIBLINGS
from quantgate.schema.sensitivity import decoder_group_name
from quantgate.schema.variant import PlanRow

# A projection's place in its half of a decoder layer, as vLLM 0.26's model code runs a decode step
# (qwen3_next / qwen3_5 Gated DeltaNet: in_proj_qkvz, in_proj_ba, the recurrent core, out_proj; attention:
# qkv_proj, the attention, o_proj; MLP: gate_up_proj, down_proj). The attention half runs before the MLP half.
_RANK = {"q_proj": 0, "k_proj": 0, "v_proj": 0, "in_proj_qkv": 0, "in_proj_z": 0, "in_proj_b": 1, "in_proj_a": 1,
         "o_proj": 2, "out_proj": 2, "gate_proj": 0, "up_proj": 0, "down_proj": 1}
_HALF = {"attention": 0, "linear_attention": 0, "mlp": 1}


@dataclass(frozen=True)
class DecodeGemm:
    id: str  # "<group>:<leaves>"
    group: str
    modules: tuple[str, ...]
    params: int
    format: str


def decode_gemms(plan: Sequence[PlanRow], where: str = "plan") -> list[DecodeGemm]:
    """The decode step's GEMMs in the order a step launches them: decoder layers in order, each layer's attention
    or linear-attention projections then its MLP's, fused siblings (``FUSED_SIBLINGS``) as one GEMM; the LM head
    last. Vision, projector, embeddings and other modules run no GEMM in a decode step."""
    units: dict[tuple, list[PlanRow]] = {}
    for r in plan:
        if r.kind == "lm_head":
            units.setdefault(("lm_head", r.module), []).append(r)
            continue
        if r.kind not in _HALF or r.layer is None:
            continue
        parent, _, leaf = r.module.rpartition(".")
        if leaf not in _RANK:
            raise InputError(f"{where}: {r.module}: where a decode step runs a {leaf!r} projection is not known to "
                             f"the cost table (it knows {', '.join(sorted(_RANK))}); add it to quantgate/speed/gemms.py")
        sib = next((i for i, s in enumerate(FUSED_SIBLINGS) if leaf in s), leaf)
        units.setdefault((parent, sib), []).append(r)
    keyed = []
    for members in units.values():
        fmts = sorted({m.format for m in members})
        if len(fmts) > 1:
            raise InputError(f"{where}: {', '.join(m.module for m in members)} are one GEMM in vLLM but the plan "
                             f"gives them {', '.join(fmts)}")
        first = members[0]
        leaves = sorted(m.module.rpartition(".")[2] for m in members)
        if first.kind == "lm_head":
            group, order = "lm_head", (math.inf, 0, 0)
        else:
            group = decoder_group_name(first.layer, first.kind)
            order = (first.layer, _HALF[first.kind], min(_RANK[x] for x in leaves))
        keyed.append((order, DecodeGemm(id=f"{group}:{'+'.join(leaves)}", group=group,
                                        modules=tuple(m.module for m in members),
                                        params=sum(m.params for m in members), format=fmts[0])))
    if not keyed:
        raise InputError(f"{where}: no decoder projection or LM head in the plan")
    return [g for _, g in sorted(keyed, key=lambda t: t[0])]
