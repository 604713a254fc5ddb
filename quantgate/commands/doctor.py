from __future__ import annotations

import argparse
import importlib.metadata as md
import os
import shlex
import subprocess

from quantgate.cli import print_json

PACKAGES = ["torch", "torchvision", "transformers", "llmcompressor", "compressed-tensors", "lm_eval",
            "rapidfuzz", "pandas", "pypdfium2"]


def register(sub) -> None:
    d = sub.add_parser("doctor", help="versions, GPU, and whether a vLLM server command is configured",
                       description="Print the versions quantgate runs with, whether a GPU is visible, and whether "
                       "the vLLM command (--vllm-cmd or $QUANTGATE_VLLM, e.g. '/opt/vllm/bin/vllm' or "
                       "'python3 -m vllm.entrypoints.cli.main') answers --version.")
    d.add_argument("--vllm-cmd", default=None, help="command that runs vLLM's CLI (default: $QUANTGATE_VLLM)")
    d.add_argument("--json", action="store_true")
    d.set_defaults(func=cmd_doctor)


def package_versions() -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for name in PACKAGES:
        try:
            out[name] = md.version(name)
        except md.PackageNotFoundError:
            out[name] = None
    return out


def vllm_version(cmd: str | None) -> tuple[str | None, str]:
    if not cmd:
        return None, "not configured (set $QUANTGATE_VLLM or pass --vllm-cmd)"
    try:
        r = subprocess.run([*shlex.split(cmd), "--version"], capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as e:
        return None, f"{cmd!r} did not run: {e}"
    if r.returncode != 0:
        return None, f"{cmd!r} --version exited {r.returncode}: {(r.stderr or r.stdout).strip()[-200:]}"
    return r.stdout.strip().splitlines()[-1] if r.stdout.strip() else "?", "ok"


def cmd_doctor(a: argparse.Namespace) -> int:
    info: dict = {"packages": package_versions()}
    try:
        import torch

        info["gpu"] = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
    except ImportError:
        info["gpu"] = None
    ver, why = vllm_version(a.vllm_cmd or os.environ.get("QUANTGATE_VLLM"))
    info["vllm"] = {"version": ver, "status": why}
    if a.json:
        print_json(info)
        return 0
    for k, v in info["packages"].items():
        print(f"{k:>20}: {v or 'not installed'}")
    print(f"{'gpu':>20}: {info['gpu'] or 'none visible (CPU only)'}")
    print(f"{'vllm':>20}: {ver or '-'} ({why})")
    return 0
