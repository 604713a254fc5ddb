"""NVIDIA ModelOpt's auto_quantize choice on the bundled reader, judged through quantgate.

benchmarks/sensitivity_reader.py ran ModelOpt 0.47.0's auto_quantize (CPU, effective_bits 8.0 over
FP8_DEFAULT_CFG and INT4_AWQ_CFG, methods gradient and kl_div) and stored each run's `chosen` map
(module → format) under "modelopt" in benchmarks/results/sensitivity_reader.json. ModelOpt exports its
own checkpoint format, which quantgate's servers do not load; so this script translates each chosen map
into a quantgate recipe and runs one quantgate study (transformers serve, CPU, the same held-out pages
as sensitivity_reader.py's study) with BF16, both ModelOpt choices and quantgate's own recommendation at
the same effective-bits budget and format set.

The translation is an approximation, stated in the JSON and in docs/sensitivity.md:
- FP8_DEFAULT_CFG (FP8 per-tensor weights and activations, static, calibrated) → quantgate `fp8-static`
  (llmcompressor's FP8 preset: the same scheme, calibrated on quantgate's calibration pages, not ModelOpt's).
- INT4_AWQ_CFG (INT4 weight-only, groups of 128, AWQ) → quantgate `w4a16` (groups of 128, round to
  nearest: no AWQ scaling search).
- ModelOpt names one member of each fused group (q_proj for q/k/v, gate_proj for gate/up, in_proj_qkv for
  qkv+z, in_proj_b for a+b): every sibling gets the chosen format (quantgate refuses siblings that differ).
- Modules ModelOpt left unquantized (its NONE choice) stay BF16; modules quantgate's formats cannot take
  (Gated DeltaNet's conv1d, an nn.Conv1d) stay BF16 and are listed.

    PYTHONPATH=. .venv/bin/python lab/2026-11-30-modelopt-choice/modelopt_choice.py      # ~10 min on a 2-core CPU

Writes lab/2026-11-30-modelopt-choice/modelopt_choice.json.gz (gzipped JSON: the tracked tree's size budget) and
prints a pandas table."""

from __future__ import annotations

import argparse
import gzip
import json
import re
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))  # sensitivity_reader, the reusable reader benchmark
from sensitivity_reader import READER, ROOT, qg, reader_pages  # noqa: E402

FORMAT_MAP = {"FP8_DEFAULT_CFG": "fp8-static", "INT4_AWQ_CFG": "w4a16"}
WHY_FORMAT = {"fp8-static": "FP8_DEFAULT_CFG → fp8-static: FP8 per-tensor weights and activations, static, calibrated "
                            "(on quantgate's 16 calibration pages, not ModelOpt's 4)",
              "w4a16": "INT4_AWQ_CFG → w4a16: INT4 weight-only, groups of 128, round to nearest — NOT AWQ "
                       "(no activation-aware scale search)"}
DECODER_KINDS = ("attention", "linear_attention", "mlp")
METRICS, MARGINS = ["ned", "cer", "bow_f1"], {"ned": 0.01, "cer": 0.01, "bow_f1": 0.02}


def siblings(name: str, names: set[str]) -> list[str]:
    """The module and its fused siblings present in the model (quantgate's FUSED_SIBLINGS, the same
    groups as ModelOpt 0.47's quant_grouping_rules for these names)."""
    from quantgate.recipes.model import FUSED_SIBLINGS

    parent, _, leaf = name.rpartition(".")
    group = next((s for s in FUSED_SIBLINGS if leaf in s), {leaf})
    return sorted(f"{parent}.{x}" for x in group if f"{parent}.{x}" in names)


