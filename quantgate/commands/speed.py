"""``quantgate speed-profile``: decode profiles of variants under ``vllm serve`` and the cost table built from
them (docs/gpu.md), which ``recommend`` / ``tune --speed-table`` read for ``--speedup``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from quantgate.commands._args import concurrency_list, existing_path, int_range, positive_float

EPILOG = """\
files (under OUT):
  NAME/server.log           each variant's vLLM log (its kernel lines included)
  NAME/trace/               vLLM's torch-profiler traces
  NAME/c<C>.profile.json    one pure-decode step per level (a StepProfile); a level already written is kept
  cost-table.json           GPU ms per decode step per format x GEMM x concurrency, from every NAME/c*.profile.json
  copy-bandwidth.json       --copy-gbs, as given (the weight-read bound of each step divides by it)

OUT = STUDY/speed (a study's folder): the study's report.md / report.html are written again with a "Decode step"
section beside its speed table: GPU ms and kernels per step, the weight-read bound's share, what bounds it.

example:
  quantgate speed-profile out/variants/bf16 out/variants/fp8-all --pages pages --concurrency 1,32 \\
      --vllm-cmd vllm --server-arg=--max-num-seqs=64 -o cost
  quantgate speed-profile study/variants/bf16 study/variants/fp8-all --pages pages --copy-gbs 4299.5 \
      --copy-source "speed_sweep.copy_bandwidth_gbs, same GPU" --vllm-cmd vllm -o study/speed
  quantgate recommend sens.json --speedup 1.2 --speed-table cost/cost-table.json
"""


def register(sub) -> None:
    p = sub.add_parser("speed-profile", help="profile each variant's decode step under vLLM; write a cost table",
                       description="Serve each variant with vLLM's torch profiler, record pure-decode steps at each "
                       "concurrency, and build the measured cost table (GPU ms per decode step per format, layer-"
                       "group GEMM and concurrency) from every profile under OUT.",
                       epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("variants", nargs="+", type=existing_path, metavar="VARIANT",
                   help="variant folders written by `quantgate quantize` (BF16 too: recipe bf16)")
    p.add_argument("--pages", required=True, type=existing_path, help="a page set (held-out pages are sent)")
    p.add_argument("--concurrency", type=concurrency_list, default=[1], help="levels to profile (default 1)")
    p.add_argument("-o", "--out", required=True, type=Path, help="the folder for profiles and cost-table.json")
    p.add_argument("--vllm-cmd", help="the vllm command (default $QUANTGATE_VLLM)")
    p.add_argument("--server-arg", action="append", default=[], metavar="ARG",
                   help="an extra vllm serve flag, repeatable (e.g. --server-arg=--max-num-seqs=64)")
    p.add_argument("--compile-cache", help="vLLM's compile cache folder (a study's: the start is warm)")
    p.add_argument("--steps", type=int_range(1), default=32, help="decode steps recorded (default 32)")
    p.add_argument("--delay", type=int_range(0), default=16, help="decode steps skipped first (default 16)")
    p.add_argument("--max-tokens", type=int_range(1), default=512, help="tokens per request (default 512)")
    p.add_argument("--startup-timeout", type=positive_float, default=1200.0, metavar="S",
                   help="seconds a server may take to start (default 1200)")
    p.add_argument("--copy-gbs", type=positive_float, metavar="GB/S",
                   help="the GPU's measured copy bandwidth, for each step's weight-read bound (OUT/copy-bandwidth.json)")
    p.add_argument("--copy-source", default="given to speed-profile --copy-gbs",
                   help="how --copy-gbs was measured (recorded beside it)")
    p.set_defaults(func=run)


def run(args) -> int:
    from quantgate.errors import InputError, UsageError
    from quantgate.io.fileio import atomic_write_json
    from quantgate.reports.build import write_reports
    from quantgate.schema.speed import CopyBandwidth, load_step_profile
    from quantgate.schema.summary import SUMMARY, load_summary
    from quantgate.speed.costtable import build_cost_table
    from quantgate.speed.profile import check_args, speed_profile
    from quantgate.speed.report import COPY_BANDWIDTH, SPEED_DIR

    names = []
    for v in args.variants:  # every variant's flags checked before the first server starts
        names.append(check_args(v, args.concurrency, steps=args.steps, delay=args.delay, max_tokens=args.max_tokens,
                                server_args=args.server_arg).name)
    if len(set(names)) != len(names):
        raise UsageError(f"variants {names}: two have one name; each gets its own folder under {args.out}")
    if args.copy_gbs is not None:  # after the checks (bad input writes nothing), before any server: a cut run keeps it
        args.out.mkdir(parents=True, exist_ok=True)
        atomic_write_json(args.out / COPY_BANDWIDTH, CopyBandwidth(gbs=args.copy_gbs, source=args.copy_source)
                          .model_dump(mode="json"))
    for v, name in zip(args.variants, names, strict=True):
        speed_profile(v, args.concurrency, args.out / name, args.vllm_cmd, pages=args.pages, steps=args.steps,
                      delay=args.delay, max_tokens=args.max_tokens, server_args=args.server_arg,
                      compile_cache=args.compile_cache, startup_timeout_s=args.startup_timeout, log=print)
    profiles = [load_step_profile(f) for f in sorted(args.out.glob("*/c*.profile.json"))]
    try:
        table = build_cost_table(profiles)
    except InputError as e:  # the profiles stay: they are the measurement, the table a reading of them
        print(f"quantgate speed-profile: profiles kept under {args.out}; no cost table: {e}", file=sys.stderr)
        return e.exit_code  # not 1: that code is a regression's
    atomic_write_json(args.out / "cost-table.json", table.model_dump(mode="json"))
    print(f"cost table: {args.out / 'cost-table.json'} ({len(profiles)} profiles)")
    study = args.out.resolve().parent
    if args.out.name == SPEED_DIR and (study / SUMMARY).is_file():  # OUT is a study's speed/: its report shows them
        write_reports(load_summary(study), study)
        print(f"report: {study / 'report.md'} (decode step section)")
    return 0
