from __future__ import annotations

import argparse
import sys
import textwrap
from pathlib import Path

from quantgate.commands._args import (
    concurrency_level,
    existing_path,
    float_range,
    print_json,
)
from quantgate.commands._fields import DeprecatedConst, yaml_flag
from quantgate.errors import exit_code_table
from quantgate.schema.metrics import METRICS

DEFAULT_MARGINS = ", ".join(f"{m.name} {m.margin:g}" for m in METRICS.values())
_margin = float_range(0, lo_open=True, why=" (for exact equality use --test exact)")
# above 0 here; against the margin and the metric's range where the metric is known (schema.metrics.check_setting)
_damage = float_range(0, lo_open=True, why=" in the metric's units (the most one page can be damaged)")
_floor = float_range(0, lo_open=False, why=" (the baseline's own mean score, within the metric's range)")
_shift = float_range(0, lo_open=False, why=" (how much worse the candidate may truly be; below the margin)")


def register(sub) -> None:
    s = sub.add_parser("score", help="score predictions (a run, or a folder of .md files) against a page set",
                       description="Score each page's prediction against its truth and checks. PREDICTIONS is a "
                       "run folder (its requests.jsonl) or a folder of any system's outputs: <page id>.md/.txt, "
                       "OmniDocBench's <image stem>.md, olmOCR-bench's <pdf>_pg<N>_repeat<K>.md (repeats scored "
                       "and averaged, as olmOCR-bench does; docs/study.md). A page without a prediction is listed "
                       "and scored as empty (the metric's worst value).")
    s.add_argument("--pages", required=True, type=existing_path, help="page-set folder")
    s.add_argument("--predictions", required=True, type=existing_path,
                   help="a run folder (requests.jsonl) or a folder of output files, searched in sub-folders too")
    s.add_argument("-o", "--output", required=True, type=Path, help="scores.jsonl to write")
    s.add_argument("--metrics", default=None, help="comma list (default: ned,cer,wer,bow_f1,table_teds,checks); 'omnidoc' adds "
                   "OmniDocBench's block-matched family (omnidoc_text_edit, …; docs/metrics.md), 'omnidoc15' its v1.5 one")
    s.add_argument("--split", default="heldout", help="calibration, heldout or all (default heldout)")
    s.add_argument("--concurrency", type=concurrency_level, default=None,
                   help="which level of a run to score (default: lowest)")
    s.add_argument("--json", action="store_true", help="print the summary as JSON")
    s.set_defaults(func=cmd_score)

    c = sub.add_parser("compare", help="paired verdict: is CANDIDATE within noise of BASELINE on a metric?",
                       formatter_class=argparse.RawDescriptionHelpFormatter,
                       description="""\
Pair two score files by page and test the mean page difference against a declared margin
(docs/statistics.md). Documents are the unit: pages of one document (the rows' `document`; a
page without one is its own) are resampled together. Default: non-inferiority, one-sided at 95%:
  within_noise  the candidate is at worst MARGIN worse (the 90% interval's lower end is above -margin)
                and rare failures are ruled out: enough pages and documents that a failure damaging
                one page in D/MARGIN by D (--worst-page-damage, default the metric's range) is seen
  regression    it is worse by more than MARGIN (the whole interval lies beyond -margin)
  inconclusive  neither: too few pages or documents, rare failures not ruled out, a noise floor
                above the margin, or a baseline below its floor or no better than an empty
                output on the same pages (baseline_unfit; with --pages); the verdict says why
                (reason) and how many pages and documents would pass a candidate
                --expected-shift worse at 80% power
The interval is a seeded studentized bootstrap over documents (Hall's skewness-corrected t), each
end the outer of it and Student-t. --noise (the baseline scored again, e.g. at another concurrency,
on the same pages) gives the noise floor: shown beside the verdict, never added to the margin.""",
                       epilog="default margins, metric units (docs/statistics.md says why):\n"
                       # wrapped between metrics, never inside "name margin" (the no-break space holds a pair)
                       + textwrap.fill(DEFAULT_MARGINS.replace(" ", "\xa0").replace(",\xa0", ", "), 100,
                                       initial_indent="  ", subsequent_indent="  ").replace("\xa0", " ")
                       + "\n\nexit codes (every verb):\n" + exit_code_table())
    c.add_argument("baseline", type=existing_path,
                   help="the baseline's scores.jsonl (`quantgate score -o`); with --pages, its outputs folder")
    c.add_argument("candidate", type=existing_path,
                   help="the candidate's scores.jsonl, scored on the same pages; with --pages, its outputs folder")
    c.add_argument("--metric", required=True, help="the one metric judged, e.g. ned (`score --metrics` scores several)")
    c.add_argument("--pages", type=existing_path, default=None, metavar="PAGESET",
                   help="judge two systems' outputs, not score files: BASELINE and CANDIDATE are run folders or "
                        "folders of <page_id>.md, and the page set gives the truth it has, each page's document and "
                        "its labeling draw; pages without truth are bounded from the two outputs (docs/statistics.md); "
                        "a metric scored without a truth text (checks, omnidoc*, parsebench*) is scored on the pages "
                        "both folders cover. Either way the baseline must beat what an empty output scores there")
    c.add_argument("--noise", type=existing_path, help="scores of a second baseline run on the same pages")
    c.add_argument("--margin", type=_margin, default=None,
                   help="declared margin in the metric's units, > 0 (default: the metric's, listed below)")
    from quantgate.schema.study import Study

    yaml_flag(c, Study, "test")
    c.add_argument("--equivalence", dest="test", action=DeprecatedConst, const="equivalence", new="--test VALUE",
                   help="deprecated: --test equivalence")
    c.add_argument("--exact", dest="test", action=DeprecatedConst, const="exact", new="--test VALUE",
                   help="deprecated: --test exact")
    yaml_flag(c, Study, "bootstrap_seed", "--seed")
    yaml_flag(c, Study, "resamples")
    yaml_flag(c, Study, "min_pages")
    c.add_argument("--allow-missing", action="store_true", help="compare only pages present in every file")
    c.add_argument("--worst-page-damage", type=_damage, default=None,
                   help="declare that no page is damaged by more than this (metric units; default: the metric's range, "
                        "1 for ned); a smaller one needs fewer pages to rule out rare failures, and the verdict states it")
    c.add_argument("--worst-document-damage", type=_damage, default=None,
                   help="declare that no document's mean is damaged by more than this (default: --worst-page-damage)")
    c.add_argument("--baseline-floor", type=_floor, default=None,
                   help="the baseline's own mean score past which the verdict is baseline_unfit (default: the "
                        "metric's, e.g. ned 0.5, checks 0.2)")
    yaml_flag(c, Study, "min_documents")
    c.add_argument("--expected-shift", type=_shift, default=0.0,
                   help="planning alternative of pages_needed: how much worse the candidate may truly be, metric "
                        "units, >= 0 and below the margin (default 0)")
    c.add_argument("--json", action="store_true", help="print the verdict as JSON")
    c.set_defaults(func=cmd_compare)


