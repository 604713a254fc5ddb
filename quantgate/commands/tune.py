"""``quantgate tune``: recommend → quantize → serve → score → verdict until the verdicts hold."""

from __future__ import annotations

import argparse
from pathlib import Path

from quantgate.commands._args import budget_flags, existing_path, int_range, positive_float

EPILOG = """\
the loop:
  1. recommend: the least summed KL under the budget (as `quantgate recommend`), minus the formats
     earlier trials ruled out
  2. the study with this recipe added as a variant: quantize, serve, score, verdict on the held-out
     pages (finished variants and served pages are reused)
  3. every verdict within_noise: stop. Inconclusive and more pages would decide it (the verdict's
     pages_needed) and the split has them: the same recipe on that many pages. Otherwise promote
     the groups with the largest KL one format up — as many as the measured change asks for — and
     go to 1. Up to --max-trials.

files (under the study folder OUT):
  tune/NAME/trials.jsonl   one record per finished trial: recipe (file + sha256), bytes, modelled
                           speed, predicted damage (summed KL), measured change, verdicts, action
  tune/NAME/tune.json      the whole tune: inputs, status, chosen trial
  tune/NAME/tK.yaml        trial K's recipe;  tune/NAME/tK.study.yaml  the study trial K ran
  report.md / report.html  the study's report, with the trials table (and, in HTML, the sensitivity
                           heat map and predicted against measured damage)
  Rerun the same command to resume a killed tune; a larger --max-trials continues a finished one.

exit code: 0 a trial's verdicts are all within noise; 1 none is, and the last trial regressed;
  2 none is, and the last trial was inconclusive (as `quantgate gate`).

example:
  quantgate sensitivity ./model --calibration pages --allow-vision -o sens.json
  quantgate tune study.yaml --sensitivity sens.json --budget 2.58MB --max-trials 4
  quantgate gate OUT --variants tune-2.58MB-t1       # the chosen trial, in a release pipeline
"""


def register(sub) -> None:
    t = sub.add_parser("tune", help="find the recipe under a budget whose verdicts are within noise (loop)",
                       description="From a sensitivity file and a budget, recommend a per-group recipe, run it "
                       "through the study (quantize, serve, score, verdict on held-out pages) and, while a verdict "
                       "fails, promote the most damaging groups one format up (or score more pages, when that would "
                       "decide it) and try again. Every trial is recorded in the study folder and shown in its report.",
                       epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    t.add_argument("study", type=existing_path, help="the study YAML (model, pages, backend, metrics, margins)")
    t.add_argument("--sensitivity", required=True, type=existing_path,
                   help="from `quantgate sensitivity` on the same model (refused if its weights differ)")
    budget_flags(t, bits=positive_float, speedup=positive_float)
    t.add_argument("--prefill-table", type=existing_path, metavar="FILE",
                   help="with --speed-table: the prefill phase too (quantgate.speed.served): served speed-ups")
    t.add_argument("--max-trials", type=int_range(1, 100), default=5, help="trials at most (default 5)")
    t.add_argument("-o", "--output", type=Path, help="study folder (default: the study's 'output')")
    t.add_argument("--name", help="this tune's name: its folder under OUT/tune and its variants' prefix "
                   "(default from the budget, e.g. tune-2.58MB)")
    t.add_argument("--formats", help="only these measured formats (comma-separated)")
    t.add_argument("--target", default="hopper", choices=["hopper", "blackwell", "ampere", "none"],
                   help="GPU family whose vLLM kernels to warn about (default hopper)")
    t.add_argument("--overwrite", action="store_true", help="forget this tune's recorded trials and start again")
    t.add_argument("-v", "--verbose", action="store_true",
                   help="show third-party output (progress bars, warnings) instead of keeping it in OUT/tune.log")
    t.set_defaults(func=cmd_tune)


def cmd_tune(a: argparse.Namespace) -> int:
    from quantgate.io.console import captured_output
    from quantgate.sensitivity import parse_size
    from quantgate.sensitivity.analyze import parse_formats
    from quantgate.tune.loop import Tuner
    from quantgate.tune.report import trials_text

    # every input checked first (nothing written when refused); then the trials' studies and the libraries they
    # load write into the tune's log, and the console shows quantgate's own lines
    tuner = Tuner(a.study, a.sensitivity, budget_bytes=parse_size(a.budget) if a.budget else None,
                  effective_bits=a.effective_bits, speedup=a.speedup, max_trials=a.max_trials, out=a.output,
                  name=a.name, formats=parse_formats(a.formats) if a.formats else None, target=a.target,
                  speed_table=a.speed_table, speed_concurrency=a.speed_concurrency, prefill_table=a.prefill_table)
    log_path = tuner.out / "tune.log"  # beside the study folder's study.log; --overwrite clears the tune's own folder
    with captured_output(log_path, a.verbose) as console:
        console.line(f"tune {a.study} → {tuner.tdir} (details: {log_path})")
        tuner.log = console.line
        tf = tuner.run(overwrite=a.overwrite)
    print(trials_text(tf))
    print(tf.message)
    if tf.status == "found":
        t = next(x for x in tf.trials if x.trial == tf.chosen)
        print(f"recipe: {t.recipe} (in the study folder); gate it with `quantgate gate OUT --variants {t.variant}`")
        return 0
    return 1 if tf.trials and tf.trials[-1].outcome == "regression" else 2
