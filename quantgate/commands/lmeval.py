from __future__ import annotations

import argparse
import sys
from pathlib import Path

from quantgate.commands._args import existing_path, int_range, positive_float
from quantgate.commands._fields import yaml_flag
from quantgate.serve.backends.derive import add_backend_flags, backend_from_args


def register(sub) -> None:
    s = sub.add_parser("lmeval", help="standard benchmarks (lm-eval) on a variant's server, per-sample logged",
                       description="Start a server for VARIANT (or use a running one with --backend openai "
                       "--endpoint URL) and run lm-eval tasks through it (lm-eval's chat-completions client), "
                       "logging every sample so variants can be paired. --page-task PAGES adds "
                       "'quantgate_page_heading', a small offline task built from a page set. Rerunning resumes "
                       "from lm-eval's response cache in OUT.",
                       epilog="then: quantgate lmeval-compare BASE_OUT CAND_OUT  (paired verdict per task and metric)")
    s.add_argument("variant", type=Path, help="model folder (for --backend openai: the served model name)")
    s.add_argument("--tasks", default="", help="comma-separated lm-eval task names")
    s.add_argument("--include-path", type=existing_path, help="folder of local task YAML (dataset_path: json)")
    s.add_argument("--page-task", type=existing_path, metavar="PAGES", help="also run quantgate_page_heading on "
                   "this page set's held-out split")
    from quantgate.schema.study import LmEvalSpec, Study

    yaml_flag(s, LmEvalSpec, "limit")
    yaml_flag(s, LmEvalSpec, "concurrent")
    s.add_argument("-o", "--output", required=True, type=Path, help="folder for lm-eval's results, per-sample logs "
                   "and response cache")
    add_backend_flags(s)
    s.set_defaults(func=cmd_lmeval)

    c = sub.add_parser("lmeval-compare", help="paired verdicts between two lmeval outputs",
                       description="Per task and metric: both scores with lm-eval's stderr, the recovery ratio "
                       "(1.0 = parity, oriented by the metric's direction) and a paired bootstrap verdict over "
                       "the logged samples, against a declared margin (non-inferiority, one-sided 95%%; fewer than "
                       "30 samples: inconclusive). Exit 0 all within noise, 1 any regression, 2 any inconclusive.")
    c.add_argument("baseline", type=existing_path, help="the baseline's `quantgate lmeval -o` folder")
    c.add_argument("candidate", type=existing_path, help="the candidate's `quantgate lmeval -o` folder")
    c.add_argument("--margin", type=positive_float, default=None, help="declared margin in the metrics' units, a "
                   "finite number > 0 (default 0.02, as a study's lm_eval.margin)")
    yaml_flag(c, Study, "bootstrap_seed", "--seed")
    c.add_argument("--min-pages", type=int_range(2), default=None, help="samples below which a verdict is "
                   "inconclusive (default: the calibrated 30; lower only for smoke tests, at least 2)")
    c.add_argument("--min-documents", type=int_range(2), default=None, help="samples (each its own document) below "
                   "which a verdict is inconclusive (default 30; lower only for smoke tests)")
    c.add_argument("--worst-sample-damage", type=positive_float, default=None, metavar="D",
                   help="declare that no sample is damaged by more than D (the metric's units): the rare-failure rule "
                        "then needs about 3·D/margin samples instead of 3·range/margin (docs/statistics.md)")
    c.add_argument("--json", action="store_true", help="print the verdicts as JSON")
    c.set_defaults(func=cmd_compare)


def cmd_lmeval(a: argparse.Namespace) -> int:
    from quantgate.errors import UsageError
    from quantgate.lmeval import PAGE_TASK, run_lmeval, write_page_task
    from quantgate.schema.run import DEFAULT_PROMPT

    tasks = [t.strip() for t in a.tasks.split(",") if t.strip()]
    include = a.include_path
    if a.page_task:
        if include:
            raise UsageError("--page-task writes its own include path; run your --include-path tasks separately")
        include = write_page_task(a.page_task, a.output / "task", prompt=DEFAULT_PROMPT)
        tasks.append(PAGE_TASK)
    backend = backend_from_args(a, variant=str(a.variant))
    run = run_lmeval(a.variant, backend, a.output, tasks=tasks, include_path=include, limit=a.limit,
                     concurrent=a.concurrent, log=lambda s: print(s, file=sys.stderr))
    print(f"{'task':<28}{'metric':<28}{'value':>8}{'stderr':>9}{'n':>6}")
    for task, ms in run.results.items():
        for k, m in ms.items():
            err = "–" if m.stderr is None else f"{m.stderr:.4f}"
            print(f"{task:<28}{k:<28}{m.value:>8.4f}{err:>9}{m.n:>6}")
    print(f"-> {a.output}/lmeval.json")
    return 0


def cmd_compare(a: argparse.Namespace) -> int:
    import json

    from quantgate.lmeval import compare_lmeval
    from quantgate.schema.study import LmEvalSpec

    margin = a.margin if a.margin is not None else LmEvalSpec.model_fields["margin"].default
    more = {"min_pages": a.min_pages} if a.min_pages else {}
    if a.min_documents:
        more["min_documents"] = a.min_documents
    more["worst_sample_damage"] = a.worst_sample_damage
    rows = compare_lmeval(a.baseline, a.candidate, default_margin=margin, seed=a.bootstrap_seed, **more)
    if a.json:
        print(json.dumps([r.model_dump() for r in rows], indent=2))
    else:
        for r in rows:
            rec = "–" if r.recovery is None else f"{r.recovery:.3f}"
            print(f"{r.verdict:<13} {r.task} {r.metric} ({r.reason}): {r.baseline:.4f} -> "
                  f"{r.candidate:.4f} (recovery {rec}), delta {r.delta:+.4f} [{r.ci_low:+.4f}, "
                  f"{r.ci_high:+.4f}] (one-sided 95% bounds), margin {r.margin:.4f}, n {r.n}")
            if r.verdict != "within_noise":
                print(f"  {r.message}")
    verdicts = {r.verdict for r in rows}
    return 1 if verdicts & {"regression", "not_equivalent"} else 2 if "inconclusive" in verdicts or not rows else 0