def cmd_score(a: argparse.Namespace) -> int:
    from tqdm import tqdm

    from quantgate.io.pageset import load_pageset
    from quantgate.io.scores import write_scores
    from quantgate.judge.describe import summarize
    from quantgate.scoring import get_metric, load_predictions, not_scored, parse_metric_list, score_pages

    ps = load_pageset(a.pages)
    metrics = parse_metric_list(a.metrics)
    preds = load_predictions(a.predictions, ps, a.split, a.concurrency)
    pages = ps.split(a.split)
    with tqdm(total=len(pages), desc="scoring", unit="page", file=sys.stderr, disable=None) as bar:
        rows = score_pages(ps, preds, metrics, a.split, progress=lambda _: bar.update(1))
    write_scores(a.output, rows)
    summ = summarize(rows, [m.spec for m in metrics])
    n_empty = sum(r.empty for r in rows)
    n_missing = sum(r.error == "missing" for r in rows)
    failed, truncated = not_scored(rows), [r.page_id for r in rows if r.truncated]
    omnidoc = omnidoc15 = overall = None
    families = {m.spec.family for m in metrics}
    if families & {"omnidoc", "omnidoc15"}:
        from quantgate.scoring.omnidoc import adapter, v15
        from quantgate.scoring.scores import model_texts

        # whole-set values over the model's outputs: a page whose request failed is left out, as in the rows
        texts, truths = model_texts(preds), {p.id: ps.omnidoc_truth_text(p) for p in pages if p.id not in failed}
        omnidoc = adapter.set_scores(texts, truths) if "omnidoc" in families else None
        omnidoc15 = v15.set_scores(texts, truths) if "omnidoc15" in families else None
        overall = v15.overall(omnidoc15.set_values, texts, truths) if omnidoc15 else None
    empty_bar = None
    if any(m.name == "checks" for m in metrics):
        from quantgate.judge.compare import empty_output_mean
        from quantgate.study.verdicts import empty_output_scores

        # what an output that reads nothing scores on the pages scored here: the bar a baseline must clear, from the
        # rows and the mean a study's and `compare --pages`'s fitness rule take (one rule, one place)
        scored = sorted(r.page_id for r in rows if r.value("checks") is not None)
        nothing = {r.page_id: r for r in empty_output_scores(ps, [get_metric("checks")], a.split, scored)}
        empty_bar = empty_output_mean(nothing, scored, "checks", clip=False) if scored else None
    board = None
    if "parsebench" in families:
        from quantgate.scoring.parsebench.leaderboard import leaderboard
        from quantgate.scoring.scores import model_texts

        # upstream's leaderboard: each number the mean over the pages it applies to (a failed request left out)
        given = model_texts(preds)
        board = leaderboard((p.parsebench, given.get(p.id)) for p in pages if p.id not in failed and p.parsebench)
    missing = [r.page_id for r in rows if r.error == "missing"]
    if missing:  # listed, not only counted: a system that skipped pages is judged on them as empty
        print(f"warning: {len(missing)} page(s) of split {a.split} have no prediction in {a.predictions}, scored as "
              f"empty (the metric's worst value): {', '.join(missing[:20])}" + (" …" if len(missing) > 20 else ""),
              file=sys.stderr)
    if a.json:
        print_json({"pages": len(rows), "empty": n_empty, "missing": n_missing, "missing_pages": missing,
                    "not_scored": failed,
                    "truncated": truncated,
                    "metrics": [x.model_dump() | {"not_scored": len(rows) - x.n} for x in summ]}
                   | ({"omnidoc": omnidoc.model_dump()} if omnidoc else {})
                   | ({"omnidoc15": omnidoc15.model_dump() | {"overall": overall.value, "overall_why": overall.why,
                                                                "formula_cdm": overall.formula_cdm,
                                                                "formula_cdm_notes": overall.notes}}
                      if omnidoc15 and overall else {})
                   | ({"checks_empty_output": empty_bar} if empty_bar is not None else {})
                   | ({"parsebench": board.model_dump()} if board else {}))
        return 0
    if failed:
        print(f"warning: {len(failed)} page(s) not scored, their request failed (not the model's output; a study "
              f"re-sends them on resume): {', '.join(failed[:20])}" + (" …" if len(failed) > 20 else ""), file=sys.stderr)
    if truncated:
        print(f"note: {len(truncated)} output(s) cut at max_tokens, scored as given (flagged truncated): "
              f"{', '.join(truncated[:20])}" + (" …" if len(truncated) > 20 else ""), file=sys.stderr)
    width = max(12, *(len(x.metric) + 2 for x in summ))
    print(f"{'metric':<{width}}{'dir':>7}{'pages':>7}{'mean':>10}   95% CI            not scored")
    for x in summ:
        # a page the metric does not apply to (no truth, no checks, nothing of its category) is left out, not 0
        skipped = f"{len(rows) - x.n:>6}" if len(rows) - x.n else ""
        if x.mean is None or x.ci95 is None:
            print(f"{x.metric:<{width}}{'':>7}{0:>7}{'n/a':>10}{'':>21}{skipped}")
            continue
        print(f"{x.metric:<{width}}{x.direction:>7}{x.n:>7}{x.mean:>10.4f}   [{x.ci95[0]:.4f}, {x.ci95[1]:.4f}]"
              f"{'':>2}{skipped}")
    if empty_bar is not None:
        print(f"checks: an output that reads nothing scores {empty_bar:.4f} on these pages (its absent and blank-page "
              "checks pass); a system at or below that reads nothing the checks see")
    if board:
        from quantgate.scoring.parsebench.leaderboard import lines

        print("\n".join(lines(board)))
    if omnidoc:
        print(f"OmniDocBench whole-set values as upstream aggregates them (TEDS per table, edit distances per page), "
              f"{omnidoc.pages_with_truth} pages with truth:")
        for name, v in omnidoc.set_values.items():
            if any(m.name == name for m in metrics):
                n = omnidoc.pages_scored[name]
                print(f"  {name:<{width}}{'n/a' if v is None else f'{v:.4f}':>8}   ({n} pages scored, "
                      f"{omnidoc.pages_with_truth - n} without its category)")
        for note in omnidoc.notes:
            print(f"  note: {note}")
    if omnidoc15:
        print(f"OmniDocBench v1.5 whole-set values as upstream aggregates them, {omnidoc15.pages_with_truth} pages "
              "with truth:")
        for name, v in omnidoc15.set_values.items():
            n = omnidoc15.pages_scored[name]
            print(f"  {name:<{width}}{'n/a' if v is None else f'{v:.4f}':>8}   ({n} pages scored, "
                  f"{omnidoc15.pages_with_truth - n} without its category)")
        if overall and overall.value is not None:
            print(f"  Overall = ((1 - text edit)*100 + table TEDS + formula CDM) / 3 = {overall.value:.2f} (formula "
                  f"CDM {overall.formula_cdm:.4f}, the mean over {overall.formulas} display formulas)")
        elif overall:
            print(f"  {overall.why}")
        for note in overall.notes if overall else []:
            print(f"  note: {note}")
        for note in omnidoc15.notes:
            print(f"  note: {note}")
    print(f"{len(rows) - len(failed)} pages scored, {n_empty} empty outputs ({n_missing} missing) -> {a.output}")
    return 0


