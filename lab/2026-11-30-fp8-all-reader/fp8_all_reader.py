"""Accuracy side: what FP8 on the Gated DeltaNet projections (``fp8-all``) and on the LM head
(``fp8-all-lm-head``) cost the bundled reader, against BF16 and ``fp8-dynamic``, through a real study on
the CPU (transformers serve, held-out reader pages). Writes the verdicts, the exact command and how many
pages read exactly like BF16 to lab/2026-11-30-fp8-all-reader/fp8_all_reader.json.

    python lab/2026-11-30-fp8-all-reader/fp8_all_reader.py --out /tmp/fp8-all-study      # ~40 held-out pages; resumable
"""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from pathlib import Path

import yaml

from quantgate.io.fileio import atomic_write_json
from quantgate.serve import load_records
from quantgate.study import run_study
from quantgate.study.demo import READER

RESULT = Path(__file__).resolve().parent / "results" / "fp8_all_reader.json"
VARIANTS = ["bf16", "fp8-dynamic", "fp8-all", "fp8-all-lm-head"]


def study(pages: int, seed: int) -> dict:
    return {
        "name": "fp8-all-reader", "model": str(READER),
        # reader pages from seeds < 1000 were never trained on (assets/reader/CARD.json)
        "pages": {"synth": {"n": pages, "seed": seed, "profile": "reader", "calibration_fraction": 0.2}},
        "variants": [{"name": v, "recipe": v} for v in VARIANTS], "baseline": "bf16",
        "backend": {"name": "transformers", "device": "cpu"},
        "concurrency": [1], "noise_concurrency": 2, "max_tokens": 48, "metrics": ["ned", "cer", "bow_f1"],
        "margins": {"ned": 0.01, "cer": 0.01, "bow_f1": 0.02}, "seed": 0, "resamples": 10000,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True, help="study folder (resumable)")
    ap.add_argument("--pages", type=int, default=50, help="pages synthesised; 80%% are held out (default 50)")
    ap.add_argument("--seed", type=int, default=20)
    a = ap.parse_args(argv)
    a.out.mkdir(parents=True, exist_ok=True)
    path = a.out / "study.yaml"
    path.write_text(yaml.safe_dump(study(a.pages, a.seed), sort_keys=False))
    t0 = time.time()
    report = run_study(path, a.out).summary.model_dump()  # the report as summary.json holds it
    wall = time.time() - t0  # of this invocation: a resumed study only re-scores
    outputs = {v: {r.page_id: r.output for r in load_records(a.out / "runs" / v) if r.concurrency == 1}
               for v in VARIANTS}
    base = outputs["bf16"]
    noise = {r.page_id: r.output for r in load_records(a.out / "runs" / "bf16") if r.concurrency == 2}
    result = {
        "command": "python lab/2026-11-30-fp8-all-reader/fp8_all_reader.py " + shlex.join(sys.argv[1:] if argv is None else argv),
        "study": {**study(a.pages, a.seed), "model": "quantgate/assets/reader"}, "wall_s": round(wall, 1),
        "heldout_pages": len(base),
        "identical_to_bf16": {v: sum(outputs[v].get(p) == t for p, t in base.items()) for v in VARIANTS[1:]},
        "bf16_c2_identical_to_c1": sum(noise.get(p) == t for p, t in base.items()),
        "verdicts": [{k: v[k] for k in ("variant", "metric", "verdict", "n", "baseline_mean", "candidate_mean",
                                        "delta", "ci_low", "ci_high", "margin", "noise_floor")}
                     for v in report["verdicts"]],
        "weights_bytes": {v["name"]: v["weights_bytes"] for v in report["variants"]},
        "formats": {v["name"]: v["formats"] for v in report["variants"]},
        "notes": sorted({n for v in report["variants"] for n in v["notes"]}),
    }
    atomic_write_json(RESULT, result)
    for v in result["verdicts"]:
        print(f"{v['variant']:<16} {v['metric']:<7} {v['verdict']:<13} Δ {v['delta']:+.4f} "
              f"[{v['ci_low']:+.4f}, {v['ci_high']:+.4f}] margin {v['margin']:.4f} n {v['n']}")
    print(f"identical to BF16 at c=1: {result['identical_to_bf16']} of {len(base)}; -> {RESULT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
