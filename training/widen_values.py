"""Widen a Qwen3.5 checkpoint's Gated DeltaNet value heads to the key head dim, exactly.

vLLM 0.26's fused GDN prefill kernel handles Q/K heads and V heads in one Triton program and
needs ``linear_value_head_dim == linear_key_head_dim`` (real Qwen3.5 checkpoints have both 128).
The first shipped reader had keys 32 wide and values 16 wide, so vLLM refused it at start-up.

Retraining costs ~11 GPU-minutes; this rewrite costs nothing and changes no output: each value
head's channels are repeated ``r = key_dim // value_dim`` times. Why that is exact:
- the delta-rule state has one column per value channel and the columns never mix, so a repeated
  value channel yields a repeated output channel;
- the gated RMSNorm is taken over one head's value channels: the mean square of ``r`` copies is the
  mean square of one (its weight is repeated too);
- the output gate ``z`` is repeated like the values, and ``out_proj`` splits each input column into
  ``r`` columns of weight ``w / r`` (exact in binary floating point for r a power of two).

Usage: ``python training/widen_values.py SRC DST`` (DST must not exist).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file


def _repeat_heads(t: torch.Tensor, heads: int, dim: int, r: int, axis: int = 0) -> torch.Tensor:
    """Repeat each head's ``dim`` channels ``r`` times along ``axis`` (heads × dim laid out flat)."""
    t = t.movedim(axis, 0)
    shape = t.shape
    t = t.reshape(heads, dim, *shape[1:])
    t = torch.cat([t] * r, dim=1).reshape(heads * dim * r, *shape[1:])
    return t.movedim(0, axis)


def widen(src: Path, dst: Path) -> dict:
    cfg = json.loads((src / "config.json").read_text())
    tc = cfg["text_config"]
    kd, vd = tc["linear_key_head_dim"], tc["linear_value_head_dim"]
    nk, nv = tc["linear_num_key_heads"], tc["linear_num_value_heads"]
    if vd == kd:
        raise SystemExit(f"{src}: value head dim already equals key head dim ({kd}); nothing to do")
    if kd % vd or (kd // vd) & (kd // vd - 1):
        raise SystemExit(f"{src}: key head dim {kd} is not a power-of-two multiple of value head dim {vd}")
    r = kd // vd
    weights = load_file(str(src / "model.safetensors"))
    out = {}
    for name, t in weights.items():
        if ".linear_attn." not in name:
            out[name] = t
            continue
        leaf = name.rsplit(".linear_attn.", 1)[1]
        if leaf in ("in_proj_qkv.weight", "conv1d.weight", "conv1d.bias"):
            q, k, v = torch.split(t, [nk * kd, nk * kd, nv * vd], dim=0)
            out[name] = torch.cat([q, k, _repeat_heads(v, nv, vd, r)], dim=0)
        elif leaf == "in_proj_z.weight":
            out[name] = _repeat_heads(t, nv, vd, r)
        elif leaf == "norm.weight":
            out[name] = torch.cat([t] * r)
        elif leaf == "out_proj.weight":
            out[name] = _repeat_heads(t, nv, vd, r, axis=1) / r
        elif leaf in ("in_proj_a.weight", "in_proj_b.weight", "A_log", "dt_bias"):
            out[name] = t
        else:
            raise SystemExit(f"{name}: unknown Gated DeltaNet weight; extend widen_values.py")
        out[name] = out[name].contiguous()
    tc["linear_value_head_dim"] = kd
    dst.mkdir(parents=True, exist_ok=False)
    for f in src.iterdir():
        if f.name not in ("model.safetensors", "config.json"):
            shutil.copy2(f, dst / f.name)
    (dst / "config.json").write_text(json.dumps(cfg, indent=2) + "\n")
    save_file(out, str(dst / "model.safetensors"), metadata={"format": "pt"})
    return {"value_head_dim": [vd, kd], "repeat": r}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("src", type=Path)
    ap.add_argument("dst", type=Path)
    a = ap.parse_args(argv)
    print(widen(a.src, a.dst))
    return 0


if __name__ == "__main__":
    sys.exit(main())
