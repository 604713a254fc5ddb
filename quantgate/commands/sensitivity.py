"""``quantgate sensitivity`` and ``quantgate recommend``."""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from pathlib import Path

from quantgate.commands._args import (
    TRUST_REMOTE_CODE_HELP,
    budget_flags,
    existing_path,
    float_range,
    int_range,
    positive_float,
    positive_int,
    print_json,
)
from quantgate.commands._fields import yaml_flag

SENS_EPILOG = """\
how it works:
  The BF16 model answers each calibration page once (greedy; the page's truth is used as a draft
  and checked in batched forwards). Then, for each format, llmcompressor's QuantizationModifier
  applies the scheme in memory (calibrating activation scales on the same pages as `quantize`
  would) and compressed-tensors fake-quantizes one group at a time — a layer's attention,
  linear-attention or MLP projections — while the rest stays BF16. The damage of a group × format
  is KL(BF16 || quantized) of the next-token distributions on the BF16 answers, in nats per token.

files:
  -o FILE              the sensitivity table (JSON, for `quantgate recommend`)
  FILE.records.jsonl   one line per finished group × format; rerun the same command to resume,
                       or with more --formats to add them

example:
  quantgate sensitivity ./model --calibration pages --formats fp8,nvfp4,w4a16,w2a16 -o sens.json
  quantgate recommend sens.json --budget 4.1MB -o recipe.yaml
"""

REC_EPILOG = """\
budgets (give one):
  --budget SIZE        weights in bytes (safetensors payload): an integer or a number with a
                       decimal unit — B, kB, MB, GB, TB (1 MB = 1,000,000 bytes), e.g. 4.1MB, 3GB
  --effective-bits B   average bits per quantizable weight, scales included (BF16 = 16)
  --speedup S          decode speed-up over BF16: weights read per decoded token at the
                       sensitivity file's bandwidth (a model of a memory-bound decode, not a measurement),
                       or, with --speed-table FILE, GPU time per decode step predicted from a measured
                       cost table (quantgate speed-profile; docs/gpu.md)

The output is an ordinary recipe: `quantgate plan MODEL --recipe recipe.yaml`, `quantgate quantize`
and studies take it unchanged. Its damage is predicted by adding the groups' KL; a study on
held-out pages is what says whether the variant is as good as BF16.
"""


