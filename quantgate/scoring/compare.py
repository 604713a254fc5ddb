"""Pair two score files by page and give the verdict for one metric."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from quantgate.errors import InputError
from quantgate.records import Verdict
from quantgate.scoring.metrics import get_metric
from quantgate.scoring.scores import read_scores
from quantgate.scoring.stats import DEFAULT_CONFIDENCE, DEFAULT_RESAMPLES, decide


def _paired(a: dict[str, dict], b: dict[str, dict], metric: str, allow_missing: bool, names: tuple[str, str]):
    missing = sorted(set(a) ^ set(b))
    if missing and not allow_missing:
        only_a = sorted(set(a) - set(b))
        only_b = sorted(set(b) - set(a))
        raise InputError(f"pages differ between {names[0]} and {names[1]}: only in the first: {only_a[:10]}, only in "
                         f"the second: {only_b[:10]}; pass --allow-missing to compare the common pages")
    ids = sorted(set(a) & set(b))
    ids = [i for i in ids if a[i].get(metric) is not None and b[i].get(metric) is not None]
    return ids, missing


def compare_scores(baseline: dict[str, dict], candidate: dict[str, dict], metric: str, *,
                   noise: dict[str, dict] | None = None, margin: float = 0.0, seed: int = 0,
                   n_resamples: int = DEFAULT_RESAMPLES, confidence: float = DEFAULT_CONFIDENCE,
                   allow_missing: bool = False, names: tuple[str, str] = ("baseline", "candidate"),
                   higher_is_better: bool | None = None) -> Verdict:
    """``higher_is_better`` is for metrics outside quantgate's registry (e.g. lm-eval's); otherwise the
    registry says."""
    hib = get_metric(metric).higher_is_better if higher_is_better is None else higher_is_better
    ids, missing = _paired(baseline, candidate, metric, allow_missing, names)
    if len(ids) < 2:
        raise InputError(f"metric {metric!r}: only {len(ids)} page(s) scored on both sides; need at least 2")
    b = np.array([baseline[i][metric] for i in ids], dtype=float)
    c = np.array([candidate[i][metric] for i in ids], dtype=float)
    sign = 1.0 if hib else -1.0
    e = None
    if noise is not None:
        nids = [i for i in ids if i in noise and noise[i].get(metric) is not None]
        if len(nids) >= 2:
            e = sign * (np.array([noise[i][metric] for i in nids], float) - np.array([baseline[i][metric] for i in nids], float))
    dec = decide(sign * (c - b), margin, noise=e, confidence=confidence, n_resamples=n_resamples, seed=seed)
    lo, hi = (dec.ci_low, dec.ci_high) if hib else (-dec.ci_high, -dec.ci_low)
    lo, hi = lo + 0.0, hi + 0.0  # no "-0.0000" in reports
    return Verdict(metric=metric, higher_is_better=hib, verdict=dec.verdict, n=len(ids),
                   baseline_mean=float(b.mean()), candidate_mean=float(c.mean()), delta=float((c - b).mean()),
                   ci_low=lo, ci_high=hi, confidence=confidence, margin=dec.margin, requested_margin=margin,
                   noise_floor=dec.noise_floor, seed=seed, n_resamples=n_resamples, pages_needed=dec.pages_needed,
                   missing_pages=missing)


def compare_files(baseline: Path, candidate: Path, metric: str, noise: Path | None = None, **kw) -> Verdict:
    return compare_scores(read_scores(baseline), read_scores(candidate), metric,
                          noise=read_scores(noise) if noise else None, names=(str(baseline), str(candidate)), **kw)
