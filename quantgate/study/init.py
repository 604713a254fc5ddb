"""``quantgate init``: from a checkpoint and pages to a commented study YAML that runs as written.

It inspects the checkpoint (the same checks every stage runs, then the meta-device build the planner
uses: architecture, parameters, which presets apply and what stays BF16), takes the pages as a page set
or imports a folder of images/PDFs into one beside the YAML (so the YAML runs as is and the counts are
real), and proposes variants, metrics, margins, concurrency levels and an SLO for the backend. Every
choice is written with a comment that says why."""

from __future__ import annotations

import json
import math
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path

import yaml

from quantgate.errors import InputError
from quantgate.schema.load import load_json
from quantgate.study.init_pages import (  # noqa: F401  (init's page side, named here for its callers)
    ImportRequest,
    PageFacts,
    _too_few,
    check_inputs,
    pages_target,
    prepare_pages,
    truth_folder,
)

# Presets a study proposes by default (the demo's set); the harmful ones exist for gate tests.
PROPOSED = ("fp8-dynamic", "nvfp4", "mixed")
# A page of markdown rarely needs more (a dense A4 page of text is ~1.5k words, ~3k tokens in a BPE vocabulary):
# above it, 1.5x the longest truth is a truth tokenized badly (a byte-level toy tokenizer) or a page no parser
# should answer in one request, and every request's budget — and a runaway output's time — would follow it.
MAX_TOKENS_CAP = 8192


@dataclass
class ModelFacts:
    path: Path
    architecture: str
    params: int
    weights_bytes: int
    vision_bf16: int  # vision encoder + projector modules, kept BF16 by every proposed preset
    presets: dict[str, dict]  # applicable preset → {formats, quantized, compression, calibration}
    not_applicable: dict[str, str]  # preset → why not


def inspect_model(model: Path) -> ModelFacts:
    from quantgate.io.modeldir import check_model_dir
    from quantgate.quantize.plan import make_plan, model_modules
    from quantgate.recipes import NEEDS_CALIBRATION, list_presets, load_recipe

    model = Path(model)
    if not model.is_dir():
        raise InputError(f"--model {model}: not a folder; give a Hugging Face checkpoint folder (config.json + "
                         "*.safetensors)")
    check_model_dir(model)  # safetensors only, no remote code, a chat template that renders
    mm = model_modules(model)
    cfg = load_json(model / "config.json", "model config")  # a downloaded model's file: under the loader's limits
    presets, refused = {}, {}
    for name in list_presets():
        try:
            plan = make_plan(model, load_recipe(name), modules=mm)
        except InputError as e:
            refused[name] = str(e)
            continue
        quantized = {f for f in plan.formats.values() if f != "bf16"}
        if name != "bf16" and not quantized:
            refused[name] = "quantizes no module of this model"
            continue
        presets[name] = {"formats": sorted(quantized), "compression": plan.totals()["compression"],
                         "quantized": sum(1 for f in plan.formats.values() if f != "bf16"),
                         "calibration": bool(quantized & NEEDS_CALIBRATION),
                         "vision_touched": any(plan.formats.get(m.name, "bf16") != "bf16"
                                               for m in mm.modules if m.kind in ("vision", "projector"))}
    return ModelFacts(model, (cfg.get("architectures") or ["?"])[0], mm.total_params,
                      sum(f.stat().st_size for f in model.glob("*.safetensors")),
                      sum(1 for m in mm.modules if m.kind in ("vision", "projector")), presets, refused)


def default_margin(metric: str) -> tuple[float, str]:
    """The margin a study without ``margins:`` would use (the registry's), so the YAML shows what runs."""
    from quantgate.schema.metrics import declared_margin

    return declared_margin(metric, None)[0], "the metric registry's defaults"


def _cuda() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except ImportError:
        return False


def _flow(obj) -> str:
    """One YAML value on one line (a string as JSON, which YAML reads; safe_dump would add "...")."""
    if isinstance(obj, str):
        return json.dumps(obj)
    return yaml.safe_dump(obj, default_flow_style=True, sort_keys=False, width=10_000).strip()


def check_variants(mf: ModelFacts, variants: list[str] | None) -> None:
    from quantgate.recipes import list_presets

    for v in variants or []:
        if v not in mf.presets:
            why = mf.not_applicable.get(v, f"no such preset (presets: {', '.join(list_presets())})")
            raise InputError(f"--variants {v}: does not apply to {mf.path}: {why}")