def register(sub) -> None:
    s = sub.add_parser("sensitivity", help="damage and size of each layer group in each format, on your pages",
                       description="Measure, for every layer group (a decoder layer's attention, linear-attention or "
                       "MLP projections; vision stays BF16 unless --allow-vision) and every format, the damage of "
                       "quantizing that group alone — KL divergence of next-token distributions against BF16, "
                       "teacher-forced on the calibration pages — and its size in bytes and modelled decode time.",
                       epilog=SENS_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    s.add_argument("model", type=existing_path, help="the BF16 checkpoint folder (safetensors)")
    s.add_argument("--calibration", required=True, type=existing_path,
                   help="page set; its calibration split is measured on (pages with truth text are fastest)")
    s.add_argument("--formats", default="fp8,nvfp4,w4a16,w2a16",
                   help="comma-separated: fp8, fp8-static, nvfp4, nvfp4a16, w4a16, w2a16 (default fp8,nvfp4,w4a16,w2a16)")
    s.add_argument("-o", "--output", required=True, type=Path, help="sensitivity JSON to write")
    from quantgate.schema.study import Study

    yaml_flag(s, Study, "calibration_samples", "--samples", default=16,
              default_says="16, fewer than a quantization's: each page is read once per format")
    s.add_argument("--max-new-tokens", type=positive_int, default=256, help="longest BF16 answer scored per page (default 256)")
    s.add_argument("--max-seq-len", type=int_range(64), default=4096, help="longest calibration sample in tokens, "
                   ">= 64 (default 4096)")
    s.add_argument("--prompt", help="the study's prompt (default: quantgate's markdown prompt)")
    s.add_argument("--allow-vision", action="store_true", help="also measure vision blocks and the projector")
    s.add_argument("--keep-bf16", action="append", metavar="REGEX",
                   help="modules never quantized (repeatable; default: Gated DeltaNet in_proj_a/b, as in the mixed "
                   "preset); pass --keep-bf16 '' to keep none")
    s.add_argument("--bandwidth", type=positive_float, metavar="GB/s",
                   help="memory bandwidth for the modelled decode time (default 4800, the H200 spec sheet)")
    s.add_argument("--batch-pages", type=positive_int, default=16, help="pages per forward (default 16)")
    s.add_argument("--device", default="auto", help="auto (cuda when available), cpu, cuda, cuda:1 ...")
    s.add_argument("-v", "--verbose", action="store_true",
                   help="show third-party output (progress bars, warnings) instead of keeping it in OUTPUT.log")
    s.add_argument("--overwrite", action="store_true", help="discard an earlier run's records with other inputs")
    s.add_argument("--trust-remote-code", action="store_true", help=TRUST_REMOTE_CODE_HELP)
    s.set_defaults(func=cmd_sensitivity)

    r = sub.add_parser("recommend", help="per-group formats that hurt least under a size/bits/speed budget → recipe",
                       description="Choose one format per group (BF16 allowed) minimising the summed damage from a "
                       "sensitivity file under a budget, exactly (a 0/1 program solved by scipy's milp), and write it "
                       "as a quantgate recipe with each group's damage and the reason for its format as comments.",
                       epilog=REC_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    r.add_argument("old_sensitivity", nargs="?", type=existing_path, metavar="SENSITIVITY",
                   help="deprecated: give it as --sensitivity (as `tune` does)")
    r.add_argument("--sensitivity", type=existing_path, metavar="FILE",
                   help="the sensitivity JSON (`quantgate sensitivity -o`)")
    budget_flags(r, bits=float_range(0, 16, lo_open=True), speedup=float_range(1, lo_open=True))
    r.add_argument("--prefill-table", type=existing_path, metavar="FILE",
                   help="with --speed-table: a prefill table (quantgate.speed.served, from speed waves' first-token "
                   "phase): --speedup and the recipe's speed-up are then the served speed-up, prefill included")
    r.add_argument("-o", "--output", required=True, type=Path, help="recipe YAML to write")
    r.add_argument("--model", type=existing_path, help="refuse if the sensitivity file was measured on other weights")
    r.add_argument("--formats", help="only these measured formats (comma-separated), e.g. to leave out w2a16")
    r.add_argument("--target", default="hopper", choices=["hopper", "blackwell", "ampere", "none"],
                   help="GPU family whose vLLM kernels to warn about (default hopper)")
    r.add_argument("--name", help="recipe name (default: the output file's stem)")
    r.add_argument("--json", action="store_true", help="print the choice as JSON instead of a table")
    r.set_defaults(func=cmd_recommend)


def cmd_sensitivity(a) -> int:
    from quantgate.sensitivity.analyze import SensitivityOptions, analyze, parse_formats, thin_calibration
    from quantgate.sensitivity.report import format_table

    keep = None if a.keep_bf16 is None else [k for k in a.keep_bf16 if k]
    options = SensitivityOptions(formats=parse_formats(a.formats), samples=a.calibration_samples, max_new_tokens=a.max_new_tokens,
                                 max_seq_len=a.max_seq_len, prompt=a.prompt, allow_vision=a.allow_vision,
                                 keep_bf16=keep, bandwidth_gbps=a.bandwidth, batch_pages=a.batch_pages, device=a.device,
                                 overwrite=a.overwrite, trust_remote_code=a.trust_remote_code)
    from quantgate.io.console import captured_output

    # libraries' bars and warnings go to a log, as study's do: a temporary one until the run succeeds (a refused
    # input writes nothing beside the output), then moved beside the output
    fd, tmp_log = tempfile.mkstemp(prefix="quantgate-sensitivity.", suffix=".log")
    os.close(fd)
    log_path = a.output.with_suffix(".log")
    with captured_output(Path(tmp_log), a.verbose) as console:
        console.line(f"sensitivity of {a.model} → {a.output} (details: {log_path})")
        res = analyze(a.model, a.calibration, a.output, options, log=console.line)
    shutil.move(tmp_log, log_path)
    thin = thin_calibration(len(res.page_ids), res.reference.tokens)
    print(format_table(res))
    if thin:
        print(f"warning: {thin}")
    print(f"{a.output}: {len(res.groups)} groups × {len(res.formats)} formats on {len(res.page_ids)} page(s), "
          f"{res.reference.tokens} scored tokens; {res.timings['total_s']:.1f} s")
    return 0


def _speed_table(a) -> dict:
    if a.speed_table is None:
        if getattr(a, "prefill_table", None) is not None:
            from quantgate.errors import UsageError

            raise UsageError("--prefill-table needs --speed-table (the decode step it adds the prefill phase to)")
        return {}
    from quantgate.schema.speed import load_cost_table

    out = {"speed_table": load_cost_table(a.speed_table), "speed_table_source": str(a.speed_table),
           "speed_concurrency": a.speed_concurrency}
    if getattr(a, "prefill_table", None) is not None:
        from quantgate.speed.served import load_prefill_table

        out.update(prefill_table=load_prefill_table(a.prefill_table), prefill_table_source=str(a.prefill_table))
    return out


def _sensitivity_file(a) -> None:
    """``recommend --sensitivity FILE``, or the positional it replaces (deprecated), not both."""
    from quantgate.errors import UsageError

    if a.old_sensitivity is not None:
        if a.sensitivity is not None:
            raise UsageError(f"recommend: {a.old_sensitivity} (positional, deprecated) and --sensitivity "
                             f"{a.sensitivity} both name the sensitivity file; give it once, as --sensitivity")
        print("quantgate: warning: recommend SENSITIVITY is deprecated, use --sensitivity SENSITIVITY (the old "
              "spelling goes in the next release)", file=sys.stderr)
        a.sensitivity = a.old_sensitivity
    if a.sensitivity is None:
        raise UsageError("recommend: give the sensitivity file as --sensitivity FILE")


def cmd_recommend(a) -> int:
    from quantgate.io.fileio import atomic_write_text
    from quantgate.sensitivity import check_model, load_sensitivity, parse_size
    from quantgate.sensitivity.analyze import parse_formats
    from quantgate.sensitivity.recommend import recommend
    from quantgate.sensitivity.report import format_choice
    from quantgate.sensitivity.write import recipe_yaml

    _sensitivity_file(a)
    sens = load_sensitivity(a.sensitivity)
    if a.model:
        check_model(sens, a.model, str(a.sensitivity))
    rec = recommend(sens, budget_bytes=parse_size(a.budget) if a.budget else None, effective_bits=a.effective_bits,
                    speedup=a.speedup, formats=parse_formats(a.formats) if a.formats else None, target=a.target,
                    **_speed_table(a))
    text = recipe_yaml(sens, rec, name=a.name or a.output.stem, source=str(a.sensitivity))
    atomic_write_text(a.output, text)
    for w in rec.warnings:
        print(f"warning: {w}", file=sys.stderr)
    if a.json:
        print_json(rec.summary())
    else:
        print(format_choice(rec))
        print(f"{a.output}: recipe written; check it with `quantgate plan MODEL --recipe {a.output}`")
    return 0
