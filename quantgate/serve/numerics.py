"""What a serving backend computes for each quantized format of a variant — weights only, or
weights and activations — stated from measurements, never assumed.

``variant_numerics`` reads the variant's ``quantization_config`` and returns one entry per format
(``schema.run.RunNumerics``, the ``numerics`` of ``run.json`` and of each variant in ``summary.json``)
with where the claim comes from: a test that measured it, a kernel vLLM's log named, or "not
measured". ``numerics_notes`` turns that into report notes. ``measure_transformers_serve`` is the
measurement itself (used by ``tests/integration/test_numerics.py`` and ``benchmarks/numerics_cpu.py``): it loads
a variant through ``transformers serve``'s own loader and compares each quantized module's output
with plain matmuls. Only it imports torch."""

from __future__ import annotations

import importlib.metadata as md
from pathlib import Path

from quantgate.errors import InputError
from quantgate.schema.load import load_json
from quantgate.schema.run import Computes, FormatNumerics, KernelCounts, RunNumerics
from quantgate.serve.kernels import kernel_names

MEASURED_BY = "tests/integration/test_numerics.py::test_transformers_serve_numerics_per_format"
MEASURED_E2E = "tests/integration/test_numerics.py::test_served_text_is_the_activation_quantized_forward"
# The versions the measurement ran with: another may load compressed-tensors differently (5.x
# deprecated run_compressed for dequantize), so a claim holds for these only.
MEASURED_WITH = {"transformers": "5.17.0", "compressed-tensors": "0.19.0"}

BF16 = "BF16 (the checkpoint dtype)"
# transformers serve (via compressed-tensors) on CPU, per quantgate format: what the matmul's
# activation operand is. Each row is asserted against a measurement by MEASURED_BY.
TRANSFORMERS_CPU: dict[str, tuple[Computes, str]] = {
    "fp8": ("weights+activations", "FP8 E4M3, per token, dynamic scale (W8A8)"),
    "fp8-static": ("weights+activations", "FP8 E4M3, per tensor, calibrated scale (W8A8)"),
    "nvfp4": ("weights+activations", "FP4 E2M1 in groups of 16, FP8 E4M3 group scales over the calibrated "
                                     "global scale (W4A4)"),
    "nvfp4a16": ("weights-only", BF16),
    "w4a16": ("weights-only", BF16),
    "w2a16": ("weights-only", BF16),
}
# vLLM kernels whose numerics are known, and for which format they were seen (H200, vLLM 0.26;
# lab/2026-11-30-h200-serving-options/findings.md, ../shared/gpu/README.md). Known from the kernel vLLM named, not from a GPU measurement
# of module outputs (that is still to do).
VLLM_KERNELS: dict[str, tuple[str, Computes, str]] = {
    "CutlassFP8ScaledMMLinearKernel": ("fp8", "weights+activations", "FP8 E4M3, per token, dynamic scale (W8A8)"),
    "MarlinNvFp4LinearKernel": ("nvfp4", "weights-only", "BF16 (Marlin, weight-only)"),
}


# --- which formats a variant holds -------------------------------------------------------------

def scheme_format(scheme: dict) -> str:
    """quantgate's name for a compressed-tensors scheme (a config group or a module's
    ``quantization_scheme.model_dump()``); other schemes get a descriptive name."""
    w = scheme.get("weights") or {}
    a = scheme.get("input_activations") or {}
    wt, wb, at, ab = w.get("type"), w.get("num_bits"), a.get("type"), a.get("num_bits")
    if wt == "float" and wb == 8 and at == "float" and ab == 8:
        if a.get("dynamic") is True and a.get("strategy") == "token" and w.get("strategy") == "channel":
            return "fp8"
        if a.get("dynamic") is False and a.get("strategy") == "tensor" and w.get("strategy") == "tensor":
            return "fp8-static"
    if wt == "float" and wb == 4 and w.get("group_size") == 16 and w.get("strategy") == "tensor_group":
        if not a:
            return "nvfp4a16"
        if at == "float" and ab == 4 and a.get("group_size") == 16 and a.get("strategy") == "tensor_group":
            return "nvfp4"
    if wt == "int" and wb in (4, 2) and not a and w.get("strategy") == "group" and w.get("group_size") == 128:
        return f"w{wb}a16"
    acts = f"{at}{ab} activations" if a else "16-bit activations"
    return f"other ({wt}{wb} weights, {acts})"


