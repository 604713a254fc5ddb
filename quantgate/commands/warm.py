"""``quantgate warm``: what a fresh machine would otherwise build inside its first vLLM start, built now."""

from __future__ import annotations

import argparse
import os

from quantgate.commands._args import print_json


def register(sub) -> None:
    w = sub.add_parser("warm", help="build once per machine what vLLM's first start would JIT-build (FlashInfer)",
                       description="Build FlashInfer's sampling module in vLLM's interpreter once for this machine "
                       "(a study does this in the background while it quantizes; run it ahead, e.g. in a machine "
                       "image), and show the machine cache every study shares: vLLM's compile cache and built "
                       "variants (~/.cache/quantgate, or $QUANTGATE_CACHE_DIR; 'none' turns it off).")
    w.add_argument("--vllm-cmd", default=None, help="command that runs vLLM's CLI (default: $QUANTGATE_VLLM)")
    w.add_argument("--json", action="store_true", help="print the result as JSON")
    w.set_defaults(func=cmd_warm)


def cmd_warm(a: argparse.Namespace) -> int:
    import shlex

    from quantgate.errors import UsageError
    from quantgate.io.cachedir import cache_dir, cache_root
    from quantgate.serve.backends.vllm import VLLM_ENV, default_compile_cache
    from quantgate.serve.warm import prebuild_flashinfer

    cmd = a.vllm_cmd or os.environ.get(VLLM_ENV)
    if not cmd:
        raise UsageError(f"warm needs vLLM's command: pass --vllm-cmd or set {VLLM_ENV}")
    p = prebuild_flashinfer(shlex.split(cmd), log=lambda line: None if a.json else print(line))
    info = {"cache": str(cache_root()) if cache_root() else None, "compile_cache": default_compile_cache(),
            "variants": str(cache_dir("variants")) if cache_dir("variants") else None, "flashinfer": p.model_dump()}
    if a.json:
        print_json(info)
    else:
        print(f"machine cache: {info['cache'] or 'off ($QUANTGATE_CACHE_DIR=none)'}")
        print(f"vLLM compile cache: {info['compile_cache'] or 'vLLM default'}")
        print(f"FlashInfer sampling module: {p.status}" + (f" in {p.seconds} s" if p.status == "built" else "")
              + (f" ({p.detail})" if p.detail and p.status != "built" else ""))
    return 1 if p.status == "failed" else 0
