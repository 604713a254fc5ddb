"""Rewrite expected.json from the current code (on purpose only: see README.md)."""

import json
from pathlib import Path

from quantgate.judge.compare import compare_files
from quantgate.schema.settings import VerdictSettings

HERE = Path(__file__).parent
CASES = [({"seed": 7}, True), ({"seed": 7, "margin": 0.02}, True), ({"seed": 7, "margin": 0.004}, False),
         ({"seed": 7, "margin": 0.02, "equivalence": True}, True), ({"seed": 3, "n_resamples": 2000}, False),
         ({"seed": 7, "margin": 0.02, "worst_page_damage": 0.1}, True)]
KEYS = ("verdict", "reason", "interval", "n", "delta", "ci_low", "ci_high", "noise_floor", "p_regression",
        "pages_needed", "pages_changed", "documents", "design_effect", "effective_n", "rare_failure_pages",
        "rare_failure_documents", "baseline_score", "documents_needed", "flips", "p_noninferiority")

out = []
for args, noise in CASES:
    settings = {k: v for k, v in args.items() if k != "equivalence"} | ({"test": "equivalence"} if args.get(
        "equivalence") else {})
    v = compare_files(HERE / "baseline.jsonl", HERE / "candidate.jsonl", VerdictSettings(metric="ned", **settings),
                      noise=HERE / "noise.jsonl" if noise else None).model_dump()
    out.append({"args": args, "noise": noise, "expect": {k: v[k] for k in KEYS}})
(HERE / "expected.json").write_text(json.dumps(out, indent=1) + "\n")
print(json.dumps(out, indent=1))
