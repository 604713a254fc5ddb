"""olmOCR-bench's sample systems judged pairwise on ``checks``, with empty and blank pages scored as upstream
scores them, beside what an output that reads nothing scores on the same pages (the bar a baseline must clear).

Run from the repository root (needs ../shared/data/olmocr-bench-sample):
    .venv/bin/python lab/2026-12-04-checks-empty-edges/run.py
Writes result.json beside this file and prints the table. Pages a system wrote no file for are scored missing
(the worst value), as quantgate scores any missing page; math checks need Chromium (skipped and counted without)."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from quantgate.io.pageset import load_pageset
from quantgate.io.scores import read_scores
from quantgate.scoring.metrics import get_metric, score_one

CHECKS = get_metric("checks")


def empty_output_mean(pages_checks) -> float | None:
    """What an output that reads nothing scores on ``checks`` over the pages that have checks (as the study's
    scores/empty-output.jsonl scores it: the empty string run through each page's checks)."""
    rates = [r for r in (score_one(CHECKS, "", None, c) for c in pages_checks if c) if r is not None]
    return sum(rates) / len(rates) if rates else None

SAMPLE = Path(__file__).resolve().parents[3] / "shared" / "data" / "olmocr-bench-sample"
SYSTEMS = ["olmocr_pipeline", "marker", "mistral", "chatgpt", "gemini_flash2"]
HERE = Path(__file__).resolve().parent


def qg(*args: object) -> str:
    r = subprocess.run([sys.executable, "-m", "quantgate", *map(str, args)], capture_output=True, text=True)
    if r.returncode != 0 and not r.stdout.lstrip().startswith("{"):  # compare exits non-zero on a verdict short of
        # a pass, still printing it
        raise SystemExit(f"quantgate {' '.join(map(str, args))}: exit {r.returncode}\n{r.stderr}")
    return r.stdout


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        pages = Path(tmp) / "pages"
        qg("pages", "import", SAMPLE / "pdfs", "-o", pages, "--checks", SAMPLE / "dataset.jsonl",
           "--checks", SAMPLE / "blanks.jsonl", "--calibration-fraction", "0", "--megapixels", "0.3")
        ps = load_pageset(pages)
        empty = empty_output_mean(p.checks for p in ps.pages)
        systems = {}
        for name in SYSTEMS:
            qg("score", "--pages", pages, "--predictions", SAMPLE / name, "-o", Path(tmp) / f"{name}.jsonl",
               "--metrics", "checks")
            rows = read_scores(Path(tmp) / f"{name}.jsonl")
            vals = [r.value("checks") for r in rows.values() if r.value("checks") is not None]
            blank = rows.get("blank_book_pg1_pg1")
            own = [r for r in rows.values() if r.error is None and r.value("checks") is not None]
            checks = {p.id: p.checks for p in ps.pages}
            systems[name] = {"mean_checks": sum(vals) / len(vals), "pages": len(vals),
                             # on the pages the system wrote a file for, beside what reading nothing scores there
                             "mean_checks_own_pages": sum(r.value("checks") for r in own) / len(own),
                             "empty_output_mean_own_pages": empty_output_mean(checks[r.page_id] for r in own),
                             "missing": sum(r.error == "missing" for r in rows.values()),
                             "blank_page": None if blank is None else {"empty": blank.empty, "error": blank.error,
                                                                       "checks": blank.value("checks")}}
        pairs = []
        for base, cand in itertools.combinations(SYSTEMS, 2):
            v = json.loads(qg("compare", Path(tmp) / f"{base}.jsonl", Path(tmp) / f"{cand}.jsonl", "--metric",
                              "checks", "--min-pages", "2", "--json"))
            pairs.append({"baseline": base, "candidate": cand,
                          **{k: v.get(k) for k in ("verdict", "reason", "delta", "ci_low", "ci_high", "n")}})
    out = {"pages": len(ps.pages), "empty_output_mean_checks": empty, "systems": systems, "pairs": pairs}
    (HERE / "result.json").write_text(json.dumps(out, indent=2) + "\n")
    print(f"{len(ps.pages)} pages; an output that reads nothing scores checks {empty:.4f} on them")
    print(f"{'system':<16} {'mean checks':>11} {'pages':>5} {'missing':>7} {'own pages':>9} {'empty there':>11}  "
          "blank page")
    for name, s in systems.items():
        print(f"{name:<16} {s['mean_checks']:>11.4f} {s['pages']:>5} {s['missing']:>7} "
              f"{s['mean_checks_own_pages']:>9.4f} {s['empty_output_mean_own_pages']:>11.4f}  {s['blank_page']}")
    print(f"\n{'baseline':<16} {'candidate':<14} {'verdict':<16} {'reason':<24} delta")
    for p in pairs:
        print(f"{p['baseline']:<16} {p['candidate']:<14} {p['verdict']:<16} {p['reason'] or '':<24} "
              f"{'' if p['delta'] is None else format(p['delta'], '+.4f')}")


if __name__ == "__main__":
    main()
