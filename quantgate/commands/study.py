from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from quantgate.commands._args import existing_path, int_range
from quantgate.commands._fields import yaml_flag
from quantgate.commands.scoring import DEFAULT_MARGINS
from quantgate.errors import DiskFullError, QuantgateError, UsageError, exit_code_table

if TYPE_CHECKING:  # the parser is built without the library; the commands import it when they run
    from quantgate.io.console import Console
    from quantgate.schema.study import StudyOutcome
    from quantgate.schema.summary import Summary


def demo_min_pages() -> tuple[int, int]:
    """(pages, held-out pages): the fewest demo pages whose held-out split reaches the verdict's page
    minimum. The split is a seeded hash, so the count for the demo's seed and fraction is known before
    any page is drawn."""
    from quantgate.heldout.synth import synth_document
    from quantgate.io.pageset import split_of
    from quantgate.schema.settings import MIN_PAGES
    from quantgate.study.demo import demo_study

    need = MIN_PAGES
    synth = demo_study(need, ["bf16"])["pages"]["synth"]
    seed, fraction, per_doc = synth["seed"], synth["calibration_fraction"], synth.get("pages_per_document", 1)
    held = least = 0
    while held < need:  # ends: a study's calibration_fraction is below 1. Split by document, as synth_pages does.
        held += split_of(synth_document(seed, least, per_doc), seed, fraction) == "heldout"
        least += 1
    return least, need


def demo_pages_warning(pages: int, min_pages: int | None) -> str | None:
    """``demo --pages`` below what gives the verdict's minimum of held-out pages: a one-line warning (not a
    refusal — small demos are how the flow is smoke-tested in minutes), unless ``--min-pages`` says the
    smaller page count is deliberate."""
    least, need = demo_min_pages()
    if pages >= least or min_pages is not None:
        return None
    return (f"warning: --pages {pages} leaves fewer than {need} held-out pages, the minimum a verdict asks for; "
            f"use --pages {least} or more for verdicts you can act on (or --min-pages for a smoke test)")


