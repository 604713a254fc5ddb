"""``quantgate plan``: every quantizable module, its kind, shape and planned format, with totals."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from quantgate.errors import InputError
from quantgate.io.modeldir import check_model_dir
from quantgate.recipes import LoadedRecipe, ModuleInfo, resolve
from quantgate.recipes.model import BITS_PER_WEIGHT


@dataclass
class Plan:
    modules: list[ModuleInfo]
    formats: dict[str, str]  # module → format; empty for raw llmcompressor recipes (known after saving)
    n_layers: int
    embeddings: list[str]
    other_params: int  # parameters outside Linear modules (embeddings, norms, convs): kept as they are
    warnings: list[str] = field(default_factory=list)

    def rows(self) -> list[dict]:
        return [{"module": m.name, "kind": m.kind, "layer": m.layer, "shape": [m.out_features, m.in_features],
                 "params": m.params, "format": self.formats.get(m.name, "bf16")} for m in self.modules]

    def totals(self) -> dict:
        per: dict[str, dict] = {}
        for m in self.modules:
            f = self.formats.get(m.name, "bf16")
            t = per.setdefault(f, {"modules": 0, "params": 0, "bytes": 0.0})
            t["modules"] += 1
            t["params"] += m.params
            t["bytes"] += m.params * BITS_PER_WEIGHT[f] / 8
        bf16_bytes = sum(m.params for m in self.modules) * 2 + self.other_params * 2
        est = sum(t["bytes"] for t in per.values()) + self.other_params * 2
        return {"per_format": {k: {**v, "bytes": int(v["bytes"])} for k, v in sorted(per.items())},
                "bf16_bytes": int(bf16_bytes), "estimated_bytes": int(est),
                "compression": round(bf16_bytes / est, 3) if est else None}


@dataclass
class ModelModules:
    """What a plan needs from a model, read once from its meta-device build (no weights loaded)."""

    modules: list[ModuleInfo]
    n_layers: int
    embeddings: list[str]
    total_params: int
    tied_lm_head: bool = False  # the LM head is the input embedding table (tie_word_embeddings)


def model_modules(model_dir: Path, trust_remote_code: bool = False, *, allow_pickle_files: bool = False) -> ModelModules:
    from quantgate.quantize.classify import list_modules, load_meta_model

    # The plan reads only config.json: the chat template is checked by quantize, which renders it.
    check_model_dir(model_dir, trust_remote_code, allow_pickle_files=allow_pickle_files, chat_template=False)
    try:
        model = load_meta_model(model_dir, trust_remote_code)
    except (ValueError, KeyError, OSError) as e:
        raise InputError(f"{model_dir}: transformers cannot build this model as an image-text-to-text VLM ({e})") from None
    modules, n_layers, embeddings = list_modules(model)
    out, inp = model.get_output_embeddings(), model.get_input_embeddings()
    tied = out is not None and inp is not None and out.weight is inp.weight
    return ModelModules(modules, n_layers, embeddings, sum(p.numel() for p in model.parameters()), tied)


def make_plan(model_dir: Path, recipe: LoadedRecipe, trust_remote_code: bool = False, *,
              allow_pickle_files: bool = False, modules: ModelModules | None = None) -> Plan:
    """``modules``: the model's, already read (planning several recipes reads the model once)."""
    mm = modules or model_modules(model_dir, trust_remote_code, allow_pickle_files=allow_pickle_files)
    linear_params = sum(m.params for m in mm.modules)
    if recipe.recipe is None:
        formats, warnings = {}, ["raw llmcompressor recipe: formats are read from the saved checkpoint"]
    else:
        formats, warnings = resolve(recipe.recipe, mm.modules, mm.n_layers, where=recipe.source)
        _refuse_tied_lm_head(mm, formats, recipe.source)
    return Plan(mm.modules, formats, mm.n_layers, mm.embeddings, mm.total_params - linear_params, warnings)


def _refuse_tied_lm_head(mm: ModelModules, formats: dict[str, str], where: str) -> None:
    """A tied LM head is the input embedding table: one tensor cannot be both an FP8 GEMM weight and a lookup
    table the server reads in BF16, so such a plan is refused before any work."""
    heads = [m.name for m in mm.modules if m.kind == "lm_head" and formats.get(m.name, "bf16") != "bf16"]
    if mm.tied_lm_head and heads:
        raise InputError(f"{where}: would quantize {heads[0]}, which this model ties to its input embeddings "
                         "(tie_word_embeddings); keep lm_head BF16 for this model (drop the lm_head rule)")


def format_plan_table(plan: Plan, show_bf16: bool = True) -> str:
    lines = [f"{'module':<64} {'kind':<16} {'shape':>12} {'format':>10}"]
    for r in plan.rows():
        if not show_bf16 and r["format"] == "bf16":
            continue
        lines.append(f"{r['module']:<64} {r['kind']:<16} {'x'.join(map(str, r['shape'])):>12} {r['format']:>10}")
    t = plan.totals()
    lines.append("")
    lines.append(f"{'format':<10} {'modules':>8} {'params':>14} {'bytes':>14}")
    for f, v in t["per_format"].items():
        lines.append(f"{f:<10} {v['modules']:>8} {v['params']:>14,} {v['bytes']:>14,}")
    lines.append(f"estimated checkpoint {t['estimated_bytes'] / 1e6:,.1f} MB vs BF16 {t['bf16_bytes'] / 1e6:,.1f} MB "
                 f"({t['compression']}x smaller); embeddings and other parameters ({plan.other_params:,}) stay as they are")
    return "\n".join(lines)