def translate(run: dict, modules: list, label: str) -> dict:
    """ModelOpt's chosen map → quantgate formats per module, the recipe text, and what stays BF16 and why."""
    by_name = {m.name: m for m in modules}
    formats: dict[str, str] = {}
    kept: dict[str, str] = {}
    counts: dict[str, int] = {}
    rules = []
    for name, choice in run["chosen"].items():
        cfg = choice.split("(")[0]
        counts[cfg] = counts.get(cfg, 0) + 1
        if name not in by_name:
            kept[name] = (f"ModelOpt chose {cfg}; not a Linear module (Gated DeltaNet's causal conv1d, an nn.Conv1d): "
                          "quantgate's formats quantize Linear weights only")
            continue
        fmt = FORMAT_MAP[cfg]
        sibs = siblings(name, set(by_name))
        for s in sibs:
            formats[s] = fmt
        pats = ", ".join("'re:" + re.escape(s) + "'" for s in sibs)
        rules.append(f"  # {name}: ModelOpt {cfg}" + (f" (fused group: {', '.join(s.rsplit('.', 1)[1] for s in sibs)})"
                                                       if len(sibs) > 1 else "")
                     + f"\n  - {{match: [{pats}], format: {fmt}}}")
    for m in modules:
        if m.kind in DECODER_KINDS and m.name not in formats:
            kept[m.name] = "ModelOpt chose no quantization (NONE) for its group"
    header = (f"# ModelOpt 0.47.0 auto_quantize ({label}) on the bundled reader, translated by "
              "lab/2026-11-30-modelopt-choice/modelopt_choice.py.\n"
              + "".join(f"# {w}\n" for w in WHY_FORMAT.values())
              + "# Fused siblings get the format ModelOpt chose for their group; conv1d and NONE modules stay BF16.\n")
    text = (header + f'name: "modelopt-{label}"\n'
            f'description: "ModelOpt auto_quantize {label}, effective_bits 8.0, FP8_DEFAULT_CFG+INT4_AWQ_CFG, '
            'translated (w4a16 is RTN, not AWQ)"\n'
            "allow_vision: false\ncalibration: {samples: 16, max_seq_len: 4096}\nrules:\n" + "\n".join(rules) + "\n")
    return {"formats": formats, "kept_bf16": kept, "chosen_counts": counts, "recipe": text}


