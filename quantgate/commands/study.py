from __future__ import annotations

import argparse
import sys
from pathlib import Path

from quantgate.commands._args import existing_path, int_range


def demo_min_pages() -> tuple[int, int]:
    """(pages, held-out pages): the fewest demo pages whose held-out split reaches the verdict's page
    minimum. The split is a seeded hash, so the count for the demo's seed and fraction is known before
    any page is drawn."""
    from quantgate.demo import demo_study
    from quantgate.heldout.pageset import split_of
    from quantgate.scoring import stats

    # the statistics rework defines the verdict's page minimum (MIN_PAGES); before it, 20 held-out pages
    need = getattr(stats, "MIN_PAGES", 20)
    synth = demo_study(need, ["bf16"])["pages"]["synth"]
    seed, fraction = synth["seed"], synth["calibration_fraction"]
    held = least = 0
    while held < need:  # ends: a study's calibration_fraction is below 1. Ids as synth_pages names them.
        held += split_of(f"synth-{seed}-{least:05d}", seed, fraction) == "heldout"
        least += 1
    return least, need


class DemoPages(argparse.Action):
    """``demo --pages``: at least 2 (a paired comparison needs two pages); fewer than the verdict's
    minimum is a warning, not a refusal — small demos are how the flow is smoke-tested in minutes."""

    def __call__(self, parser, namespace, value, option_string=None):
        setattr(namespace, self.dest, value)
        least, need = demo_min_pages()
        if value < least:
            print(f"warning: --pages {value} leaves fewer than {need} held-out pages, the minimum a verdict asks "
                  f"for; use --pages {least} or more for verdicts you can act on", file=sys.stderr)


def register(sub) -> None:
    s = sub.add_parser("study", help="run a whole study from one YAML (resumable)",
                       description="Quantize every variant, serve each at the study's concurrency levels, score, "
                       "compare with the baseline (its second concurrency level is the noise run) and write "
                       "summary.json, report.md, report.html and junit.xml. Stop it anywhere; rerun to resume. "
                       "See docs/study.md for the YAML.")
    s.add_argument("study", type=existing_path)
    s.add_argument("-o", "--output", type=Path, help="output folder (default: the study's 'output')")
    s.set_defaults(func=cmd_study)

    r = sub.add_parser("report", help="rebuild report.md/html and junit.xml from summary.json")
    r.add_argument("out", type=existing_path)
    r.set_defaults(func=cmd_report)

    g = sub.add_parser("gate", help="exit code for a release pipeline",
                       description="Exit 0 when every checked verdict is within_noise, 1 when any is a regression, "
                       "2 when any is inconclusive (none regressed), 3 when the study is incomplete or its weights "
                       "changed since the verdicts (every weight file is re-hashed).")
    g.add_argument("out", type=existing_path)
    g.add_argument("--metrics", help="comma list of metrics to check (default: all)")
    g.add_argument("--variants", help="comma list of variants to check (default: all)")
    g.add_argument("--require", choices=["within_noise"], default="within_noise",
                   help="what passes (within_noise: the interval clears the margin)")
    g.add_argument("--lmeval", action="store_true", help="the study's lm-eval verdicts must pass too")
    g.set_defaults(func=cmd_gate)

    d = sub.add_parser("demo", help="the whole flow on the bundled tiny reader, on CPU (a few minutes)",
                       description="Synthesize reader pages, build bf16 / fp8-dynamic / nvfp4 / mixed / harmful-int2 "
                       "variants of the bundled tiny Qwen3.5 reader, serve each with transformers serve at two "
                       "concurrency levels, run lm-eval's offline page-heading task through each server, score, compare with "
                       "BF16 and write the report. No network.")
    d.add_argument("-o", "--output", type=Path, default=Path("demo-out"))
    d.add_argument("--pages", type=int_range(2), action=DemoPages, default=40, help="synthetic pages, >= 2 (about "
                   "80%% held out; default 40); fewer than the verdict's held-out minimum asks for is warned about")
    d.add_argument("--variants", default="bf16,fp8-dynamic,nvfp4,mixed,harmful-int2")
    d.set_defaults(func=cmd_demo)


def _print_verdicts(rep: dict) -> None:
    from quantgate.reports.markdown import ICON

    print(f"{'variant':<16}{'metric':<9}{'verdict':<20}{'delta':>9}   90% CI               margin    n")
    for v in rep["verdicts"]:
        print(f"{v['variant']:<16}{v['metric']:<9}{ICON[v['verdict']]:<20}{v['delta']:>+9.4f}   "
              f"[{v['ci_low']:+.4f}, {v['ci_high']:+.4f}]  {v['margin']:.4f}  {v['n']:>4}")
    lm = (rep.get("lm_eval") or {}).get("verdicts", [])
    if lm:
        print("lm-eval (paired over the logged samples):")
    for v in lm:
        rec = "–" if v["recovery"] is None else f"{v['recovery']:.3f}"
        print(f"{v['variant']:<16}{v['task']} {v['metric']}: {v['baseline']:.3f} -> {v['candidate']:.3f} "
              f"(recovery {rec})  {ICON[v['verdict']]}  {v['delta']:+.4f} [{v['ci_low']:+.4f}, {v['ci_high']:+.4f}]"
              f"  margin {v['margin']:.4f}  n {v['n']}")


def cmd_study(a: argparse.Namespace) -> int:
    from quantgate.study import run_study

    rep = run_study(a.study, a.output, log=lambda s: print(s, file=sys.stderr))
    _print_verdicts(rep)
    out = Path(rep["variants"][0]["path"]).parent.parent
    print(f"report: {out / 'report.html'} (also report.md, summary.json, junit.xml)")
    return 0


def cmd_report(a: argparse.Namespace) -> int:
    from quantgate.reports import load_summary, write_reports

    rep = load_summary(a.out)
    write_reports(rep, a.out)
    print(f"rebuilt {a.out}/report.md, report.html, junit.xml")
    return 0


def cmd_gate(a: argparse.Namespace) -> int:
    from quantgate.reports import gate

    code, lines = gate(a.out, a.metrics.split(",") if a.metrics else None,
                       a.variants.split(",") if a.variants else None, lmeval=a.lmeval)
    for line in lines:
        print(line)
    print({0: "PASS", 1: "FAIL: regression", 2: "UNDECIDED: inconclusive", 3: "INVALID"}[code])
    return code


def cmd_demo(a: argparse.Namespace) -> int:
    from quantgate.demo import run_demo

    rep = run_demo(a.output, a.pages, a.variants.split(","), log=lambda s: print(s, file=sys.stderr))
    _print_verdicts(rep)
    print(f"report: {a.output / 'report.html'} (also report.md, summary.json, junit.xml)")
    return 0
