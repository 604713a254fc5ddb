"""Groups: the units a recipe gives one format — one decoder layer's attention, linear-attention or
MLP projections as the planner classifies them (and, with ``allow_vision``, one vision block or the
projector). A group is written back as one ordinary recipe rule, so a recommendation compiles to
llmcompressor through the same ``resolve`` / ``to_llmcompressor`` path as any hand-written recipe."""

from __future__ import annotations

import re
from dataclasses import dataclass

from quantgate.recipes import ModuleInfo, Recipe, resolve
from quantgate.recipes.model import Rule, rule_matches
from quantgate.schema.sensitivity import DECODER_KINDS, decoder_group_name  # noqa: F401 (re-exported)

_BLOCK = re.compile(r"^(.*?\.(?:blocks|layers|layer)\.\d+)\.")


@dataclass
class GroupSpec:
    name: str
    kind: str
    layer: int | None
    modules: list[str]
    selector: dict
    params: int
    decode: bool


def _kept(mod: ModuleInfo, keep_bf16: list[str], n_layers: int) -> bool:
    return bool(keep_bf16) and rule_matches(Rule(format="bf16", match=keep_bf16), mod, n_layers)


def build_groups(modules: list[ModuleInfo], n_layers: int, *, allow_vision: bool = False,
                 keep_bf16: list[str] | None = None) -> list[GroupSpec]:
    keep_bf16 = keep_bf16 or []
    by_key: dict[tuple, list[ModuleInfo]] = {}
    for m in modules:
        if _kept(m, keep_bf16, n_layers):
            continue
        if m.kind in DECODER_KINDS and m.layer is not None:
            by_key.setdefault(("decoder", m.layer, m.kind), []).append(m)
        elif allow_vision and m.kind == "vision":
            b = _BLOCK.match(m.name)
            by_key.setdefault(("vision", b.group(1) if b else "", "vision"), []).append(m)
        elif allow_vision and m.kind == "projector":
            by_key.setdefault(("projector", "", "projector"), []).append(m)
    groups = []
    for (where, pos, kind), mods in by_key.items():
        names = [m.name for m in mods]
        if where == "decoder":
            name, layer = decoder_group_name(pos, kind), pos
            selector: dict = {"kinds": [kind], "layers": str(pos)}
        elif where == "vision" and pos:
            name, layer = f"vision.{pos.rsplit('.', 2)[-2]}.{pos.rsplit('.', 1)[-1]}", None
            selector = {"kinds": ["vision"], "match": ["re:" + re.escape(pos) + r"\..*"]}
        else:  # the projector, or vision modules outside numbered blocks: name them one by one
            name, layer = ("projector" if kind == "projector" else "vision.other"), None
            selector = {"kinds": [kind], "match": ["re:" + re.escape(n) for n in names]}
        groups.append(GroupSpec(name=name, kind=kind, layer=layer, modules=names, selector=selector,
                                params=sum(m.params for m in mods), decode=where == "decoder"))
    order = {"vision": 0, "projector": 1}
    groups.sort(key=lambda g: (order.get(g.kind, 2), g.layer if g.layer is not None else -1, g.name))
    return groups


def assignment_recipe(groups, assignment: dict[str, str], *, keep_bf16: list[str], name: str,
                      description: str = "", allow_vision: bool = False, samples: int | None = None) -> Recipe:
    """The recipe giving each group its format (groups absent or ``bf16`` get no rule). ``groups``
    are GroupSpec or Group records (both have ``name`` and ``selector``)."""
    rules = [Rule(format=assignment[g.name], **g.selector) for g in groups if assignment.get(g.name, "bf16") != "bf16"]
    if keep_bf16:
        rules.append(Rule(format="bf16", match=keep_bf16, optional=True,
                          note="kept BF16 by the sensitivity run (--keep-bf16)"))
    cal = {"samples": samples} if samples else {}
    return Recipe(name=name, description=description, rules=rules, allow_vision=allow_vision, calibration=cal)


def resolve_assignment(groups, assignment: dict[str, str], modules: list[ModuleInfo], n_layers: int, *,
                       keep_bf16: list[str], allow_vision: bool, where: str) -> tuple[dict[str, str], list[str]]:
    recipe = assignment_recipe(groups, assignment, keep_bf16=keep_bf16, name="check", allow_vision=allow_vision)
    return resolve(recipe, modules, n_layers, where=where)
