"""GPU session, GPU1 (issue 16 part 2): what vLLM 0.26 on the H200 computes for a quantized linear layer —
weights only, or weights and activations — measured on the layer's outputs, as tests/integration/test_numerics.py
measured `transformers serve` on CPU.

Two phases, in two environments:

``dequant`` (compressed-tensors 0.19, llmcompressor's: PYTHONPATH=/tmp/siteq:…) reads one layer of a variant
from its safetensors — the compressed tensors, its config group's scheme — and writes the dequantized weight
(compressed-tensors' own decompressor) with the activation parameters the scheme needs (NVFP4's
input_global_scale) to OUT.safetensors + OUT.json. No GPU needed.

``measure`` (vLLM's environment) loads the variant in-process (``VLLM_ENABLE_V1_MULTIPROCESSING=0``,
``enforce_eager=True``: modules run as plain PyTorch calls, so hooks see them), reaches the model object
(``LLM.apply_model``; fallback: the uniprocess executor's driver worker), finds the same layer, captures its
input and output during a real request with a page image, and calls it directly on Gaussian inputs of the
same RMS at a few token counts. Each output is compared with (a) x @ W_deq.T and (b) the activation-fake-
quantized reference x_q @ W_deq.T (``quantgate.serve.numerics.reference_fake_quant``, written from the scheme's
definition); the kernel class vLLM chose is read off the layer's scheme. ``verdict`` says which reference the
kernel matches.

    python vllm_numerics.py dequant --variant .gpu-carry/q25-nvfp4 -o W/numerics/nvfp4
    python vllm_numerics.py measure --variant .gpu-carry/q25-nvfp4 --ref W/numerics/nvfp4 --pages .gpu-carry/q200 \\
        [--linear-backend emulation] -o W/numerics/measure-nvfp4-auto.json
    python vllm_numerics.py report W/numerics/measure-*.json -o RESULTS/vllm_numerics.json
    python vllm_numerics.py measure … --dry-run      # no vLLM: the layer's output is x @ W_deq.T (plumbing only)
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

LAYER = "layers.0.mlp.down_proj"  # not fused by vLLM (gate/up and q/k/v are), in every decoder
CLOSE = 1e-2  # a relative error this small is BF16 output rounding, not a quantization step
APART = 3.0  # the other reference must be at least this many times further off to call it


def verdict(rel_weights_only: float, rel_activation_fake_quant: float, close: float = CLOSE,
            apart: float = APART) -> str:
    """Which computation a layer's output matches: ``weights-only`` (x @ W_deq.T), ``weights+activations``
    (the input rounded as the scheme says, then @ W_deq.T), or ``unclear`` (neither close, or both)."""
    w, a = rel_weights_only, rel_activation_fake_quant
    if w <= close and a >= apart * max(w, 1e-12):
        return "weights-only"
    if a <= close and w >= apart * max(a, 1e-12):
        return "weights+activations"
    return "unclear"


def summarize(rows: list[dict]) -> dict:
    """One conclusion per measurement file: the verdicts of its rows (all inputs), the worst errors."""
    verdicts = sorted({r["verdict"] for r in rows})
    return {"computes": verdicts[0] if len(verdicts) == 1 else "mixed: " + ", ".join(verdicts),
            "n_rows": len(rows),
            "max_rel_err_vs_weight_only": max((r["rel_err_vs_weight_only"] for r in rows), default=None),
            "max_rel_err_vs_activation_fake_quant": max((r["rel_err_vs_activation_fake_quant"] for r in rows),
                                                        default=None)}


# --- phase 1: the reference weight, from the checkpoint ----------------------------------------------------------

def find_prefix(keys, suffix: str) -> str:
    prefixes = sorted({k.rsplit(".", 1)[0] for k in keys})
    hits = [p for p in prefixes if (p == suffix or p.endswith("." + suffix)) and "visual" not in p]
    if len(hits) != 1:
        raise SystemExit(f"layer {suffix!r}: {len(hits)} matching module(s) in the checkpoint: {hits[:5]}")
    return hits[0]


def dequant(variant: Path, out: Path, suffix: str = LAYER) -> dict:
    from compressed_tensors.compressors import BaseCompressor
    from compressed_tensors.quantization import QuantizationScheme
    from compressed_tensors.utils.match import match_name
    from safetensors import safe_open
    from safetensors.torch import save_file

    q = json.loads((variant / "config.json").read_text())["quantization_config"]
    state, prefix = {}, None
    for f in sorted(variant.glob("*.safetensors")):
        with safe_open(f, "pt") as st:
            keys = list(st.keys())
            try:
                prefix = prefix or find_prefix(keys, suffix)
            except SystemExit:
                continue
            state.update({k[len(prefix) + 1:]: st.get_tensor(k) for k in keys if k.startswith(prefix + ".")})
    if not state:
        raise SystemExit(f"{variant}: no tensors for {suffix}")
    groups = [g for g in q["config_groups"].values() if any(match_name(prefix, t) for t in g["targets"])]
    if len(groups) != 1:
        raise SystemExit(f"{variant}: {prefix} matches {len(groups)} config groups")
    g = groups[0]
    fmt = g.get("format") or q["format"]
    comp = BaseCompressor.get_value_from_registry(fmt)
    dq = comp.decompress(state, QuantizationScheme.model_validate(g))
    tensors = {"weight": dq["weight"].contiguous()}
    for k in ("input_global_scale", "input_scale", "bias"):
        if k in state:
            tensors[k] = state[k].contiguous()
    out.parent.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(out.with_suffix(".safetensors")))
    meta = {"variant": str(variant), "checkpoint_module": prefix, "format": fmt, "decompressor": comp.__name__,
            "compressed_tensors": _version("compressed-tensors"), "scheme": g,
            "compressed": {k: [str(v.dtype).removeprefix("torch."), list(v.shape)] for k, v in state.items()},
            "weight_dtype": str(dq["weight"].dtype).removeprefix("torch.")}
    out.with_suffix(".json").write_text(json.dumps(meta, indent=1))
    return meta


def _version(pkg: str) -> str | None:
    import importlib.metadata as md

    try:
        return md.version(pkg)
    except md.PackageNotFoundError:
        return None


# --- phase 2: the layer in vLLM ---------------------------------------------------------------------------------

def get_model(llm):
    """The model object inside an in-process vLLM 0.26 engine, and how it was reached."""
    try:
        return llm.apply_model(lambda m: m)[0], "LLM.apply_model"
    except Exception as e:  # noqa: BLE001 - the fallback below is the same object by another path
        first = f"{type(e).__name__}: {e}"
    runner = llm.llm_engine.model_executor.driver_worker.worker.model_runner
    return runner.get_model(), f"llm_engine.model_executor.driver_worker.worker.model_runner.get_model() ({first})"


def find_layer(model, suffix: str):
    hits = [(n, m) for n, m in model.named_modules()
            if (n == suffix or n.endswith("." + suffix)) and "visual" not in n and getattr(m, "scheme", None)]
    if len(hits) != 1:
        raise SystemExit(f"vLLM model: {len(hits)} quantized module(s) named *{suffix}: {[n for n, _ in hits][:5]}")
    return hits[0]


def kernel_names(module) -> dict:
    """The scheme class and the kernel object(s) it holds (``fp8_linear``, ``kernel``, …): their class names."""
    scheme = getattr(module, "scheme", None)
    kernels = {k: type(v).__name__ for k, v in vars(scheme).items() if type(v).__name__.endswith("Kernel")} \
        if scheme is not None else {}
    return {"quant_method": type(getattr(module, "quant_method", None)).__name__,
            "scheme": type(scheme).__name__ if scheme is not None else None, "kernels": kernels}


def compare(y, x, w, bias, scheme: dict, params) -> dict:
    """Relative errors of a layer output ``y`` against x @ W.T and against the activation-fake-quantized
    product (float32 products of the BF16 operands)."""
    import torch.nn.functional as F

    from quantgate.serve.numerics import _rel, reference_fake_quant

    ia = scheme.get("input_activations")
    b = None if bias is None else bias.float()
    y_w = F.linear(x.float(), w.float(), b)
    y_a = F.linear(reference_fake_quant(x, ia, params).float(), w.float(), b) if ia else y_w
    rw, ra = _rel(y, y_w), _rel(y, y_a)
    return {"rel_err_vs_weight_only": rw, "rel_err_vs_activation_fake_quant": ra,
            "activation_scheme": ia, "verdict": verdict(rw, ra) if ia else
            ("weights-only" if rw <= CLOSE else "unclear")}


def _page_messages(pages: Path, prompt: str) -> list[dict]:
    import base64

    from quantgate.io.pageset import load_pageset

    ps = load_pageset(pages)
    png = ps.image_bytes(ps.split("heldout")[0])
    return [{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": "data:image/png;base64," + base64.b64encode(png).decode()}},
        {"type": "text", "text": prompt}]}]


def measure(a: argparse.Namespace) -> dict:
    import torch
    from safetensors.torch import load_file

    from quantgate.schema.run import DEFAULT_PROMPT

    meta = json.loads(a.ref.with_suffix(".json").read_text())
    ref = load_file(str(a.ref.with_suffix(".safetensors")))
    dev = "cpu" if a.dry_run else "cuda"
    w = ref["weight"].to(dev)
    params = type("Params", (), {k: ref[k].to(dev) for k in ("input_global_scale", "input_scale") if k in ref})()
    bias = ref.get("bias")
    from quantgate.serve.numerics import scheme_format

    result = {"variant": str(a.variant), "format": scheme_format(meta["scheme"]), "compression_format": meta["format"],
              "checkpoint_module": meta["checkpoint_module"],
              "reference": meta, "linear_backend": a.linear_backend or "auto", "dry_run": a.dry_run,
              "close": CLOSE, "apart": APART}
    t0 = time.time()
    captured: dict = {}
    if a.dry_run:  # plumbing only: a layer that computes x @ W_deq.T in BF16
        gen = torch.Generator().manual_seed(1)
        x0 = torch.randn(37, w.shape[1], generator=gen)
        if "input_global_scale" in ref:  # inside the calibrated range, as a real forward's input would be
            x0 = x0 / x0.abs().max() * (448.0 * 6.0 / float(ref["input_global_scale"])) / 2
        x0 = x0.to(torch.bfloat16)
        captured = {"x": x0, "y": torch.nn.functional.linear(x0, w.to(torch.bfloat16))}
        run = lambda x: torch.nn.functional.linear(x, w.to(torch.bfloat16))  # noqa: E731
        result.update(model_reached_by="dry run (no vLLM)", vllm_module=None,
                      kernel={"quant_method": None, "scheme": None, "kernels": {"dry-run": "none"}})
    else:
        os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"  # the engine in this process: the model is reachable
        from vllm import LLM, SamplingParams

        kw = dict(model=str(a.variant), enforce_eager=True, max_model_len=4096, gpu_memory_utilization=a.gpu_util,
                  kv_cache_memory_bytes=a.kv_bytes, max_num_seqs=8, limit_mm_per_prompt={"image": 1, "video": 0},
                  enable_prefix_caching=False)
        if a.linear_backend:
            kw["linear_backend"] = a.linear_backend
        llm = LLM(**kw)
        model, how = get_model(llm)
        name, mod = find_layer(model, LAYER if a.layer is None else a.layer)

        def hook(m, args, out):
            if "x" not in captured:
                captured["x"] = args[0].detach().clone()
                captured["y"] = (out[0] if isinstance(out, tuple) else out).detach().clone()

        h = mod.register_forward_hook(hook)
        llm.chat(_page_messages(a.pages, DEFAULT_PROMPT), SamplingParams(max_tokens=4, temperature=0.0),
                 use_tqdm=False)
        h.remove()

        def run(x):
            with torch.inference_mode():
                out = mod(x)
            return out[0] if isinstance(out, tuple) else out

        result.update(model_reached_by=how, vllm_module=name, kernel=kernel_names(mod),
                      vllm_version=_version("vllm"), load_and_request_s=round(time.time() - t0, 1))
    rows = []
    x0 = captured.get("x")
    if x0 is not None:
        rows.append({"input": "page request (captured in the forward)", "tokens": int(x0.shape[0]),
                     **compare(captured["y"], x0, w, bias, meta["scheme"], params)})
        rms = x0.float().pow(2).mean().sqrt()
    else:
        result["capture_error"] = "the layer was not called during the request"
        rms = torch.tensor(1.0)
    gen = torch.Generator(device="cpu").manual_seed(0)
    for m in a.tokens:
        x = (torch.randn(m, w.shape[1], generator=gen) * rms.cpu()).to(torch.bfloat16).to(dev)
        try:
            rows.append({"input": "gaussian, the captured input's RMS", "tokens": m,
                         **compare(run(x), x, w, bias, meta["scheme"], params)})
        except Exception as e:  # noqa: BLE001 - a direct call outside a forward may be refused: say so
            rows.append({"input": "gaussian", "tokens": m, "error": f"{type(e).__name__}: {str(e)[:300]}",
                         "verdict": "error", "rel_err_vs_weight_only": None, "rel_err_vs_activation_fake_quant": None})
    ok = [r for r in rows if r["verdict"] != "error"]
    result.update(rows=rows, **summarize(ok), wall_s=round(time.time() - t0, 1))
    return result


def report(paths: list[Path]) -> dict:
    """Every measurement file, with a one-line table per (format, linear backend)."""
    entries = [e for e in (json.loads(p.read_text()) for p in paths if p.is_file()) if "linear_backend" in e]
    table = [{"format": e["format"], "linear_backend": e["linear_backend"],
              "kernel": ", ".join(e["kernel"]["kernels"].values()) or e["kernel"].get("scheme"),
              "computes": e.get("computes"), "max_rel_err_vs_weight_only": e.get("max_rel_err_vs_weight_only"),
              "max_rel_err_vs_activation_fake_quant": e.get("max_rel_err_vs_activation_fake_quant"),
              "dry_run": e.get("dry_run")} for e in entries]
    return {"what": "one quantized linear layer of the Qwen2.5-VL fixture in vLLM (in-process, eager) against "
                    "x @ W_deq.T and the activation-fake-quantized reference", "table": table, "measurements": entries}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("dequant")
    d.add_argument("--variant", type=Path, required=True)
    d.add_argument("--layer", default=LAYER)
    d.add_argument("-o", "--out", type=Path, required=True)
    m = sub.add_parser("measure")
    m.add_argument("--variant", type=Path, required=True)
    m.add_argument("--ref", type=Path, required=True, help="what `dequant -o` wrote (no suffix)")
    m.add_argument("--pages", type=Path, required=True)
    m.add_argument("--layer")
    m.add_argument("--linear-backend", help="vLLM --linear-backend (e.g. emulation for NVFP4 W4A4)")
    m.add_argument("--tokens", default="1,16,256", help="token counts of the Gaussian inputs")
    m.add_argument("--gpu-util", type=float, default=0.05)
    m.add_argument("--kv-bytes", type=int, default=512 * 2**20)
    m.add_argument("--dry-run", action="store_true")
    m.add_argument("-o", "--out", type=Path, required=True)
    r = sub.add_parser("report")
    r.add_argument("inputs", nargs="+", type=Path)
    r.add_argument("-o", "--out", type=Path, required=True)
    a = ap.parse_args(argv)
    if a.cmd == "dequant":
        print(json.dumps(dequant(a.variant, a.out, a.layer), indent=1)[:1500])
        return 0
    if a.cmd == "measure":
        a.tokens = [int(t) for t in a.tokens.split(",") if t]
        res = measure(a)
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_text(json.dumps(res, indent=1, default=str))
        print(f"{a.variant.name} ({res['linear_backend']}): {res.get('computes')}; kernel {res['kernel']}; "
              f"max rel err vs W-only {res.get('max_rel_err_vs_weight_only')}, vs act-fake-quant "
              f"{res.get('max_rel_err_vs_activation_fake_quant')}", flush=True)
        if not a.dry_run:  # the result is written: skip the in-process engine's teardown (it can hang at exit)
            sys.stderr.flush()
            os._exit(0)
        return 0
    out = report(a.inputs)
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(out, indent=1, default=str))
    for row in out["table"]:
        print(row)
    return 0


if __name__ == "__main__":
    sys.exit(main())
