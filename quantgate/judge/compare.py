"""Pair two sets of score rows by page and give the verdict for one metric (a family of them is adjusted in
``quantgate.judge.family``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from quantgate.errors import InputError
from quantgate.io.scores import read_scores
from quantgate.judge.stats import decide
from quantgate.schema.metrics import METRICS
from quantgate.schema.scores import ScoreRow
from quantgate.schema.verdict import (
    DEFAULT_CONFIDENCE,
    DEFAULT_POWER,
    DEFAULT_RESAMPLES,
    MIN_PAGES,
    Comparison,
    TestName,
    Verdict,
    new_verdict,
)

Rows = dict[str, ScoreRow]


def _listing(ids) -> str:
    ids = sorted(ids)
    return f"{ids[:10]}" + (f" and {len(ids) - 10} more" if len(ids) > 10 else "")


def _differ(a: set, b: set, names: tuple[str, str], hint: str) -> str:
    sides = [f"{len(x)} only in {which} {_listing(x)}" for x, which in ((a - b, "the first"), (b - a, "the second"))
             if x]
    return f"pages differ between {names[0]} and {names[1]}: {', '.join(sides)}; {hint}"


def _has_metric(rows: Rows, metric: str, name: str) -> None:
    if not any(r.value(metric) is not None for r in rows.values()):
        have = sorted({k for r in rows.values() for k in r.metrics if k in METRICS})
        raise InputError(f"{name}: no page has a value for {metric!r} (this file has: {', '.join(have) or 'none'}); "
                         "score it with that metric or pick one it has")


def _pair(baseline: Rows, candidate: Rows, noise: Rows | None, metric: str, allow_missing: bool,
          names: tuple[str, str], noise_name: str) -> tuple[list[str], list[str], list[str]]:
    hint = "pass --allow-missing to compare the common pages"
    if set(baseline) != set(candidate) and not allow_missing:
        raise InputError(_differ(set(baseline), set(candidate), names, hint))
    common = set(baseline) & set(candidate)
    if noise is not None:
        if set(noise) != set(baseline) and not allow_missing:
            raise InputError(_differ(set(noise), set(baseline), (noise_name, names[0]),
                                     "the noise run must be scored on the pages being judged"))
        common &= set(noise)
    missing = sorted((set(baseline) | set(candidate)) - common)
    ids = sorted(i for i in common if baseline[i].value(metric) is not None and candidate[i].value(metric) is not None)
    if noise is not None:
        gaps = [i for i in ids if noise[i].value(metric) is None]
        if gaps:
            raise InputError(f"{noise_name}: no {metric} for {len(gaps)} page(s) the comparison has: {_listing(gaps)}; "
                             "the noise run must be scored with the same metrics on the same pages")
    return sorted(common), ids, missing


def pages_changed(baseline: Rows, candidate: Rows, pages: list[str], names: tuple[str, str],
                  required: bool) -> int | None:
    """Pages whose output text differs, by the score rows' output_sha256 (a page without output
    counts as changed). None when a file predates output hashes (an error if ``required``)."""
    for rows, name in ((baseline, names[0]), (candidate, names[1])):
        if not any(rows[i].has_output_hash for i in pages):
            if required:
                raise InputError(f"{name}: no output_sha256 in its rows (scored before quantgate recorded output "
                                 "hashes); re-score it with `quantgate score` to use --exact")
            return None
    return sum(1 for i in pages if baseline[i].output_sha256 is None
               or baseline[i].output_sha256 != candidate[i].output_sha256)


def compare_scores(baseline: Rows, candidate: Rows, metric: str, *, noise: Rows | None = None,
                   margin: float | None = None, seed: int = 0, n_resamples: int = DEFAULT_RESAMPLES,
                   confidence: float = DEFAULT_CONFIDENCE, allow_missing: bool = False,
                   names: tuple[str, str] = ("baseline", "candidate"), noise_name: str = "noise run",
                   higher_is_better: bool | None = None, equivalence: bool = False, exact: bool = False,
                   min_pages: int = MIN_PAGES, power: float = DEFAULT_POWER) -> Verdict:
    """``margin=None``: the registry's declared margin for ``metric``. ``higher_is_better`` (and a
    margin) for metrics outside the registry, e.g. lm-eval's. ``noise``: the baseline's scores from
    a second run on the same pages. Non-inferiority by default; ``equivalence`` is two-sided;
    ``exact`` passes only when every page's output text is identical."""
    test: TestName = "exact" if exact else "equivalence" if equivalence else "non_inferiority"
    c = Comparison.make(metric, margin=margin, higher_is_better=higher_is_better, test=test, seed=seed,
                        n_resamples=n_resamples, confidence=confidence, min_pages=min_pages, power=power)
    if equivalence and exact:
        raise InputError("--equivalence and --exact are different tests: pick one")
    _has_metric(baseline, metric, names[0])
    _has_metric(candidate, metric, names[1])
    if noise is not None:
        _has_metric(noise, metric, noise_name)
    pages, ids, missing = _pair(baseline, candidate, noise, metric, allow_missing, names, noise_name)
    if len(ids) < 2:
        raise InputError(f"metric {metric!r}: only {len(ids)} page(s) scored on both sides; need at least 2")
    b = np.array([baseline[i].value(metric) for i in ids], dtype=float)
    cand = np.array([candidate[i].value(metric) for i in ids], dtype=float)
    sign = 1.0 if c.higher_is_better else -1.0
    e = None if noise is None else sign * (np.array([noise[i].value(metric) for i in ids], float) - b)
    dec = decide(sign * (cand - b), c.margin, noise=e, confidence=confidence, n_resamples=n_resamples, seed=seed,
                 equivalence=equivalence, min_pages=min_pages, power=power)
    changed = pages_changed(baseline, candidate, pages, names, required=exact)
    verdict, reason, need = dec.verdict, dec.reason, dec.pages_needed
    if exact:  # the scores above are context; the verdict is the texts'
        verdict, reason = ("within_noise", "identical_outputs") if changed == 0 else ("not_equivalent", "outputs_differ")
        need = None
    return new_verdict(c, verdict=verdict, reason=reason, n=len(ids), baseline_mean=float(b.mean()),
                       candidate_mean=float(cand.mean()), delta=float((cand - b).mean()), lo=dec.ci_low, hi=dec.ci_high,
                       interval=dec.interval, p_regression=dec.p_regression, noise_floor=dec.noise_floor,
                       noise_delta=None if e is None or dec.noise_mean is None else sign * dec.noise_mean,
                       pages_needed=need, pages_changed=changed, pages_compared=None if changed is None else len(pages),
                       missing_pages=missing)


def compare_files(baseline: Path, candidate: Path, metric: str, noise: Path | None = None, **kw) -> Verdict:
    return compare_scores(read_scores(baseline), read_scores(candidate), metric,
                          noise=read_scores(noise) if noise else None, names=(str(baseline), str(candidate)),
                          noise_name=str(noise) if noise else "noise run", **kw)


__all__ = ["compare_files", "compare_scores", "pages_changed"]