def register(sub) -> None:
    s = sub.add_parser("study", help="run a whole study from one YAML (resumable)",
                       description="Quantize every variant, serve each at the study's concurrency levels, score, "
                       "compare with the baseline (its second concurrency level is the noise run) and write "
                       "summary.json, report.md, report.html and junit.xml. Each metric is judged against its "
                       "declared margin (the study's margins:, else the registry's: " + DEFAULT_MARGINS + "), non-inferiority at one-sided 95% by default "
                       "(test: equivalence | exact); fewer than min_pages (30) pages give inconclusive. With a "
                       "'sequential:' block each candidate's accuracy pass is served in a seeded order and stops "
                       "once every verdict is decisive (docs/statistics.md). 'servers: all_at_once' starts each "
                       "variant's server as soon as it is quantized (the compiles overlap; pages are then served "
                       "one variant at a time), 'gpus: [0, 1]' spreads them over GPUs. The report ends with a time budget "
                       "(quantize, server starts, generation, quantgate's own overhead). Margins, "
                       "seed, resamples and min_pages are checked before any work starts. Stop it anywhere; rerun "
                       "to resume. See docs/study.md for the YAML.")
    s.add_argument("study", type=existing_path, help="the study YAML (`quantgate init` writes one)")
    s.add_argument("-o", "--output", type=Path, help="output folder (default: the study's 'output')")
    s.add_argument("--ray", metavar="ADDRESS", help="run each variant's quantize and server on a Ray cluster (host:6379, "
                   "ray://host:10001 or auto; over the study's cluster.ray); the output folder must be on storage "
                   "every node mounts at the same path (docs/scale.md). Needs quantgate[cluster]")
    _verbose_flag(s)
    s.set_defaults(func=cmd_study)

    r = sub.add_parser("report", help="rebuild report.md/html and junit.xml from summary.json, or report on other "
                       "systems' outputs",
                       description="Rebuild a study folder's report.md, report.html and junit.xml from its summary.json "
                       "(after a gate says the summary checks out, or with a newer quantgate's report layout); nothing "
                       "is served, scored or judged again. With --predictions: score other systems' output folders "
                       "(as `score --predictions` names them) against --pages, judge each against the first on "
                       "--metric, and write OUT/report.md (the outcome first, then verdicts, pages without output and "
                       "worst pages) and OUT/comparison.json.")
    r.add_argument("out", type=Path, help="a study folder (its summary.json); with --predictions, the folder to write")
    r.add_argument("--predictions", type=existing_path, nargs="+", metavar="FOLDER",
                   help="output folders of other systems, the BASELINE first (e.g. sys/marker sys/mistral)")
    r.add_argument("--pages", type=existing_path, help="with --predictions: the page set the outputs are of")
    r.add_argument("--metric", default="ned", help="with --predictions: the one metric judged (default ned)")
    r.add_argument("--split", default="heldout", help="with --predictions: calibration, heldout or all (default "
                   "heldout)")
    from quantgate.schema.study import Study

    yaml_flag(r, Study, "min_pages", help_extra=" (with --predictions)")
    r.set_defaults(func=cmd_report)

    g = sub.add_parser("gate", help="exit code for a release pipeline, from a finished study folder",
                       formatter_class=argparse.RawDescriptionHelpFormatter,
                       description="""\
Check a finished study folder, wherever it is and wherever the gate runs from (every path in it is
relative to it): re-hash the variants' weights, the judged pages.jsonl, the score files and lm-eval's
files; make every verdict again from the score files with the study's margins, seed, resamples,
min_pages and test; require summary.json to hold exactly those verdicts; write junit.xml from the
verdicts just remade (every word but within_noise a failure). Then:
  0  every checked verdict is within_noise (the only word that passes)
  1  a regression that stays one after Holm's adjustment over the study's verdicts, or not_equivalent
  2  anything else short of a pass: inconclusive, or a regression Holm does not confirm
  3  invalid: summary.json missing, malformed or from another schema; the study incomplete; a verdict
     missing, extra or unlike what the files give; a bad margin; any file changed (one line names it)
docs/study.md explains the family rule.

exit codes (every verb):
""" + exit_code_table())
    g.add_argument("out", type=existing_path, help="the study folder to check (its summary.json and the files it "
                   "binds)")
    g.add_argument("--metrics", help="comma list of metrics to check (default: all; every verdict is still remade "
                   "and compared with summary.json)")
    g.add_argument("--variants", help="comma list of variants to check (default: all)")
    g.add_argument("--require", choices=["within_noise"], default="within_noise",
                   help="what passes (within_noise: the interval clears the margin)")
    g.add_argument("--lmeval", action="store_true", help="the study's lm-eval verdicts must pass too")
    g.add_argument("--study", type=existing_path, metavar="STUDY.yaml",
                   help="the study file the folder must come from (e.g. the one in your repository): its margins, "
                   "variants and settings must equal those summary.json echoes")
    g.add_argument("--sign", type=Path, metavar="KEY", help="also write a signed attestation of the outcome (in-toto "
                   "statement, DSSE, Ed25519 PEM private key; `quantgate keygen`); check it with `quantgate verify`. "
                   "Sign only in the trusted job that ran the study (docs/security.md)")
    g.add_argument("--attestation", type=Path, metavar="PATH", help="where --sign writes (default "
                   "OUT/attestation.intoto.json)")
    g.add_argument("--allow-readable-key", action="store_true", help="sign with a private key that group or others "
                   "can read (refused by default, as ssh refuses one: `chmod 600 KEY` instead)")
    g.add_argument("--junit", type=Path, metavar="PATH", help="where the gate writes its junit.xml, one case per "
                   "verdict it has just remade (default OUT/junit.xml; a default it cannot write is a warning)")
    g.set_defaults(func=cmd_gate)

    d = sub.add_parser("demo", help="the whole flow on the bundled tiny reader, on CPU (a few minutes)",
                       description="Synthesize reader pages, build bf16 / fp8-dynamic / nvfp4 / mixed / harmful-int2 "
                       "variants of the bundled tiny Qwen3.5 reader, serve each with transformers serve (one start per "
                       "variant) at concurrency 1 — BF16 again at 2, its noise run — and run lm-eval's offline "
                       "page-heading task through the same server, score, compare with BF16 and write the report. "
                       "No network.")
    d.add_argument("-o", "--output", type=Path, default=Path("demo-out"), help="study folder (default demo-out)")
    d.add_argument("--pages", type=int_range(2), default=40, help="synthetic pages, >= 2 (about "
                   "80%% held out; default 40); fewer than the verdict's held-out minimum asks for is warned about")
    d.add_argument("--variants", default="bf16,fp8-dynamic,nvfp4,mixed,harmful-int2",
                   help="comma list of presets; the FIRST is the baseline the others are judged against (default "
                   "bf16,fp8-dynamic,nvfp4,mixed,harmful-int2)")
    d.add_argument("--min-pages", type=int_range(2), default=None,
                   help="judge on fewer pages than the calibrated minimum of 30 (at least 2): for smoke tests with "
                   "small --pages only; the report and the gate say the verdicts are not calibrated")
    _verbose_flag(d)
    d.set_defaults(func=cmd_demo)


