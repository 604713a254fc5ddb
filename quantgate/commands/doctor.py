from __future__ import annotations

import argparse
import os

from quantgate.commands._args import print_json

PACKAGES = ["quantgate", "torch", "torchvision", "transformers", "llmcompressor", "compressed-tensors", "lm_eval",
            "rapidfuzz", "pandas", "pypdfium2"]


def register(sub) -> None:
    d = sub.add_parser("doctor", help="versions, GPU, and whether a vLLM server command is configured",
                       description="Print the versions quantgate runs with, whether a GPU is visible, and whether "
                       "the vLLM command (--vllm-cmd or $QUANTGATE_VLLM, e.g. '/opt/vllm/bin/vllm' or "
                       "'python3 -m vllm.entrypoints.cli.main') answers --version.")
    d.add_argument("--vllm-cmd", default=None, help="command that runs vLLM's CLI (default: $QUANTGATE_VLLM)")
    d.add_argument("--json", action="store_true", help="print the findings as JSON")
    d.set_defaults(func=cmd_doctor)


def cmd_doctor(a: argparse.Namespace) -> int:
    from quantgate.io.provenance import git_commit, package_versions
    from quantgate.serve.backends.vllm import VLLM_ENV, probe_version

    info: dict = {"packages": package_versions(PACKAGES), "git_commit": git_commit()}
    try:
        import torch

        info["gpu"] = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
    except ImportError:
        info["gpu"] = None
    ver, why = probe_version(a.vllm_cmd or os.environ.get(VLLM_ENV))
    info["vllm"] = {"version": ver, "status": why}
    if a.json:
        print_json(info)
        return 0
    for k, v in info["packages"].items():
        print(f"{k:>20}: {v or 'not installed'}")
    print(f"{'git commit':>20}: {info['git_commit'] or '- (not a git checkout)'}")
    print(f"{'gpu':>20}: {info['gpu'] or 'none visible (CPU only)'}")
    print(f"{'vllm':>20}: {ver or '-'} ({why})")
    return 0
