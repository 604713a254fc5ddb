"""Post-save verification: the checkpoint must say, tensor by tensor, what the plan said.

Reads only the saved ``quantization_config`` and the safetensors *headers* (no weights loaded):
every module planned BF16 — the whole vision encoder in particular — has a plain BF16 weight and
no scales; every module planned quantized has the tensors of its format. Regexes that silently
match nothing or too much are a known failure of VLM quantization; this catches both."""

from __future__ import annotations

import struct
from pathlib import Path

from quantgate.errors import InputError, VerificationError
from quantgate.schema.load import load_json
from quantgate.schema.variant import Verification


def read_safetensors_header(path: Path) -> dict[str, dict]:
    with open(path, "rb") as fh:
        raw = fh.read(8)
        if len(raw) != 8:
            raise InputError(f"{path}: not a safetensors file (too short)")
        (n,) = struct.unpack("<Q", raw)
        if n > 100_000_000:
            raise InputError(f"{path}: safetensors header claims {n} bytes; file is corrupt")
        from quantgate.errors import DataError
        from quantgate.schema.load import parse_json

        try:  # under the loader's limits: a header nested 200,000 deep is an error, not a RecursionError
            header = parse_json(fh.read(n), str(path))
        except DataError as e:
            raise InputError(f"{path}: safetensors header is not valid JSON; file is corrupt ({e})") from None
    header.pop("__metadata__", None)
    return header


def checkpoint_tensors(model_dir: Path) -> dict[str, dict]:
    tensors: dict[str, dict] = {}
    for f in sorted(Path(model_dir).glob("*.safetensors")):
        tensors.update(read_safetensors_header(f))
    return tensors


def format_of(tensors: dict[str, dict], prefix: str) -> str | None:
    """The format a module's saved tensors show, or None if the module is not in the checkpoint."""
    w = tensors.get(f"{prefix}.weight")
    packed = tensors.get(f"{prefix}.weight_packed")
    if packed is not None:
        if f"{prefix}.weight_global_scale" in tensors:
            return "nvfp4" if f"{prefix}.input_global_scale" in tensors else "nvfp4a16"
        # pack-quantized INT: int32 words of 32/bits values; one scale per group of 128 inputs
        scale = tensors.get(f"{prefix}.weight_scale")
        if packed["dtype"] == "I32" and scale is not None and len(scale["shape"]) == 2:
            bits = round(32 * packed["shape"][1] / (scale["shape"][1] * 128))
            return {4: "w4a16", 2: "w2a16"}.get(bits, f"int{bits}")
        return "other-quantized"
    if w is None:
        return None
    if w["dtype"].startswith("F8"):
        return "fp8-static" if f"{prefix}.input_scale" in tensors else "fp8"
    if f"{prefix}.weight_scale" in tensors:
        return "other-quantized"
    return "bf16" if w["dtype"] in ("BF16", "F16", "F32") else f"unknown-{w['dtype']}"


def _module_prefixes(tensors: dict[str, dict]) -> set[str]:
    out = set()
    for k in tensors:
        for suf in (".weight_packed", ".weight"):
            if k.endswith(suf):
                out.add(k[: -len(suf)])
    return out


def map_to_checkpoint(module_names: list[str], prefixes: set[str]) -> dict[str, str]:
    """Module name (in memory) → tensor prefix (on disk). transformers may rename prefixes when
    saving (``model.language_model.`` ↔ ``language_model.model.``), never the trailing part, so
    match on the longest common suffix, then on the overlap of the remaining components."""
    by_last: dict[str, list[str]] = {}
    for p in prefixes:
        by_last.setdefault(p.rsplit(".", 1)[-1], []).append(p)
    out: dict[str, str] = {}
    for name in module_names:
        if name in prefixes:
            out[name] = name
            continue
        parts = name.split(".")
        best, best_key = None, (-1, -1.0)
        for cand in by_last.get(parts[-1], []):
            cp = cand.split(".")
            j = 0
            while j < min(len(parts), len(cp)) and parts[-1 - j] == cp[-1 - j]:
                j += 1
            rest_a, rest_b = set(parts[: len(parts) - j]), set(cp[: len(cp) - j])
            overlap = len(rest_a & rest_b) / max(1, len(rest_a | rest_b))
            if (j, overlap) > best_key:
                best, best_key = cand, (j, overlap)
        if best is not None:
            out[name] = best
    return out


def verify_checkpoint(model_dir: Path, plan: dict[str, str], kinds: dict[str, str]) -> Verification:
    """Raise VerificationError listing every module whose saved format differs from the plan."""
    model_dir = Path(model_dir)
    cfg = load_json(model_dir / "config.json", "model config")  # under the loader's limits
    qcfg = cfg.get("quantization_config")
    quantized_planned = any(f != "bf16" for f in plan.values())
    if quantized_planned and not qcfg:
        raise VerificationError(f"{model_dir / 'config.json'}: no quantization_config, but the plan quantizes modules")
    if qcfg and qcfg.get("quant_method") != "compressed-tensors":
        raise VerificationError(f"{model_dir / 'config.json'}: quant_method is {qcfg.get('quant_method')!r}, "
                                "expected compressed-tensors")
    tensors = checkpoint_tensors(model_dir)
    mapping = map_to_checkpoint(list(plan), _module_prefixes(tensors))
    problems, seen = [], {}
    tied = cfg.get("tie_word_embeddings") or (cfg.get("text_config") or {}).get("tie_word_embeddings")
    for name, want in plan.items():
        key = mapping.get(name)
        got = format_of(tensors, key) if key else None
        if got is None and want == "bf16" and tied and name.rsplit(".", 1)[-1] == "lm_head":
            got = "bf16"  # tied to the embedding table, which is saved (and kept BF16) instead
        seen[name] = got
        if got != want:
            problems.append(f"{name} ({kinds.get(name, '?')}): planned {want}, checkpoint has {got or 'no tensors'}")
    if problems:
        raise VerificationError(f"{model_dir}: {len(problems)} module(s) differ from the plan: " + "; ".join(problems[:12])
                                + (" …" if len(problems) > 12 else ""))
    counts: dict[str, int] = {}
    for f in seen.values():
        counts[str(f)] = counts.get(str(f), 0) + 1
    return Verification(modules_checked=len(plan), formats=counts, vision_bf16=all(
        seen[n] == "bf16" for n, k in kinds.items() if k in ("vision", "projector") and n in seen))
