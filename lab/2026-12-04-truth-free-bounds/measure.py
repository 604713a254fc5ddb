"""How loose the truth-free bounds are on page-like text, and what computing them costs: 3,000 synthetic pages
(quantgate's own page synthesizer's markdown), a baseline with 1% character errors, candidates changed in known
ways; per scenario and metric the mean true damage (scored against the truth) beside the mean bound (no truth),
and the wall time of ``bound_rows`` over all pages. Writes results.json beside this file and prints a table.

    .venv/bin/python lab/2026-12-04-truth-free-bounds/measure.py
"""

from __future__ import annotations

import json
import platform
import random
import string
import time
from pathlib import Path

from quantgate.heldout.synth import make_document, to_markdown, vocabulary
from quantgate.scoring.bounds import bound_rows
from quantgate.scoring.metrics import get_metric, score_one

PAGES, SEED = 3000, 20261204
METRICS = ["ned", "cer", "wer", "bow_f1", "table_teds"]
HERE = Path(__file__).resolve().parent


def page(rng: random.Random, words: list[str]) -> str:
    return "\n\n".join(to_markdown(make_document(rng, words, "doc")) for _ in range(6))


def typos(rng: random.Random, text: str, rate: float) -> str:
    """Substitute a letter for ``rate`` of the non-space characters (an OCR-like character error)."""
    chars = list(text)
    for i, ch in enumerate(chars):
        if not ch.isspace() and rng.random() < rate:
            chars[i] = rng.choice(string.ascii_lowercase)
    return "".join(chars)


def scenarios(rng: random.Random, truth: dict[str, str], base: dict[str, str]) -> dict[str, dict[str, str]]:
    ids = list(truth)
    share = set(rng.sample(ids, int(0.3 * len(ids))))
    rare = set(rng.sample(ids, int(0.02 * len(ids))))
    return {
        "identical": dict(base),
        "reflowed (whitespace only)": {p: t.replace(" ", "\n", 3) + "  " for p, t in base.items()},
        "neutral: 30% of pages re-typed (1% new errors on the truth)": {
            p: (typos(rng, truth[p], 0.01) if p in share else t) for p, t in base.items()},
        "worse: 30% of pages +1% errors": {p: (typos(rng, t, 0.01) if p in share else t) for p, t in base.items()},
        "worse: 2% of pages empty": {p: ("" if p in rare else t) for p, t in base.items()},
    }


def damage(metric: str, b: str, c: str, t: str) -> float | None:
    m = get_metric(metric)
    sb, sc = score_one(m, b, t, []), score_one(m, c, t, [])
    if sb is None or sc is None:
        return None
    if m.spec.clipped:
        sb, sc = min(sb, 1.0), min(sc, 1.0)
    return sb - sc if m.higher_is_better else sc - sb


def main() -> None:
    rng = random.Random(SEED)
    words = vocabulary()
    truth = {f"p{i:05d}": page(rng, words) for i in range(PAGES)}
    base = {p: typos(rng, t, 0.01) for p, t in truth.items()}
    rows = []
    for name, cand in scenarios(rng, truth, base).items():
        t0 = time.perf_counter()
        bounds = bound_rows(METRICS, base, cand)
        seconds = time.perf_counter() - t0
        for m in METRICS:
            pairs = [(r.bounds[m], d) for r in bounds
                     if (d := damage(m, base[r.page_id], cand[r.page_id], truth[r.page_id])) is not None]
            rows.append({"scenario": name, "metric": m, "pages_scored": len(pairs),
                         "mean_damage": sum(d for _, d in pairs) / len(pairs),
                         "mean_bound": sum(b for b, _ in pairs) / len(pairs),
                         # bound - damage on each page: never below 0 (up to float rounding) if the bound holds
                         "min_page_excess": min(b - d for b, d in pairs),
                         "bound_rows_seconds_all_metrics": round(seconds, 3)})
    chars = sum(map(len, base.values())) / PAGES
    out = {"pages": PAGES, "seed": SEED, "mean_page_chars": round(chars), "metrics": METRICS,
           "machine": f"{platform.machine()} {platform.processor() or ''} python {platform.python_version()}".strip(),
           "rows": rows}
    (HERE / "results.json").write_text(json.dumps(out, indent=2) + "\n")
    print(f"{PAGES} pages, {chars:.0f} characters each on average; bound_rows over {len(METRICS)} metrics")
    print(f"{'scenario':<58}{'metric':<12}{'damage':>9}{'bound':>9}{'min excess':>12}{'seconds':>9}")
    for r in rows:
        print(f"{r['scenario']:<58}{r['metric']:<12}{r['mean_damage']:>9.4f}{r['mean_bound']:>9.4f}"
              f"{r['min_page_excess']:>12.4f}{r['bound_rows_seconds_all_metrics']:>9.2f}")


if __name__ == "__main__":
    main()