def _verbose_flag(p) -> None:
    p.add_argument("-v", "--verbose", action="store_true",
                   help="show everything on the console: each stage's messages and the libraries' own output "
                   "(progress bars, warnings). Without it the console shows one line per stage and the rest goes "
                   "to OUT/study.log")


def _print_verdicts(rep: Summary) -> None:
    from quantgate.reports.markdown import ICON

    print(f"{'variant':<16}{'metric':<9}{'verdict':<18}{'reason':<21}{'delta':>8}  one-sided 95% bounds  margin  "
          "noise floor    n")
    for v in rep.verdicts:
        floor = "–" if v.noise_floor is None else f"{v.noise_floor:.4f}"
        print(f"{v.label:<16}{v.metric:<9}{ICON[v.verdict]:<18}{v.reason:<21}{v.delta:>+8.4f}  "
              f"[{v.ci_low:+.4f}, {v.ci_high:+.4f}]  {v.margin:.4f}  {floor:<11}{v.n:>4}")
        if v.verdict != "within_noise":
            print(f"{'':<16}{v.message}")
    # what every verdict rests on, the same for each candidate: the baseline's own score, the documents
    seen = {v.metric: v for v in rep.verdicts if v.baseline_score is not None and v.documents is not None}
    if seen:
        one = next(iter(seen.values()))
        print(f"baseline {rep.baseline} scores " + ", ".join(
            f"{m} {v.baseline_score:.4f} (floor {'–' if v.baseline_floor is None else f'{v.baseline_floor:g}'})"
            for m, v in seen.items()) + f"; {one.documents} documents (largest {one.largest_document} pages)")
    lm = rep.lm_eval.verdicts if rep.lm_eval else []
    if lm:
        print("lm-eval (paired over the logged samples):")
    for x in lm:
        rec = "–" if x.recovery is None else f"{x.recovery:.3f}"
        print(f"{x.variant:<16}{x.task} {x.metric}: {x.baseline:.3f} -> {x.candidate:.3f} (recovery "
              f"{rec})  {ICON[x.verdict]} ({x.reason})  {x.delta:+.4f} [{x.ci_low:+.4f}, "
              f"{x.ci_high:+.4f}]  margin {x.margin:.4f}  n {x.n}")


def _run_quietly(out: Path, verbose: bool, what: str, run: Callable[[Console], StudyOutcome]) -> StudyOutcome:
    """``run(console)`` with third-party output in OUT/study.log (all of it on the console with -v)."""
    from quantgate.io.console import captured_output

    log = out / "study.log"
    with captured_output(log, verbose) as console:
        console.line(f"{what} → {out} (details: {log})")
        return run(console)


