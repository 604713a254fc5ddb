from __future__ import annotations

import argparse
import sys
from pathlib import Path

from quantgate.commands._args import concurrency_level, existing_path, print_json


def register(sub) -> None:
    s = sub.add_parser("score", help="score predictions (a run, or a folder of .md files) against a page set",
                       description="Score each page's prediction against its truth and checks. PREDICTIONS is a "
                       "run folder (its requests.jsonl) or a folder of <page_id>.md/.txt from any parser. Empty or "
                       "failed predictions get the metric's worst value and are counted.")
    s.add_argument("--pages", required=True, type=existing_path, help="page-set folder")
    s.add_argument("--predictions", required=True, type=existing_path)
    s.add_argument("-o", "--output", required=True, type=Path, help="scores.jsonl to write")
    s.add_argument("--metrics", default=None, help="comma list (default: all): ned,cer,wer,bow_f1,table_teds,checks")
    s.add_argument("--split", default="heldout", help="calibration, heldout or all (default heldout)")
    s.add_argument("--concurrency", type=concurrency_level, default=None,
                   help="which level of a run to score (default: lowest)")
    s.add_argument("--json", action="store_true", help="print the summary as JSON")
    s.set_defaults(func=cmd_score)

    c = sub.add_parser("compare", help="paired verdict: is CANDIDATE within noise of BASELINE on a metric?",
                       description="Pair two score files by page and decide: within_noise (90%% bootstrap interval "
                       "of the mean difference above -margin), regression (wholly below -margin) or inconclusive. "
                       "The margin is the larger of --margin and the noise floor measured from --noise (a second "
                       "baseline run). Exit code: 0 within_noise, 1 regression, 2 inconclusive.")
    c.add_argument("baseline", type=existing_path)
    c.add_argument("candidate", type=existing_path)
    c.add_argument("--metric", required=True)
    c.add_argument("--noise", type=existing_path, help="scores of a second baseline run (e.g. another concurrency)")
    c.add_argument("--margin", type=float, default=0.0, help="equivalence margin in the metric's units (default 0)")
    c.add_argument("--seed", type=int, default=0)
    c.add_argument("--resamples", type=int, default=10_000)
    c.add_argument("--allow-missing", action="store_true", help="compare only pages present in both files")
    c.add_argument("--json", action="store_true")
    c.set_defaults(func=cmd_compare)


def cmd_score(a: argparse.Namespace) -> int:
    from tqdm import tqdm

    from quantgate.heldout import load_pageset
    from quantgate.scoring import load_predictions, parse_metric_list, score_pages, summarize, write_scores

    ps = load_pageset(a.pages)
    metrics = parse_metric_list(a.metrics)
    preds = load_predictions(a.predictions, ps, a.split, a.concurrency)
    pages = ps.split(a.split)
    with tqdm(total=len(pages), desc="scoring", unit="page", file=sys.stderr, disable=None) as bar:
        rows = score_pages(ps, preds, metrics, a.split, progress=lambda _: bar.update(1))
    write_scores(a.output, rows)
    summ = summarize(rows, metrics)
    n_empty = sum(r["empty"] for r in rows)
    n_missing = sum(r.get("error") == "missing" for r in rows)
    if a.json:
        print_json({"pages": len(rows), "empty": n_empty, "missing": n_missing, "metrics": summ})
        return 0
    print(f"{'metric':<12}{'dir':>7}{'pages':>7}{'mean':>10}   95% CI")
    for s in summ:
        if s["mean"] is None:
            print(f"{s['metric']:<12}{'':>7}{0:>7}{'n/a':>10}")
            continue
        print(f"{s['metric']:<12}{s['direction']:>7}{s['n']:>7}{s['mean']:>10.4f}   [{s['ci95'][0]:.4f}, {s['ci95'][1]:.4f}]")
    print(f"{len(rows)} pages scored, {n_empty} empty outputs ({n_missing} missing) -> {a.output}")
    return 0


EXIT = {"within_noise": 0, "regression": 1, "inconclusive": 2}


def cmd_compare(a: argparse.Namespace) -> int:
    from quantgate.scoring import compare_files

    v = compare_files(a.baseline, a.candidate, a.metric, noise=a.noise, margin=a.margin, seed=a.seed,
                      n_resamples=a.resamples, allow_missing=a.allow_missing)
    if a.json:
        print_json(v.model_dump())
    else:
        better = "higher" if v.higher_is_better else "lower"
        print(f"{v.metric} ({better} is better), {v.n} paired pages: {v.verdict.upper()}")
        print(f"  baseline {v.baseline_mean:.4f}  candidate {v.candidate_mean:.4f}  delta {v.delta:+.4f} "
              f"[{v.ci_low:+.4f}, {v.ci_high:+.4f}] ({v.confidence:.0%} paired bootstrap, {v.n_resamples} resamples, seed {v.seed})")
        nf = "none measured" if v.noise_floor is None else f"{v.noise_floor:.4f}"
        print(f"  margin {v.margin:.4f} (requested {v.requested_margin:.4f}, noise floor {nf})")
        if v.pages_needed:
            print(f"  about {v.pages_needed} pages would decide it at this spread")
        if v.missing_pages:
            print(f"  {len(v.missing_pages)} page(s) only on one side, left out: {', '.join(v.missing_pages[:10])}")
    return EXIT[v.verdict]
