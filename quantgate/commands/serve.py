from __future__ import annotations

import argparse
import sys
from pathlib import Path

from quantgate.commands._args import (
    concurrency_list,
    existing_path,
    float_range,
)
from quantgate.commands._fields import yaml_flag
from quantgate.serve.backends.derive import add_backend_flags, backend_from_args


def register(sub) -> None:
    s = sub.add_parser("serve", help="serve a variant and send every page at each concurrency level",
                       description="Start a server for VARIANT (transformers serve, vllm serve, a command you give; "
                       "or use an existing endpoint), send every page of the split as a streamed chat request at each "
                       "concurrency level, append one record per request to RUN/requests.jsonl, and write speed "
                       "figures to RUN/run.json. Rerunning the same command resumes where it stopped.",
                       epilog="vLLM lives in its own environment: --vllm-cmd '/opt/vllm/bin/vllm' or "
                       "QUANTGATE_VLLM='python3 -m vllm.entrypoints.cli.main'.")
    s.add_argument("variant", type=Path, help="model folder (for --backend openai: the served model name)")
    s.add_argument("--pages", required=True, type=existing_path, help="page-set folder whose pages are sent")
    s.add_argument("-o", "--output", required=True, type=Path, help="run folder")
    s.add_argument("--split", default="heldout", help="calibration, heldout or all (default heldout)")
    s.add_argument("--concurrency", type=concurrency_list, default=[1], help="levels, e.g. 1,8,32 (default 1)")
    from quantgate.schema.study import Study

    yaml_flag(s, Study, "max_tokens")
    s.add_argument("--prompt", default=None, help="instruction sent with each page image")
    yaml_flag(s, Study, "slo_s", "--slo")
    yaml_flag(s, Study, "timeout_s", "--timeout")
    yaml_flag(s, Study, "limit")
    s.add_argument("--waves", type=float_range(0, 1e6, lo_open=True), help="speed sweeps: send only ceil(WAVES x concurrency) pages per level "
                   "(at least 3) instead of every page at every level; 0 < WAVES <= 1e6")
    s.add_argument("--ignore-eos", action="store_true", help="ask the server to generate exactly --max-tokens "
                   "(vLLM's ignore_eos): fixed output length for speed runs on random weights")
    s.add_argument("--overwrite", action="store_true", help="discard a different run in the output folder")
    add_backend_flags(s)
    s.set_defaults(func=cmd_serve)


def cmd_serve(a: argparse.Namespace) -> int:
    from tqdm import tqdm

    from quantgate.errors import ServerError
    from quantgate.serve import ServeHooks, ServeOptions, serve_variant
    from quantgate.serve.run import failed_levels

    backend = backend_from_args(a, variant=str(a.variant))
    bars = []

    def on_level(c, n):
        bar = tqdm(total=n, desc=f"concurrency {c}", unit="page", file=sys.stderr, disable=None)
        bars.append(bar)
        return lambda rec: bar.update(1)

    try:
        options = ServeOptions(split=a.split, concurrency=a.concurrency, max_tokens=a.max_tokens, prompt=a.prompt,
                               slo_s=a.slo_s, timeout_s=a.timeout_s, limit=a.limit, overwrite=a.overwrite,
                               ignore_eos=a.ignore_eos, waves=a.waves)
        m = serve_variant(a.variant, a.pages, backend, a.output, options,
                          ServeHooks(on_level=on_level, log=lambda s: print(s, file=sys.stderr)))
    finally:
        for b in bars:
            b.close()
    print(format_levels(m))
    for n in m.notes:
        print(f"note: {n}")
    print(f"-> {a.output}/requests.jsonl, {a.output}/run.json")
    if failed := failed_levels(a.output, m):
        raise ServerError(failed)
    return 0


def format_levels(m) -> str:
    def f(x, spec=".2f"):
        return "-" if x is None else format(x, spec)

    lines = [f"{'conc':>5} {'pages':>6} {'err':>4} {'pages/s':>8} {'out tok/s':>10} {'tok/s/req':>10} "
             f"{'TTFT p50':>9} {'lat p50':>8} {'lat p90':>8} {'lat p99':>8}"]
    for lv in m.levels:
        lines.append(f"{lv.concurrency:>5} {lv.n_requests:>6} {lv.n_errors:>4} {lv.pages_per_s:>8.3f} "
                     f"{lv.output_tokens_per_s:>10.1f} {f(lv.per_request_tokens_per_s_p50, '.1f'):>10} "
                     f"{f(lv.ttft_s['p50']):>9} {f(lv.latency_s['p50']):>8} {f(lv.latency_s['p90']):>8} "
                     f"{f(lv.latency_s['p99']):>8}")
    within = m.max_concurrency_within_slo
    lines.append(f"highest concurrency with p90 latency <= {m.slo_p90_latency_s:g} s: {within if within else 'none'}")
    return "\n".join(lines)