def _print_stops_and_time(rep: Summary) -> None:
    for v in rep.variants:
        if v.sequential:
            print(f"{v.name}: {v.sequential.stop_line()}")
    tb = rep.time_budget
    if tb:
        print(f"time: {tb.wall_s:.1f} s — server starts {tb.engine_start_s:.1f} s, generation "
              f"{tb.generation_s:.1f} s, quantgate's own overhead {tb.overhead_s:.1f} s "
              f"({tb.overhead_share:.1%}; report.md, \"Time budget\")")


def _finish(outcome: StudyOutcome, out: Path) -> int:
    if outcome.summary is not None:
        _print_verdicts(outcome.summary)
        if outcome.summary.truth is not None:  # pages without truth are judged by their outputs alone
            print(outcome.summary.truth.line())
        _print_stops_and_time(outcome.summary)
    print(f"report: {out / 'report.html'} (also report.md, summary.json, junit.xml; log: {out / 'study.log'})")
    return 0


def cmd_study(a: argparse.Namespace) -> int:
    from quantgate.study import run_study
    from quantgate.study.preflight import prepare_study
    from quantgate.study.run import study_output

    out = study_output(a.study, a.output)  # the YAML is checked before anything is redirected
    ready = prepare_study(a.study, out, a.ray)  # placement, heads, cluster — before the log is opened
    outcome = _run_quietly(out, a.verbose, f"quantgate study {a.study}",
                           lambda c: run_study(a.study, out, console=c, ray=a.ray, prepared=ready))
    return _finish(outcome, out)


def cmd_report(a: argparse.Namespace) -> int:
    from quantgate.reports import load_summary, write_reports

    if a.predictions:
        return _report_systems(a)
    if a.pages is not None:
        raise UsageError("report: --pages goes with --predictions (other systems' output folders)")
    if not a.out.is_dir():
        raise UsageError(f"report {a.out}: no such study folder")
    rep = load_summary(a.out)
    from quantgate.gate.check import echo_as_run

    echo_as_run(rep, a.out, str(a.out / "summary.json"))  # an edited echo (the name) must not retitle the reports
    write_reports(rep, a.out)
    print(f"rebuilt {a.out}/report.md, report.html, junit.xml")
    return 0


def cmd_gate(a: argparse.Namespace) -> int:
    from quantgate.gate.check import NOT_VOUCHED, GateCode, gate

    key = None
    if a.sign:  # a bad key ends the gate before it runs: nothing judged, nothing written
        from quantgate.gate.attest import load_private_key

        key = load_private_key(a.sign, a.allow_readable_key)
    if a.junit is not None and not a.junit.parent.is_dir():  # checked before the gate runs: nothing judged yet
        raise UsageError(f"--junit {a.junit}: {a.junit.parent} is not a folder")
    metrics, variants = a.metrics.split(",") if a.metrics else None, a.variants.split(",") if a.variants else None
    checked: list = []
    code, lines = gate(a.out, metrics, variants, lmeval=a.lmeval, study=a.study, checked=checked)
    if code is GateCode.INVALID:
        print(f"INVALID: {lines[0]}")  # one line: what cannot be trusted, and the file
        _gate_junit(a, code, lines, checked)
        return code
    for line in lines:
        print(line)
    if _reports_edited(a.out):
        print(NOT_VOUCHED)  # what the gate did not re-derive (quantgate.gate.check), said when it matters
    print({GateCode.PASS: "PASS", GateCode.REGRESSION: "FAIL: regression",
           GateCode.INCONCLUSIVE: "UNDECIDED: not every verdict passes (see the reasons above)"}[code])
    _gate_junit(a, code, lines, checked)
    if key is not None:
        from quantgate.gate.attest import ATTESTATION, sign

        dest = sign(a.out, key, code, lines, {"metrics": metrics, "variants": variants, "lmeval": a.lmeval},
                    a.attestation or a.out / ATTESTATION)
        print(f"attestation: {dest} (check it with `quantgate verify {dest} --key PUBLIC_KEY --study {a.out}`)")
    return code