def variant_formats(variant: Path) -> tuple[dict | None, list[str]]:
    """The variant's ``quantization_config`` (None: not quantized, or no config.json) and its
    formats, one per config group, in order."""
    cfg_path = Path(variant) / "config.json"
    if not cfg_path.is_file():
        return None, []
    cfg = load_json(cfg_path, "model config")  # a variant's file: under the loader's limits, one error naming the line
    q = cfg.get("quantization_config") if isinstance(cfg, dict) else None
    if not q:
        return None, []
    if not isinstance(q, dict):
        raise InputError(f"{cfg_path}: field 'quantization_config' is not a mapping")
    if q.get("quant_method") != "compressed-tensors":
        return q, [f"other ({q.get('quant_method')})"]
    groups = q.get("config_groups") or {}
    if not isinstance(groups, dict) or not all(isinstance(g, dict) for g in groups.values()):
        raise InputError(f"{cfg_path}: field 'quantization_config.config_groups' must map names to schemes")
    out: list[str] = []
    for g in groups.values():
        f = scheme_format(g)
        if f not in out:
            out.append(f)
    return q, out


# --- what a backend runs ------------------------------------------------------------------------

def _installed(pkg: str) -> str | None:
    try:
        return md.version(pkg)
    except md.PackageNotFoundError:
        return None


def _transformers(fmt: str, device: str, versions: dict[str, str | None]) -> FormatNumerics:
    if fmt not in TRANSFORMERS_CPU:
        return FormatNumerics(format=fmt, detail="transformers serve's numerics for this scheme are not measured")
    if versions != MEASURED_WITH:
        have = ", ".join(f"{k} {v}" for k, v in versions.items())
        want = ", ".join(f"{k} {v}" for k, v in MEASURED_WITH.items())
        return FormatNumerics(format=fmt, detail=f"measured with {want}; this run has {have}: not measured")
    if device != "cpu":
        return FormatNumerics(format=fmt, detail=f"measured on CPU only ({MEASURED_BY}); on {device} compressed-tensors "
                                                 "quantizes activations with other (Triton) code: not measured")
    computes, acts = TRANSFORMERS_CPU[fmt]
    return FormatNumerics(format=fmt, computes=computes, activations=acts, evidence="measured", measured_by=MEASURED_BY)


def _vllm(fmt: str, kernels: KernelCounts | None) -> FormatNumerics:
    named = sorted(kernel_names(kernels or {}))
    for k in named:
        if k in VLLM_KERNELS and VLLM_KERNELS[k][0] == fmt:
            _, computes, acts = VLLM_KERNELS[k]
            return FormatNumerics(format=fmt, computes=computes, activations=acts, evidence="kernel reported by vLLM's log",
                                  kernel=k, detail="module outputs on the GPU: not measured")
    seen = f"vLLM's log names {', '.join(named)}" if named else "no kernel parsed from vLLM's log"
    return FormatNumerics(format=fmt, detail=f"{seen}; which computes this format, and how: not measured")


def variant_numerics(variant: Path, backend: str, *, device: str | None = None,
                     kernels: KernelCounts | None = None,
                     versions: dict[str, str | None] | None = None) -> RunNumerics:
    """Per quantized format of ``variant``: weights-only or weights+activations on ``backend``
    (``transformers`` with its ``device``; ``vllm`` with the ``kernels`` parsed from its log; any
    other backend: not measured). ``versions`` defaults to the installed transformers and
    compressed-tensors (``transformers serve`` runs in this interpreter's environment)."""
    q, formats = variant_formats(variant)
    rec = RunNumerics(backend=backend, device=device, quantized=bool(formats))
    if q and q.get("kv_cache_scheme"):
        rec.kv_cache = "the checkpoint quantizes the KV cache; its numerics on this backend: not measured"
    if backend == "transformers":
        versions = versions if versions is not None else {p: _installed(p) for p in MEASURED_WITH}
        rec.formats = {f: _transformers(f, device or "cpu", versions) for f in formats}
    elif backend == "vllm":
        rec.formats = {f: _vllm(f, kernels) for f in formats}
    else:
        rec.formats = {f: FormatNumerics(format=f, detail=f"backend {backend!r}: the server is not quantgate's to "
                                                          "inspect; not measured") for f in formats}
    return rec


