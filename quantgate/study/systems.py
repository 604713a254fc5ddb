"""Other systems' outputs judged as variants: each folder of output files (named by the rules of
``quantgate.scoring.predictions``) scored against the page set, then compared with the first folder's scores
on one metric by the same verdict a study makes (``judge.compare``), with each system's worst pages beside."""

from __future__ import annotations

from pathlib import Path

from quantgate.schema.settings import VerdictSettings
from quantgate.schema.systems import SystemResult, SystemsComparison

WORST = 3  # pages shown per system, as a study's report shows


def compare_systems(pages: Path, folders: list[Path], settings: VerdictSettings, split: str = "heldout"
                    ) -> SystemsComparison:
    from quantgate.errors import UsageError
    from quantgate.io.pageset import load_pageset
    from quantgate.judge.compare import Names, compare_scores
    from quantgate.scoring import load_predictions, parse_metric_list, score_pages
    from quantgate.scoring.predictions import Repeats

    if len(folders) < 2:
        raise UsageError("--predictions: give the baseline's folder and at least one other system's")
    names = [Path(f).name for f in folders]
    if len(set(names)) != len(names):
        raise UsageError(f"--predictions: two folders share a name ({', '.join(names)}); the report names systems by "
                         "their folder")
    ps = load_pageset(pages)
    metric = parse_metric_list([settings.metric])
    scored = []
    for f in folders:
        preds = load_predictions(Path(f), ps, split)
        rows = {r.page_id: r for r in score_pages(ps, preds, metric, split)}
        texts = {k: (v.texts[0] if isinstance(v, Repeats) else v) for k, v in preds.items()}
        scored.append((rows, texts))
    (base_rows, base_texts), base = scored[0], names[0]
    truth = {p.id: ps.truth_text(p) for p in ps.split(split)}
    out = []
    for name, folder, (rows, texts) in zip(names, folders, scored, strict=True):
        verdict = None if name == base else compare_scores(base_rows, rows, settings, names=Names(base, name))
        out.append(SystemResult(name=name, folder=str(folder), pages_with_output=len(texts),
                                missing_pages=[pid for pid, r in rows.items() if r.error == "missing"],
                                verdict=verdict, worst=[] if name == base else _worst(
                                    settings, base_rows, rows, base_texts, texts, truth)))
    return SystemsComparison(pages=str(pages), split=split, metric=settings.metric, baseline=base, systems=out)


def _worst(settings: VerdictSettings, base_rows, rows, base_texts, texts, truth):
    from quantgate.schema.summary import WorstPage

    sign = 1 if settings.higher_is_better else -1
    behind = []
    for pid, row in rows.items():
        b, c = base_rows[pid].value(settings.metric) if pid in base_rows else None, row.value(settings.metric)
        if b is not None and c is not None and sign * (c - b) < 0:
            behind.append((sign * (c - b), pid, b, c))
    return [WorstPage(page_id=pid, metric=settings.metric, baseline_value=b, variant_value=c, truth=truth.get(pid),
                      baseline_output=base_texts.get(pid), variant_output=texts.get(pid))
            for _, pid, b, c in sorted(behind)[:WORST]]
