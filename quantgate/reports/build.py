"""Building the report: everything a verdict rests on, gathered once into ``summary.json`` (typed
by ``schema.summary.Summary``); every renderer (markdown, HTML, JUnit) reads only that model."""

from __future__ import annotations

import time
from pathlib import Path

from quantgate.errors import InputError
from quantgate.io.fileio import atomic_write_json, atomic_write_text
from quantgate.io.provenance import git_commit, package_versions
from quantgate.reports.sections import html as section_html
from quantgate.reports.sections import markdown as section_markdown
from quantgate.reports.speed import honest_speed
from quantgate.schema.base import parse_record, read_record_file
from quantgate.schema.run import RunManifest
from quantgate.schema.sequential import SequentialDecision
from quantgate.schema.speed import SpeedupInterval
from quantgate.schema.study import Study
from quantgate.schema.summary import (
    SUMMARY,
    BoundPage,
    LmEvalSection,
    Summary,
    TruthCounts,
    TruthFreeEvidence,
    VariantVerdict,
    VerdictInputs,
    WorstPage,
    load_summary,
)
from quantgate.schema.timings import TimeBudget
from quantgate.schema.variant import VariantManifest
from quantgate.schema.verdict import Verdict

__all__ = ["build_summary", "load_summary", "statistics_text", "write_reports"]
_PKGS = ["quantgate", "torch", "transformers", "llmcompressor", "compressed-tensors", "rapidfuzz", "numpy"]


def build_summary(study: Study, out: Path, pages_sha256: str, variant_dirs: dict[str, Path],
                  verdicts: list[VariantVerdict], worst: dict[str, list[WorstPage]], *,
                  lm_eval: LmEvalSection | None = None, inputs: VerdictInputs,
                  sequential: dict[str, SequentialDecision] | None = None,
                  time_budget: TimeBudget | None = None,
                  speed_intervals: dict[str, dict[str, SpeedupInterval]] | None = None,
                  truth: TruthCounts | None = None,
                  truth_free: tuple[list[TruthFreeEvidence], dict[str, list[BoundPage]]] | None = None) -> Summary:
    """The report of a finished study: each variant's quantgate.json and run.json are read through
    their models, so a malformed or foreign manifest stops here with the file and field named.
    Variant paths are recorded relative to the study folder ``out`` (and must lie inside it), so a
    moved or copied study stays valid; ``inputs`` is what the gate needs to make the verdicts again.
    ``sequential``: variant -> its decision (a sequential study). ``truth``: the judged pages with and without
    truth (``study.truthfree.truth_counts``); ``truth_free``: what the outputs alone bound, and the largest bounds
    (``study.truthfree.truth_free_evidence``)."""
    variants = []
    runs: dict[str, RunManifest] = {}
    for name, vdir in variant_dirs.items():
        rel = _inside(vdir, out)
        man = read_record_file(VariantManifest, Path(vdir) / "quantgate.json", missing="rerun `quantgate study`")
        run = read_record_file(RunManifest, out / "runs" / name / "run.json", missing="rerun `quantgate study`")
        runs[name] = run
        variants.append({
            "name": name, "recipe": man.recipe.name, "recipe_sha256": _sha(man.recipe.text),
            "path": rel, "weights_bytes": man.size.weights_bytes, "compression": man.size.compression,
            "formats": man.verification.formats, "vision_bf16": man.verification.vision_bf16,
            "files": {k: v.sha256 for k, v in man.files.items()},
            "kernels": run.kernels, "numerics": run.numerics, "notes": run.notes, "server_version": run.server_version,
            "engine": run.engine,
            "levels": run.levels, "speed": run.speed, "max_concurrency_within_slo": run.max_concurrency_within_slo,
            "calibration_pages": len(man.calibration.page_ids),
            "sequential": (sequential or {}).get(name),
            "preemptions": None if run.preemptions is None else {str(c): n for c, n in sorted(run.preemptions.items())},
        })
    base = study.baseline
    base_levels = {lv.concurrency: lv for lv in runs[base].levels}
    for v in variants:
        # none for a variant run on BF16 kernels (report.speed.quantized_speed): its ratio is no quantized speed-up
        honest = honest_speed(v["numerics"])
        v["speedup"] = {str(lv.concurrency): (lv.pages_per_s / base_levels[lv.concurrency].pages_per_s)
                        if honest and lv.concurrency in base_levels and base_levels[lv.concurrency].pages_per_s else None
                        for lv in v["levels"]}
    for v in variants:  # made by the study (judge.speed.level_interval) from the runs' speed levels
        v["speedup_interval"] = (speed_intervals or {}).get(v["name"], {})
    expected = (len(study.variants) - 1) * len(study.metrics)
    lm_verdicts = list(lm_eval.verdicts) if lm_eval else []
    return parse_record(Summary, {
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "study": study.model_dump(), "baseline": base, "compare_level": study.compare_level,
        "noise_level": study.noise_level,
        "complete": sum(v.tag is None for v in verdicts) == expected and (not study.lm_eval or bool(lm_verdicts)),
        "verdicts": verdicts, "lm_eval": lm_eval, "variants": variants, "worst_pages": worst,
        "provenance": {"packages": package_versions(_PKGS), "git_commit": git_commit(), "pageset_sha256": pages_sha256,
                       "statistics": statistics_text(study, [*verdicts, *lm_verdicts])},
        "inputs": inputs, "time_budget": time_budget, "truth": truth,
        "truth_free": truth_free[0] if truth_free else [], "largest_bounds": truth_free[1] if truth_free else {},
    }, where=f"{out}: the report being built")