def numerics_notes(rec: RunNumerics) -> list[str]:
    """Report notes, one per (backend, format), so variants sharing a format share the note."""
    notes: list[str] = []
    where = f"transformers serve ({rec.device or 'cpu'})" if rec.backend == "transformers" else rec.backend
    for f in rec.formats.values():
        if f.evidence == "not measured":
            notes.append(f"{where}: {f.format}: weights-only or weights+activations not measured ({f.detail})")
            continue
        src = f"measured by {f.measured_by}" if f.measured_by else f"kernel {f.kernel} named in vLLM's log; {f.detail}"
        text = f"{where}: {f.format} runs {f.computes}, activations {f.activations} ({src})"
        if rec.backend == "transformers" and f.format == "nvfp4" and f.computes == "weights+activations":
            text += ("; NVFP4 here is W4A4 — activations rounded the way Blackwell's FP4 GEMMs take them — so this "
                     "accuracy is the one to compare with a Blackwell deployment (bit-level agreement with "
                     "Blackwell's kernels: not measured), which vLLM on Hopper (Marlin, weight-only) cannot show")
        if rec.backend == "vllm" and f.format == "nvfp4" and f.computes == "weights-only":
            text += ("; this accuracy is not Blackwell's W4A4 accuracy — the transformers backend runs NVFP4 as "
                     "W4A4 (docs/recipes.md, Numerics per backend and format)")
        notes.append(text)
    if rec.backend == "transformers" and rec.formats and any(f.evidence == "measured" for f in rec.formats.values()):
        notes.append("transformers serve dequantizes compressed-tensors weights to BF16 on the first request and "
                     "runs BF16 matmuls (activations rounded in place where listed): no FP8/FP4 kernel runs, so "
                     f"its speed says nothing about quantized kernels ({MEASURED_BY}; {MEASURED_E2E})")
    if rec.kv_cache:
        notes.append(f"{where}: {rec.kv_cache}")
    return notes


# --- the measurement ----------------------------------------------------------------------------

def _fp4_round(v):
    """Nearest FP4 E2M1 value (0, 0.5, 1, 1.5, 2, 3, 4, 6), ties to the even mantissa. By hand: the
    reference must not be the code it checks."""
    import torch

    grid = torch.tensor([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0], dtype=torch.float32, device=v.device)
    a = v.abs().float().clamp(max=6.0)
    hi = torch.bucketize(a, grid).clamp(max=7)  # first grid value >= a
    lo = (hi - 1).clamp(min=0)
    d_lo, d_hi = a - grid[lo], grid[hi] - a
    pick = torch.where(d_lo < d_hi, lo, torch.where(d_hi < d_lo, hi, torch.where(lo % 2 == 0, lo, hi)))
    return (grid[pick] * v.sign().float()).to(v.dtype)


def reference_fake_quant(x, args: dict, module):
    """``x`` rounded as a compressed-tensors activation scheme says (``args``: its
    ``input_activations`` as a dict), written from the scheme's definition with plain torch:
    FP8 E4M3 per token (dynamic) or per tensor (the module's ``input_scale``); NVFP4 groups of 16
    with FP8 E4M3 group scales over the module's ``input_global_scale``. A zero scale is replaced
    by compressed-tensors' epsilon (0.125 for FP8 scales, else the dtype's), as it does."""
    import torch

    fp8 = torch.float8_e4m3fn
    fmax = torch.finfo(fp8).max
    if args["type"] == "float" and args["num_bits"] == 8:
        if args["dynamic"] is True and args["strategy"] == "token":
            s = x.abs().amax(dim=-1, keepdim=True) / fmax
            s = torch.where(s == 0, torch.finfo(s.dtype).eps, s)
        elif args["dynamic"] is False and args["strategy"] == "tensor":
            s = module.input_scale
        else:
            raise ValueError(f"no reference for FP8 activations {args}")
        return ((x / s).clamp(-fmax, fmax).to(fp8).to(s.dtype) * s).to(x.dtype)
    if args["type"] == "float" and args["num_bits"] == 4 and args["strategy"] == "tensor_group":
        gs = module.input_global_scale
        xg = x.unflatten(-1, (-1, args["group_size"]))
        local = xg.abs().amax(dim=-1, keepdim=True) / 6.0
        scale = (gs * local).clamp(-fmax, fmax).to(fp8).to((gs * local).dtype)
        scale = torch.where(scale == 0, torch.tensor(0.125, dtype=scale.dtype, device=scale.device), scale)
        eff = scale / gs
        q = _fp4_round((xg / eff).clamp(-6.0, 6.0))
        return (q.to(eff.dtype) * eff).flatten(-2).to(x.dtype)
    raise ValueError(f"no reference for activations {args}")