def nominal_bits(formats: dict[str, str], modules: list) -> float:
    """ModelOpt's accounting (16 / 8 / 4 bits per weight, no scales) over the decoder's Linear weights."""
    bits = {"bf16": 16, "fp8-static": 8, "fp8": 8, "w4a16": 4}
    dec = [m for m in modules if m.kind in DECODER_KINDS]
    return round(sum(m.params * bits[formats.get(m.name, "bf16")] for m in dec) / sum(m.params for m in dec), 3)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", type=Path, default=Path("/tmp/qg-modelopt-choice"))
    ap.add_argument("--sensitivity", type=Path, default=Path("/tmp/qg-sensitivity-bench/sens.json"),
                    help="the reader's decoder sensitivity file (sensitivity_reader.py's sens.json); measured anew "
                    "if missing (~3 min)")
    ap.add_argument("--source", type=Path, default=ROOT / "benchmarks/results/sensitivity_reader.json")
    ap.add_argument("--out", type=Path, default=ROOT / "lab/2026-11-30-modelopt-choice/modelopt_choice.json.gz")
    ap.add_argument("--skip-study", action="store_true", help="translate and validate only")
    a = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    import pandas as pd
    import yaml

    from quantgate.quantize.plan import make_plan, model_modules
    from quantgate.recipes import load_recipe

    a.work.mkdir(parents=True, exist_ok=True)
    pages = reader_pages(a.work)
    mm = model_modules(READER)
    runs = [r for r in json.loads(a.source.read_text())["modelopt"] if r.get("ok")]
    result: dict = {"command": "PYTHONPATH=. .venv/bin/python lab/2026-11-30-modelopt-choice/modelopt_choice.py",
                    "source": str(a.source.relative_to(ROOT)), "modelopt_runs": [], "approximations": list(WHY_FORMAT.values()) + [
        "fused siblings (q/k/v, gate/up, in_proj_qkv+z, in_proj_a+b) take the format ModelOpt chose for the group",
        "Gated DeltaNet conv1d (nn.Conv1d) stays BF16: quantgate quantizes Linear weights only",
        "quantgate's own recommendation uses its sensitivity file's `fp8` (FP8_DYNAMIC: per-channel weights, "
        "per-token dynamic activations), not fp8-static, and keeps in_proj_a/b BF16 (--keep-bf16 at measurement)"]}
    variants = {"bf16": "bf16"}
    for run in runs:
        label = "gradient" if "'gradient'" in run["command"] else "kl_div"
        t = translate(run, mm.modules, label)
        path = a.work / f"modelopt-{label}.yaml"
        path.write_text(t["recipe"])
        plan = make_plan(READER, load_recipe(path), modules=mm)  # quantgate's loader: refuses bad rules / siblings
        intended = {m.name: t["formats"].get(m.name, "bf16") for m in mm.modules}
        if plan.formats != intended:
            sys.exit(f"{path}: the plan differs from the translation: "
                     f"{ {k: (v, intended[k]) for k, v in plan.formats.items() if v != intended[k]} }")
        variants[f"modelopt-{label}"] = str(path)
        result["modelopt_runs"].append({
            "variant": f"modelopt-{label}", "modelopt_command": run["command"], "method": label,
            "chosen_counts": t["chosen_counts"], "chosen": run["chosen"], "recipe": t["recipe"],
            "kept_bf16": t["kept_bf16"], "plan_warnings": plan.warnings,
            "plan_estimated_bytes": plan.totals()["estimated_bytes"],
            "plan_per_format": plan.totals()["per_format"],
            "nominal_bits_decoder_linear": nominal_bits(plan.formats, mm.modules)})
    sens = a.sensitivity
    if not sens.exists():
        qg("sensitivity", READER, "--calibration", pages, "--formats", "fp8,nvfp4,w4a16,w2a16", "-o", sens)
    rec = a.work / "qg-rec-eb8.yaml"
    p, _ = qg("recommend", sens, "--effective-bits", 8.0, "--formats", "fp8,w4a16", "--model", READER, "-o", rec, "--json")
    r = json.loads(p.stdout)
    qplan = make_plan(READER, load_recipe(rec), modules=mm)
    result["quantgate_recommend"] = {
        "variant": "qg-rec-eb8", "command": "quantgate recommend sens.json --effective-bits 8.0 --formats fp8,w4a16",
        "recipe": rec.read_text(), "assignment": r["assignment"], "effective_bits": r["effective_bits"],
        "predicted_kl_sum": r["predicted_kl_sum"], "plan_estimated_bytes": qplan.totals()["estimated_bytes"],
        "nominal_bits_decoder_linear": nominal_bits(qplan.formats, mm.modules)}
    variants["qg-rec-eb8"] = str(rec)
    if not a.skip_study:
        spec = {"name": "modelopt-choice", "model": str(READER), "pages": {"path": str(pages)},
                "variants": [{"name": n, "recipe": v} for n, v in variants.items()], "baseline": "bf16",
                "calibration_samples": 16, "backend": {"name": "transformers", "device": "cpu"}, "concurrency": [1],
                "noise_concurrency": 2, "limit": 30, "max_tokens": 48, "metrics": METRICS, "margins": MARGINS,
                "seed": 0, "resamples": 10000}
        (a.work / "study.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
        shutil.rmtree(a.work / "study", ignore_errors=True)  # from scratch: the recorded wall time is the whole study
        _, timing = qg("study", a.work / "study.yaml", "-o", a.work / "study")
        s = json.loads((a.work / "study" / "summary.json").read_text())
        sizes = {v["name"]: v["weights_bytes"] for v in s["variants"]}
        verdicts: dict[str, dict] = {}
        for v in s["verdicts"]:
            verdicts.setdefault(v["variant"], {})[v["metric"]] = {
                "verdict": v["verdict"], "reason": v.get("reason"), "delta": v["delta"], "ci90": [v["ci_low"], v["ci_high"]], "margin": v["margin"],
                "baseline_mean": v["baseline_mean"], "candidate_mean": v["candidate_mean"], "n": v["n"],
                "pages_changed": v.get("pages_changed"), "pages_compared": v.get("pages_compared")}
        for entry in [*result["modelopt_runs"], result["quantgate_recommend"]]:
            entry["weights_bytes"] = sizes[entry["variant"]]
            entry["verdicts"] = verdicts[entry["variant"]]
        result["study"] = {"command": "quantgate study study.yaml -o study", "spec": spec | {"model": "quantgate/assets/reader",
                           "pages": {"path": "PAGES"}}, "pages": "quantgate pages synth --profile reader --n 60 --seed 7 "
                           "--calibration-fraction 0.4 (held-out split judged, limit 30)", "timing": timing,
                           "compare_level": s["compare_level"], "bf16_weights_bytes": sizes["bf16"]}
        rows = [{"variant": e["variant"], "MB": e["weights_bytes"] / 1e6, "bits(nominal)": e["nominal_bits_decoder_linear"],
                 **{f"{m}": f"{d['verdict']} Δ{d['delta']:+.4f} [{d['ci90'][0]:+.4f},{d['ci90'][1]:+.4f}] n={d['n']} changed={d['pages_changed']}"
                    for m, d in e["verdicts"].items()}}
                for e in [*result["modelopt_runs"], result["quantgate_recommend"]]]
        with pd.option_context("display.width", 250, "display.max_columns", 20, "display.max_colwidth", 60):
            print(pd.DataFrame(rows).to_string(index=False))
        print(f"study: {timing}")
    a.out.parent.mkdir(parents=True, exist_ok=True)
    text = (json.dumps(result, indent=1, ensure_ascii=False) + "\n").encode()
    a.out.write_bytes(gzip.compress(text, mtime=0) if a.out.suffix == ".gz" else text)
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