def render_study(mf: ModelFacts, pf: PageFacts, yaml_path: Path, backend: str, variants: list[str] | None,
                 name: str | None = None) -> str:
    """The commented YAML."""
    here = yaml_path.resolve().parent

    def rel(p: Path) -> str:
        """Relative to the YAML (how a study reads paths) when beside or under it; absolute otherwise."""
        r = os.path.relpath(Path(p).resolve(), here)
        return str(Path(p).resolve()) if r.startswith("..") else r

    name = name or re.sub(r"[^A-Za-z0-9._-]+", "-", mf.path.resolve().name).strip("-") or "study"
    check_variants(mf, variants)
    chosen = variants if variants is not None else [p for p in PROPOSED if p in mf.presets]
    if not pf.calibration:
        dropped = [v for v in chosen if mf.presets[v]["calibration"]]
        if dropped and variants is not None:
            raise InputError(f"--variants {', '.join(dropped)}: need calibration pages and {pf.path} has none in its "
                             "calibration split")
        chosen = [v for v in chosen if v not in dropped]
    chosen_metrics = choose_metrics(pf)
    metrics = [m for names, _ in chosen_metrics for m in names]
    margins = {m: default_margin(m) for m in metrics}
    gpu = _cuda()
    L: list[str] = [
        f"# Written by `quantgate init`. Every choice below says why; edit any of them. Run: quantgate study {yaml_path}",
        f"name: {_flow(name)}",
        f"# {mf.architecture}: {mf.params / 1e6:,.1f} M parameters, {mf.weights_bytes / 1e6:,.1f} MB of safetensors.",
        f"model: {_flow(rel(mf.path))}",
        f"# {pf.n} pages: {pf.heldout} held out (scored; {pf.heldout_truth} with truth, {pf.heldout_checks} checks), "
        f"{pf.calibration} for calibration.",
    ]
    if pf.imported:
        L.append(f"# Imported by init with: {pf.imported}")
    L += [f"pages: {_flow({'path': rel(pf.path)})}", "split: heldout"]
    for w in pf.warnings:
        L.append(f"# NOTE: {w}")
    L += ["# The variants: the BF16 baseline and presets that apply to this model (`quantgate plan MODEL --recipe "
          "NAME` shows each module's format).",
          f"# The vision encoder and projector ({mf.vision_bf16} modules) stay BF16 in every variant below"
          + ("." if not any(mf.presets[v]["vision_touched"] for v in chosen) else ", except "
             + ", ".join(v for v in chosen if mf.presets[v]["vision_touched"]) + "."),
          "variants:", "  - {name: bf16, recipe: bf16}  # the baseline: the checkpoint re-saved, nothing quantized"]
    for v in chosen:
        p = mf.presets[v]
        cal = "; calibrates activation scales on the calibration pages" if p["calibration"] else ""
        L.append(f"  - {_flow({'name': v, 'recipe': v})}  # {p['quantized']} modules {'+'.join(p['formats'])}, "
                 f"~{p['compression']}x smaller weights{cal}")
    others = sorted(set(mf.presets) - set(chosen) - {"bf16"})
    if others:
        L.append(f"# Also applicable: {', '.join(others)} (harmful-* are deliberately bad, for testing the gate).")
    L.append("baseline: bf16")
    if any(mf.presets[v]["calibration"] for v in chosen):
        n = min(32, pf.calibration)
        L.append(f"calibration_samples: {n}  # the calibration split has {pf.calibration} page(s); 32 is the presets' "
                 "default")
    if backend == "transformers":
        dev = "cuda:0" if gpu else "cpu"
        L += [f"backend: {_flow({'name': 'transformers', 'device': dev})}  # transformers serve, on "
              f"{'the GPU' if gpu else 'the CPU (no GPU found)'}",
              "# transformers serve answers one request at a time, so more levels would only repeat the first:",
              "# verdicts at concurrency 1; the baseline is served again at 2 as its noise run. vLLM measures speed.",
              "concurrency: [1]", "noise_concurrency: 2",
              f"slo_s: {10 if gpu else 60}  # p90 latency a page may take; the report names the highest level within "
              "it"]
    elif backend == "vllm":
        L += ["backend: {name: vllm}  # vllm serve, from its own environment: export QUANTGATE_VLLM=/path/to/vllm "
              "(or set vllm_cmd here)",
              "# Verdicts at the first level; the baseline's second level (8) is its noise run (batching changes",
              "# its numerics); the others show how throughput and p90 latency scale.",
              "concurrency: [1, 8, 32, 64]",
              "slo_s: 10  # p90 latency a page may take; the report names the highest level within it"]
    elif backend == "openai":
        L += ["# An endpoint that already runs: it must serve each variant under its model name (the variant's",
              "# folder path, or set model: here). Edit the URL.",
              "backend: {name: openai, endpoint: 'http://127.0.0.1:8000/v1'}",
              "concurrency: [1, 8]  # verdicts at 1; the baseline's second level is its noise run",
              "slo_s: 10  # p90 latency a page may take"]
    else:
        raise InputError(f"--backend {backend}: init writes transformers, vllm or openai studies")
    if pf.truth_tokens_max:
        L.append(max_tokens_line(pf.truth_tokens_max))
    else:
        L.append("max_tokens: 4096  # no truth to size it from: a full page of markdown")
    L.append("# The metrics, from what the held-out pages' truth holds:")
    L += [f"#   {', '.join(names)}: {why}" for names, why in chosen_metrics]
    L.append(f"metrics: {_flow(metrics)}")
    srcs = sorted({src for _, src in margins.values()})
    L += [f"# Non-inferiority margins ({' / '.join(srcs)}): a variant is within noise only when the 90% interval of its",
          "# mean difference from BF16 shows it at worst one margin worse (one-sided at 95%; `test: equivalence` also",
          "# fails a variant suspiciously better; docs/statistics.md). Set them to what your users notice.",
          f"margins: {_flow({m: v for m, (v, _) in margins.items()})}",
          "bootstrap_seed: 0", f"output: {_flow(name + '-out')}",
          "# lm-eval beside the pages (docs/lmeval.md): the page-heading task, or your own tasks. Uncomment to add:",
          f"# lm_eval: {{page_task: true, limit: {min(32, pf.heldout)}, margin: 0.05}}"]
    return "\n".join(L) + "\n"


