"""A recommendation as an ordinary quantgate recipe: YAML a reviewer can read (each group's damage
per format and the reason for its choice as comments), checked by resolving it against the
model's modules before it is written."""

from __future__ import annotations

import json

import yaml

from quantgate.errors import InputError
from quantgate.recipes import ModuleInfo, Recipe
from quantgate.schema.base import parse_record
from quantgate.schema.load import parse_yaml
from quantgate.schema.sensitivity import SensitivityFile
from quantgate.sensitivity.budget import human
from quantgate.sensitivity.groups import resolve_assignment
from quantgate.sensitivity.recommend import Recommendation


def _flow(obj) -> str:
    if isinstance(obj, str):  # a JSON string is a valid YAML double-quoted scalar
        return json.dumps(obj, ensure_ascii=False)
    return yaml.safe_dump(obj, default_flow_style=True, width=10**6, sort_keys=False).strip()


def limit_text(rec: Recommendation) -> str:
    if rec.mode == "budget":
        return f"--budget {human(rec.limit)}"
    if rec.mode == "effective_bits":
        return f"--effective-bits {rec.limit}"
    return f"--speedup {rec.limit}"


def recipe_yaml(sens: SensitivityFile, rec: Recommendation, *, name: str, source: str) -> str:
    by_group = {g.name: g for g in sens.groups}
    fmts = [f for f in sens.formats]
    head = [
        f"# Recommended by `quantgate recommend {source} {limit_text(rec)}`.",
        f"# Model {sens.model} (weights sha256 {sens.model_weights_sha256[:16]}…); damage = KL(BF16 || variant) of",
        "# next-token distributions, nats/token, each group quantized alone, teacher-forced on the BF16 answers to",
        f"# {len(sens.page_ids)} calibration page(s) of {sens.pageset}. Predicted damage adds the groups' KL (an",
        "# additive model a study on held-out pages must confirm).",
        f"# Weights {human(rec.total_bytes)} (BF16 {human(rec.bf16_bytes)}, smallest possible {human(rec.min_bytes)}); "
        f"{rec.effective_bits:.2f} bits per quantizable weight;",
        f"# predicted damage {rec.predicted_kl:.3e} (incl. {rec.baseline_kl:.2e} that llmcompressor's offset-norm round "
        "trip adds to any variant);",
        f"# decode speed-up {rec.modelled_speedup:.2f}x BF16 ({rec.modelled_decode_ms:.4f} ms per decode step): "
        f"{rec.speed_basis}.",
    ]
    for w in rec.warnings:
        head.append(f"# WARNING: {w}")
    for n in rec.notes:
        head.append(f"# note: {n}")
    has_vision = any(c.format != "bf16" and not by_group[c.group].decode for c in rec.choices)
    body = [f"name: {_flow(name)}",
            f"description: {_flow(f'recommended under {limit_text(rec)}: predicted damage {rec.predicted_kl:.3e}, ' + human(rec.total_bytes))}",
            f"allow_vision: {'true' if has_vision else 'false'}",
            f"calibration: {_flow({'samples': len(sens.page_ids), 'max_seq_len': sens.max_seq_len})}",
            "rules:"]
    for c in rec.choices:
        g = by_group[c.group]
        kls = " · ".join(f"{f} {c.options[f][0]:.2e}" for f in fmts if f in c.options)
        body.append(f"  # {c.group}: KL {kls} → {c.format}: {c.why}")
        if c.format != "bf16":
            body.append(f"  - {_flow({**g.selector, 'format': c.format})}")
    if sens.keep_bf16:
        body.append("  # kept BF16 in every measurement (--keep-bf16)")
        body.append(f"  - {_flow({'match': sens.keep_bf16, 'format': 'bf16', 'optional': True})}")
    if all(c.format == "bf16" for c in rec.choices) and not sens.keep_bf16:
        body[-1] = "rules: []"
    text = "\n".join(head + body) + "\n"
    check_recipe(sens, rec, text)
    return text


def check_recipe(sens: SensitivityFile, rec: Recommendation, text: str) -> Recipe:
    """The written recipe must resolve to exactly the chosen formats (and BF16 elsewhere)."""
    recipe = parse_record(Recipe, parse_yaml(text, "recommended recipe"), where="recommended recipe")
    from quantgate.recipes import resolve

    modules = [ModuleInfo(m.name, m.kind, m.layer, m.in_features, m.out_features) for m in sens.modules]
    plan, _ = resolve(recipe, modules, sens.n_layers, where="recommended recipe")
    want, _ = resolve_assignment(sens.groups, rec.assignment, modules, sens.n_layers, keep_bf16=sens.keep_bf16,
                                 allow_vision=True, where="recommended recipe")
    if plan != want:
        diff = sorted(n for n in plan if plan[n] != want.get(n))
        raise InputError(f"internal check failed: the written recipe gives {diff[0]} {plan[diff[0]]}, the choice was "
                         f"{want.get(diff[0])}; please report it")
    return recipe
