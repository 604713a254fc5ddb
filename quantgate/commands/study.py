from __future__ import annotations

import argparse
from pathlib import Path

from quantgate.commands._args import existing_path


def register(sub) -> None:
    s = sub.add_parser("study", help="run a whole study from one YAML (resumable)",
                       description="Quantize every variant, serve each at the study's concurrency levels, score, "
                       "compare with the baseline (its second concurrency level is the noise run) and write "
                       "summary.json, report.md, report.html and junit.xml. Stop it anywhere; rerun to resume. "
                       "See docs/study.md for the YAML.")
    s.add_argument("study", type=existing_path)
    s.add_argument("-o", "--output", type=Path, help="output folder (default: the study's 'output')")
    _verbose_flag(s)
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
                       "variants of the bundled tiny Qwen3.5 reader, serve each with transformers serve (one start per "
                       "variant) at concurrency 1 — BF16 again at 2, its noise run — and run lm-eval's offline "
                       "page-heading task through the same server, score, compare with BF16 and write the report. "
                       "No network.")
    d.add_argument("-o", "--output", type=Path, default=Path("demo-out"))
    d.add_argument("--pages", type=int, default=40, help="synthetic pages (80%% held out; default 40)")
    d.add_argument("--variants", default="bf16,fp8-dynamic,nvfp4,mixed,harmful-int2")
    _verbose_flag(d)
    d.set_defaults(func=cmd_demo)


def _verbose_flag(p) -> None:
    p.add_argument("-v", "--verbose", action="store_true",
                   help="show everything on the console: each stage's messages and the libraries' own output "
                   "(progress bars, warnings). Without it the console shows one line per stage and the rest goes "
                   "to OUT/study.log")


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


def _run_quietly(out: Path, verbose: bool, what: str, run) -> dict:
    """``run(console)`` with third-party output in OUT/study.log (all of it on the console with -v)."""
    from quantgate.console import captured_output

    log = out / "study.log"
    with captured_output(log, verbose) as console:
        console.line(f"{what} → {out} (details: {log})")
        return run(console)


def _finish(rep: dict, out: Path) -> int:
    _print_verdicts(rep)
    print(f"report: {out / 'report.html'} (also report.md, summary.json, junit.xml; log: {out / 'study.log'})")
    return 0


def cmd_study(a: argparse.Namespace) -> int:
    from quantgate.study import run_study
    from quantgate.study.run import study_output

    out = study_output(a.study, a.output)  # the YAML is checked before anything is redirected
    rep = _run_quietly(out, a.verbose, f"quantgate study {a.study}", lambda c: run_study(a.study, out, console=c))
    return _finish(rep, out)


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

    rep = _run_quietly(a.output, a.verbose, "quantgate demo",
                       lambda c: run_demo(a.output, a.pages, a.variants.split(","), console=c))
    return _finish(rep, a.output)