def _report_systems(a: argparse.Namespace) -> int:
    from quantgate.io.fileio import atomic_write_json, atomic_write_text
    from quantgate.reports.systems import render_systems_markdown
    from quantgate.schema.settings import VerdictSettings
    from quantgate.study.systems import compare_systems

    if a.pages is None:
        raise UsageError("report --predictions: give the page set the outputs are of as --pages")
    settings = VerdictSettings(metric=a.metric, min_pages=a.min_pages)
    cmp = compare_systems(a.pages, a.predictions, settings, a.split)  # everything judged before anything is written
    a.out.mkdir(parents=True, exist_ok=True)
    atomic_write_json(a.out / "comparison.json", cmp.model_dump())
    atomic_write_text(a.out / "report.md", render_systems_markdown(cmp))
    for s in cmp.systems[1:]:
        assert s.verdict is not None
        print(f"{s.name:<20} {s.verdict.verdict:<13} ({s.verdict.reason}) {s.verdict.message}")
    print(f"{cmp.outcome}: {a.out}/report.md, comparison.json")
    return 0


def _reports_edited(out: Path) -> bool:
    """Whether report.md is not what summary.json renders: edited (or written by another quantgate) after the
    study. Only then is the gate's note on the files it does not vouch for worth a reader's time."""
    from quantgate.reports.markdown import render_markdown
    from quantgate.reports.sections import markdown as section_markdown
    from quantgate.schema.summary import load_summary

    try:
        return (out / "report.md").read_text("utf-8") != render_markdown(load_summary(out), section_markdown(out))
    except (OSError, UnicodeDecodeError, QuantgateError):
        return True


def _gate_junit(a: argparse.Namespace, code: int, lines: list[str], checked: list) -> None:
    """junit.xml from the verdicts the gate has just remade (never the study's stored file, which an edited folder
    could keep green). The default path, inside the study folder, may be read-only in CI: a warning there; a path
    the user named must be written."""
    from quantgate.gate.check import GateCode, study_writing
    from quantgate.io.fileio import atomic_write_text
    from quantgate.reports.junit import render_invalid, render_verdicts
    from quantgate.schema.summary import load_summary

    if code is GateCode.INVALID:
        text = render_invalid(a.out.resolve().name, lines[0])
    else:  # the summary has just been checked whole: its study name is safe to read
        text = render_verdicts(load_summary(a.out).study["name"], checked)
    dest = a.junit or a.out / "junit.xml"
    if a.junit is None:
        try:
            study_writing(a.out)
        except QuantgateError:
            return  # a study holding the folder owns its files, junit.xml included (the INVALID line says so)
    try:
        atomic_write_text(dest, text)
    except (OSError, QuantgateError) as e:
        if isinstance(e, DiskFullError) and a.junit is not None:
            raise
        if a.junit is not None:
            raise UsageError(f"--junit {dest}: cannot write it ({e})") from None
        print(f"warning: junit.xml not written to {dest} ({' '.join(str(e).split())}); "
              "pass --junit PATH for a writable place", file=sys.stderr)


def cmd_demo(a: argparse.Namespace) -> int:
    from quantgate.study.demo import run_demo

    warning = demo_pages_warning(a.pages, a.min_pages)
    if warning:
        print(warning, file=sys.stderr)
    variants = [v.strip() for v in a.variants.split(",") if v.strip()]
    if variants:  # said, not left to be guessed: every other variant is judged against this one
        print(f"baseline: {variants[0]} (the first of --variants)")
    rep = _run_quietly(a.output, a.verbose, "quantgate demo",
                       lambda c: run_demo(a.output, a.pages, variants, console=c, min_pages=a.min_pages))
    return _finish(rep, a.output)
