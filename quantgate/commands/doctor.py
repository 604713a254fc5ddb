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
    info["formula_cdm"] = _cdm_toolchain()
    if a.json:
        print_json(info)
        return 0
    for k, v in info["packages"].items():
        print(f"{k:>20}: {v or 'not installed'}")
    print(f"{'git commit':>20}: {info['git_commit'] or '- (not a git checkout)'}")
    print(f"{'gpu':>20}: {info['gpu'] or 'none visible (CPU only)'}")
    print(f"{'vllm':>20}: {ver or '-'} ({why})")
    print(f"{'formula CDM':>20}: {info['formula_cdm']['status']}")
    return 0


def _cdm_toolchain() -> dict:
    """Whether OmniDocBench v1.5's formula CDM can run here (its LaTeX toolchain), and what installs it if not."""
    from quantgate.scoring.omnidoc.cdm_render import MAKE_TARGET, missing_packages

    missing = missing_packages()
    status = "ready (XeLaTeX, Ghostscript, CJK font)" if not missing else \
        f"missing Debian packages {' '.join(missing)} (install: {MAKE_TARGET})"
    return {"ready": not missing, "missing": missing, "status": status}