EXIT = {"within_noise": 0, "regression": 1, "not_equivalent": 1, "inconclusive": 2}


def cmd_compare(a: argparse.Namespace) -> int:
    from quantgate.judge.compare import compare_files
    from quantgate.schema.settings import VerdictSettings

    settings = VerdictSettings(metric=a.metric, margin=a.margin, seed=a.bootstrap_seed, n_resamples=a.resamples,
                               test=a.test, min_pages=a.min_pages, worst_page_damage=a.worst_page_damage,
                               worst_document_damage=a.worst_document_damage, baseline_floor=a.baseline_floor,
                               min_documents=a.min_documents, expected_shift=a.expected_shift)
    if a.pages is not None:  # two systems' outputs on a page set, with truth or without
        from quantgate.commands._compare_pages import compare_pages

        v = compare_pages(a.pages, a.baseline, a.candidate, settings, noise=a.noise, allow_missing=a.allow_missing)
    else:
        v = compare_files(a.baseline, a.candidate, settings, noise=a.noise, allow_missing=a.allow_missing)
    if a.json:
        print_json(v.model_dump())
        return EXIT[v.verdict]
    better = "higher" if v.higher_is_better else "lower"
    test = {"non_inferiority": f"non-inferiority, one-sided {1 - v.alpha:.0%}",
            "equivalence": f"equivalence, two one-sided tests at {1 - v.alpha:.0%}", "exact": "exact outputs"}[v.test]
    print(f"{v.metric} ({better} is better), {v.n} paired pages, {test}: {v.verdict.upper()} ({v.reason})")
    print(f"  {v.message}")
    if v.documents is not None:
        score = "not measured (no truth)" if v.baseline_score is None else f"{v.baseline_score:.4f}"
        # the baseline must beat its floor and what an empty output scores on the same pages (baseline_unfit)
        nothing = "" if v.empty_output_mean is None else f", an empty output {v.empty_output_mean:.4f} on the same pages"
        print(f"  baseline score {score} (floor {v.baseline_floor if v.baseline_floor is not None else '–'}{nothing}), "
              f"{v.documents} documents (largest {v.largest_document} pages), design effect {v.design_effect:.2f}, "
              f"effective n {v.effective_n:.1f}; rare failures need {v.rare_failure_pages} effective pages and "
              f"{v.rare_failure_documents} documents (worst page damage {v.worst_page_damage:g}, "
              f"{v.worst_page_damage_source})")
    print(f"  baseline {v.baseline_mean:.4f}  candidate {v.candidate_mean:.4f}  delta {v.delta:+.4f} "
          f"[{v.ci_low:+.4f}, {v.ci_high:+.4f}] ({v.confidence:.0%} interval, {v.interval}, {v.n_resamples} "
          f"resamples, seed {v.seed})")
    nf = "not measured (no --noise)" if v.noise_floor is None else f"{v.noise_floor:.4f} (shift {v.noise_delta:+.4f})"
    print(f"  margin {v.margin:.4f} ({'default for ' + v.metric if v.margin_source == 'registry' else 'given'}), "
          f"noise floor {nf}")
    if v.flips is not None:
        how = "scores changed (no output hashes)" if v.flips_source == "scores" else "outputs changed"
        worse = "" if v.worse_threshold is None else f"; {v.pages_worse} worse by more than {v.worse_threshold:g}"
        print(f"  flips: {v.flips} pages' {how}{worse}"
              + (f": {', '.join(v.pages_worse_ids[:10])}" if v.pages_worse_ids else ""))
    if v.method is not None and v.mean_bound is not None and v.bound_upper is not None:
        rect = "" if v.excess_lower is None else f", less {v.excess_lower:.4f} it overstates on the pages labeled at random"
        print(f"  decided by {v.method}: truth-free mean bound {v.mean_bound:.4f}, upper bound {v.bound_upper:.4f}{rect}; "
              f"{v.pages_with_truth} pages with truth in {v.documents_with_truth} documents, {v.pages_without_truth} "
              f"without in {v.documents_without_truth}")
    if v.missing_pages:
        print(f"  {len(v.missing_pages)} page(s) not in every file, left out: {', '.join(v.missing_pages[:10])}")
    return EXIT[v.verdict]