def _rel(a, b) -> float:
    b = b.float()
    return float((a.float() - b).norm() / b.norm().clamp_min(1e-30))


def measure_transformers_serve(variant: Path, *, device: str = "cpu", image=None,
                               text: str = "Convert this page to markdown. Output only the markdown.",
                               seed: int = 0) -> list[dict]:
    """Load ``variant`` exactly as ``transformers serve VARIANT --device DEVICE`` does (quantgate's
    TransformersBackend command): through serve's own ``ModelManager``, preloaded as the positional
    model. Run one forward on a chat request (``image``: a PIL image, or none), capturing the input
    each quantized linear module receives, then per module and per input (the captured one, and a
    seeded Gaussian of the same RMS) compare the module's own output with
    (a) ``x @ W.T`` — W is the weight the module holds after loading, i.e. the dequantized one — and
    (b) ``reference_fake_quant(x) @ W.T``. Relative errors are ``‖y − ref‖ / ‖ref‖``."""
    import gc

    import torch
    import torch.nn.functional as F
    from transformers.cli.serving.model_manager import ModelManager

    mm = ModelManager(device=device, dtype="auto", force_model=str(variant))
    timed = mm.loaded_models[mm.process_model_name(str(variant))]
    model, processor = timed.model, timed.processor
    try:
        mods = {n: m for n, m in model.named_modules() if getattr(m, "quantization_scheme", None) is not None}
        status_at_load = {n: m.quantization_status.value for n, m in mods.items()}
        captured: dict[str, torch.Tensor] = {}

        def grab(name):
            return lambda mod, args: captured.setdefault(name, args[0].detach().clone())

        hooks = [m.register_forward_pre_hook(grab(n)) for n, m in mods.items()]
        content = ([{"type": "image", "image": image}] if image is not None else []) + [{"type": "text", "text": text}]
        inputs = processor.apply_chat_template([{"role": "user", "content": content}], add_generation_prompt=True,
                                               tokenize=True, return_dict=True, return_tensors="pt").to(model.device)
        with torch.no_grad():
            model(**inputs)
        for h in hooks:
            h.remove()
        gen = torch.Generator(device="cpu").manual_seed(seed)
        rows = []
        for name, m in mods.items():
            if name not in captured:
                continue  # not reached by this input (e.g. vision modules on a text-only request)
            scheme = m.quantization_scheme.model_dump(mode="json")
            ia = scheme.get("input_activations")
            x0 = captured[name]
            rand = torch.randn(x0.shape, generator=gen).to(x0.device, x0.dtype) * x0.float().pow(2).mean().sqrt().to(x0.dtype)
            for kind, x in (("forward", x0), ("random", rand)):
                with torch.no_grad():
                    y = m(x)
                    y_w = F.linear(x, m.weight, m.bias)
                    y_a = F.linear(reference_fake_quant(x, ia, m), m.weight, m.bias) if ia else y_w
                rows.append({"module": name, "format": scheme_format(scheme), "input": kind,
                             "status_at_load": status_at_load[name], "status": m.quantization_status.value,
                             "weight_dtype": str(m.weight.dtype).removeprefix("torch."),
                             "input_dtype": str(x.dtype).removeprefix("torch."),
                             "activation_scheme": ia, "rel_err_vs_weight_only": _rel(y, y_w),
                             "rel_err_vs_activation_fake_quant": _rel(y, y_a), "equals_activation_fake_quant":
                             bool(torch.equal(y, y_a)), "equals_weight_only": bool(torch.equal(y, y_w))})
        return rows
    finally:
        timed.delete_model()
        mm.loaded_models.clear()
        del model, processor
        gc.collect()