def statistics_text(study: Study, verdicts: list[Verdict]) -> str:
    """One paragraph: which test, at which level, on which interval, and how the family is read."""
    alpha, conf = (verdicts[0].alpha, verdicts[0].confidence) if verdicts else (0.05, 0.90)
    seq = study.sequential
    if seq:  # a look's interval is at its own nominal level; the overall level is alpha per side
        spend = "O'Brien–Fleming" if seq.spending == "obrien_fleming" else "Pocock"
        bounds = (f"group-sequential: pages in a seeded random order, a candidate stopped once every verdict was "
                  f"decisive, {spend} alpha spending, overall one-sided {1 - alpha:.0%} per side, each verdict's "
                  "bounds at the nominal level of the look it was decided at, p_regression the repeated p-value "
                  f"({study.resamples} bootstrap resamples, seed {study.seed})")
    else:
        bounds = (f"one-sided {1 - alpha:.0%} bounds (the ends of the {conf:.0%} interval; intervals used: "
                  f"{', '.join(sorted({x.interval for x in verdicts}) or ['studentized_hall'])}; "
                  f"{study.resamples} bootstrap resamples, seed {study.seed})")
    test = {"non_inferiority": "non-inferiority", "equivalence": "equivalence (two one-sided tests)",
            "exact": "exact (identical outputs)"}[study.test]
    return (f"paired by page; {test} against each metric's declared margin, {bounds}; the noise floor (the baseline re-run) is shown beside each verdict, never added "
            f"to the margin, and above it makes the verdict inconclusive; fewer than {study.min_pages} pages: "
            f"inconclusive; regression calls Holm-adjusted over the study's {len(verdicts)} verdicts "
            "(p_regression_holm); the gate passes only when every verdict it checks is within_noise")


def _inside(path: Path, out: Path) -> str:
    try:
        return Path(path).resolve().relative_to(Path(out).resolve()).as_posix()
    except ValueError:
        raise InputError(f"{path} lies outside the study folder {out}; a study keeps its variants inside it") from None


def _sha(text: str) -> str:
    import hashlib

    return hashlib.sha256(text.encode()).hexdigest()


def write_reports(report: Summary, out: Path) -> None:
    """summary.json and its renderings; sections registered by other packages (``report.sections``: a tune's
    trials) join report.md and report.html."""
    from quantgate.reports.html import render_html
    from quantgate.reports.junit import render_junit
    from quantgate.reports.markdown import render_markdown

    atomic_write_json(out / SUMMARY, report.model_dump())
    atomic_write_text(out / "report.md", render_markdown(report, section_markdown(out)))
    atomic_write_text(out / "report.html", render_html(report, section_html(out), root=out))
    atomic_write_text(out / "junit.xml", render_junit(report))