def choose_metrics(pf: PageFacts) -> list[tuple[list[str], str]]:
    """(metrics, why) for each kind of truth the held-out pages hold."""
    from quantgate.schema.metrics import BY_NAME_ONLY, METRICS
    from quantgate.scoring.omnidoc.cdm_render import MAKE_TARGET, missing_packages
    from quantgate.scoring.omnidoc.v15 import CDM

    out = []
    if pf.heldout_truth:
        out.append((["ned", "cer", "bow_f1"], f"{pf.heldout_truth} page(s) have truth text (whole-page edit distance, "
                    "character error rate, bag-of-words F1)"))
    if pf.tables:
        out.append((["table_teds"], "the truth has tables (HTML or pipe tables), scored by tree edit distance"))
    if pf.omnidoc:
        # v1.5 is the protocol the field reports now (v1.0 values do not compare with it); v1.0 stays by name
        family = [m for m, spec in METRICS.items() if spec.family == "omnidoc15" and m not in BY_NAME_ONLY]
        # formula CDM (Overall's third part) where its toolchain is here, as doctor checks it; else how to get it
        missing = missing_packages()
        cdm = ("; formula CDM too (rendered with XeLaTeX, ~1 s a formula), which gives the report's Overall"
               if not missing else f"; formula CDM (omnidoc15_formula_cdm, for the report's Overall) left out: its "
               f"LaTeX toolchain is not installed ({' '.join(missing)}): {MAKE_TARGET}, then add it to metrics")
        out.append((family + ([CDM] if not missing else []), f"{pf.omnidoc} page(s) have OmniDocBench block records "
                    f"(layout_dets), scored block-matched as OmniDocBench v1.5 does{cdm}"))
    if pf.heldout_checks:
        out.append((["checks"], f"{pf.heldout_checks} olmOCR-bench check(s) on the pages (share passed)"))
    if pf.parsebench:
        # a dimension only where pages carry its rules: a metric that applies to no page has nothing to judge
        out.append((list(pf.parsebench), "ParseBench rules on the pages (" + ", ".join(
            f"{m}: {n} page(s)" for m, n in pf.parsebench.items()) + "), scored as ParseBench's evaluator scores a page"))
    return out


def max_tokens_line(truth_tokens_max: int) -> str:
    """``max_tokens``: 1.5x the longest held-out truth, rounded up to 64, at least 256 and at most
    :data:`MAX_TOKENS_CAP`, with the comment saying which."""
    mt = max(256, 64 * math.ceil(truth_tokens_max * 1.5 / 64))
    if mt > MAX_TOKENS_CAP:
        return (f"max_tokens: {MAX_TOKENS_CAP}  # capped: 1.5x the longest held-out truth would be {mt} "
                f"({truth_tokens_max} tokens by the model's tokenizer); pages longer than the cap are cut in every "
                "variant alike. Raise it if your pages really are that long")
    return f"max_tokens: {mt}  # 1.5x the longest held-out truth ({truth_tokens_max} tokens by the model's tokenizer)"


def write_study(yaml_path: Path, text: str, overwrite: bool = False) -> None:
    """Validate the text as a study (the same loader `quantgate study` uses), then write it atomically."""

    from quantgate.io.fileio import atomic_write_text
    from quantgate.study.spec import load_study

    yaml_path = Path(yaml_path)
    if yaml_path.exists() and not overwrite:
        raise InputError(f"-o {yaml_path}: exists; choose another path or pass --overwrite")
    yaml_path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", dir=yaml_path.parent, delete=False) as f:
        f.write(text)
    try:
        load_study(Path(f.name))  # paths in it are relative to the folder it will live in: the same one
    finally:
        os.unlink(f.name)
    atomic_write_text(yaml_path, text)
