from __future__ import annotations

import sys
from pathlib import Path

from quantgate.commands._args import TRUST_REMOTE_CODE_HELP, existing_path, int_range, print_json
from quantgate.commands._fields import yaml_flag


def register(sub) -> None:
    r = sub.add_parser("recipes", help="list, show or validate recipes",
                       description="Recipes assign BF16/FP8/NVFP4 per module (docs/recipes.md). Presets ship with "
                       "quantgate; a raw llmcompressor recipe YAML is accepted as well.")
    rs = r.add_subparsers(dest="recipes_verb", metavar="ACTION", required=True, parser_class=type(r))
    rs.add_parser("list", help="preset recipes").set_defaults(func=cmd_recipes_list)
    s = rs.add_parser("show", help="print a preset or recipe file")
    s.add_argument("name", help="a preset's name or a recipe file")
    s.set_defaults(func=cmd_recipes_show)
    v = rs.add_parser("validate", help="check a recipe file (and, with --model, that every rule matches)")
    v.add_argument("file", type=existing_path, help="recipe YAML to check")
    v.add_argument("--model", type=existing_path, help="also resolve it against this model")
    v.set_defaults(func=cmd_recipes_validate)

    p = sub.add_parser("plan", help="which module gets which format, with sizes",
                       description="Print every Linear module with its kind (vision, projector, attention, "
                       "linear_attention, mlp, lm_head), shape and planned format, then totals per format and the "
                       "estimated checkpoint size. Reads no weights.")
    p.add_argument("model", type=existing_path, help="BF16 checkpoint folder (safetensors)")
    p.add_argument("--recipe", required=True, help="preset name or YAML file")
    p.add_argument("--json", action="store_true", help="print the plan as JSON")
    p.add_argument("--quantized-only", action="store_true", help="hide BF16 rows in the table")
    p.add_argument("--trust-remote-code", action="store_true", help=TRUST_REMOTE_CODE_HELP)
    p.add_argument("--allow-pickle-files", action="store_true", help="ignore .bin/.pt/.pth/.pkl/.ckpt files in MODEL "
                   "instead of refusing the folder (they are never loaded: quantgate reads safetensors only)")
    p.set_defaults(func=cmd_plan)

    q = sub.add_parser("quantize", help="build a quantized variant (llmcompressor → compressed-tensors), verified",
                       description="Plan, calibrate on the page set's calibration split (page images through the "
                       "model's processor and chat template), run llmcompressor oneshot, save compressed-tensors, "
                       "verify every module against the plan, and write quantgate.json. Rerunning with the same inputs "
                       "reuses the variant.")
    q.add_argument("model", type=existing_path, help="BF16 checkpoint folder (safetensors)")
    q.add_argument("--recipe", required=True, help="a preset's name (`quantgate recipes list`) or a recipe YAML")
    q.add_argument("-o", "--output", required=True, type=Path, help="variant folder to write")
    q.add_argument("--calibration", type=existing_path, help="page set (its calibration split is used)")
    from quantgate.schema.study import Study

    yaml_flag(q, Study, "calibration_samples", "--samples", default=None,
              default_says="the recipe's calibration.samples, 32 for the presets")
    q.add_argument("--max-seq-len", type=int_range(64), help="longest calibration sample in tokens, "
                   ">= 64 (default from the recipe, 4096)")
    q.add_argument("--prompt", help="the study's prompt, used for calibration")
    q.add_argument("--device", default="auto", help="where the model sits while calibrating: auto (cuda when "
                   "available, unless --pipeline sequential), cpu, cuda, cuda:1 ...")
    q.add_argument("--devices", type=_devices, help="spread the model over these CUDA devices, e.g. 0,1 (a model too "
                   "big for one GPU: accelerate's device map, each decoder layer on one device; docs/scale.md)")
    q.add_argument("--max-memory", metavar="DEV=SIZE,…", help="with --devices: cap per device, e.g. "
                   "0=20GiB,1=20GiB; cpu=SIZE allows layers in host memory (slow); refused before any work when the "
                   "model does not fit")
    q.add_argument("--pipeline", choices=["basic", "sequential", "independent"],
                   help="llmcompressor pipeline; 'sequential' holds one decoder layer on the accelerator at a time")
    q.add_argument("--text-only", action="store_true", help="calibrate on truth text without images")
    q.add_argument("--overwrite", action="store_true", help="replace a variant in the output folder built from "
                   "other inputs (the same inputs are reused, not rebuilt)")
    q.add_argument("--trust-remote-code", action="store_true", help=TRUST_REMOTE_CODE_HELP)
    q.add_argument("--allow-pickle-files", action="store_true", help="ignore .bin/.pt/.pth/.pkl/.ckpt files in MODEL "
                   "instead of refusing the folder (they are never loaded: quantgate reads safetensors only)")
    q.set_defaults(func=cmd_quantize)


def cmd_recipes_list(a) -> int:
    from quantgate.recipes import list_presets, load_recipe

    for name in list_presets():
        r = load_recipe(name).recipe
        print(f"{name:<20} {' '.join(r.description.split())[:100]}")
    return 0


def cmd_recipes_show(a) -> int:
    from quantgate.recipes import load_recipe

    print(load_recipe(a.name).text, end="")
    return 0


def cmd_recipes_validate(a) -> int:
    from quantgate.recipes import load_recipe

    rec = load_recipe(a.file)
    if a.model:
        from quantgate.quantize import make_plan

        plan = make_plan(a.model, rec)
        for w in plan.warnings:
            print(f"warning: {w}", file=sys.stderr)
    kind = "raw llmcompressor recipe" if rec.recipe is None else f"quantgate recipe {rec.name!r}"
    print(f"{a.file}: valid {kind}" + (f", every rule matches {a.model}" if a.model and rec.recipe else ""))
    return 0


def cmd_plan(a) -> int:
    from quantgate.quantize import format_plan_table, make_plan
    from quantgate.recipes import load_recipe

    plan = make_plan(a.model, load_recipe(a.recipe), a.trust_remote_code, allow_pickle_files=a.allow_pickle_files)
    for w in plan.warnings:
        print(f"warning: {w}", file=sys.stderr)
    if a.json:
        print_json({"modules": plan.rows(), "totals": plan.totals(), "warnings": plan.warnings})
    else:
        print(format_plan_table(plan, show_bf16=not a.quantized_only))
    return 0


def cmd_quantize(a) -> int:
    from quantgate.quantize import quantize
    from quantgate.quantize.devices import parse_max_memory

    caps = parse_max_memory(a.max_memory) if a.max_memory else None  # before any work

    m = quantize(a.model, a.recipe, a.output, calibration=a.calibration, samples=a.calibration_samples, max_seq_len=a.max_seq_len,
                 prompt=a.prompt, pipeline=a.pipeline, text_only=a.text_only or None, overwrite=a.overwrite,
                 trust_remote_code=a.trust_remote_code, allow_pickle_files=a.allow_pickle_files, device=a.device,
                 devices=a.devices, max_memory=caps, log=lambda s: print(s, file=sys.stderr))
    v, s = m.manifest.verification, m.manifest.size
    print(f"{a.output}: verified {v.modules_checked} modules {v.formats}; vision BF16: {v.vision_bf16}; "
          f"weights {s.weights_bytes / 1e6:.1f} MB ({s.compression}x smaller than the source); {m.manifest.wall_s} s")
    return 0


def _devices(text: str):
    from quantgate.quantize.devices import parse_devices

    return parse_devices(text)

