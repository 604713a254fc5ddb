"""Pair two score files by page and give the verdict for one metric; Holm-adjust a family of them."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from quantgate.errors import InputError
from quantgate.judge.stats import (
    DEFAULT_CONFIDENCE,
    DEFAULT_POWER,
    DEFAULT_RESAMPLES,
    MIN_PAGES,
    MIN_RESAMPLES,
    decide,
    holm,
)
from quantgate.schema.run import Verdict
from quantgate.score.metrics import REGISTRY, check_margin, get_metric
from quantgate.score.scores import read_scores

POWER_METHOD = "normal approximation at the observed mean; spread from the interval, at least the pages' sd"


def _listing(ids) -> str:
    ids = sorted(ids)
    return f"{ids[:10]}" + (f" and {len(ids) - 10} more" if len(ids) > 10 else "")


def _differ(a: set, b: set, names: tuple[str, str], hint: str) -> str:
    sides = [f"{len(x)} only in {which} {_listing(x)}" for x, which in ((a - b, "the first"), (b - a, "the second"))
             if x]
    return f"pages differ between {names[0]} and {names[1]}: {', '.join(sides)}; {hint}"


def _has_metric(rows: dict[str, dict], metric: str, name: str) -> None:
    if not any(r.get(metric) is not None for r in rows.values()):
        have = sorted({k for r in rows.values() for k in r if k in REGISTRY})
        raise InputError(f"{name}: no page has a value for {metric!r} (this file has: {', '.join(have) or 'none'}); "
                         "score it with that metric or pick one it has")


def _pair(baseline, candidate, noise, metric, allow_missing, names, noise_name):
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
    ids = sorted(i for i in common if baseline[i].get(metric) is not None and candidate[i].get(metric) is not None)
    if noise is not None:
        gaps = [i for i in ids if noise[i].get(metric) is None]
        if gaps:
            raise InputError(f"{noise_name}: no {metric} for {len(gaps)} page(s) the comparison has: {_listing(gaps)}; "
                             "the noise run must be scored with the same metrics on the same pages")
    return sorted(common), ids, missing


def _changed(baseline, candidate, pages, names, required: bool) -> int | None:
    """Pages whose output text differs, by the score rows' output_sha256 (a page without output
    counts as changed). None when a file predates output hashes (an error if ``required``)."""
    for rows, name in ((baseline, names[0]), (candidate, names[1])):
        if not any("output_sha256" in rows[i] for i in pages):
            if required:
                raise InputError(f"{name}: no output_sha256 in its rows (scored before quantgate recorded output "
                                 "hashes); re-score it with `quantgate score` to use --exact")
            return None
    return sum(1 for i in pages if baseline[i].get("output_sha256") is None
               or baseline[i].get("output_sha256") != candidate[i].get("output_sha256"))


def _validate(metric, margin, seed, n_resamples, confidence, min_pages, equivalence, exact):
    if margin is None:
        if metric not in REGISTRY:
            raise InputError(f"metric {metric!r} is not in quantgate's registry, so it has no default margin: "
                             "give one in its units")
        margin, source = REGISTRY[metric].margin, "registry"
    else:
        source = "given"
    margin = check_margin(metric, margin, where=f"margin for {metric}")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise InputError(f"seed {seed!r}: must be an integer >= 0")
    if isinstance(n_resamples, bool) or not isinstance(n_resamples, int) or n_resamples < MIN_RESAMPLES:
        raise InputError(f"resamples {n_resamples!r}: must be an integer >= {MIN_RESAMPLES} (a 5% tail needs at "
                         f"least ~1,000 resamples; the default is {DEFAULT_RESAMPLES})")
    if not (isinstance(confidence, float) and 0.5 <= confidence < 1):
        raise InputError(f"confidence {confidence!r}: must be in [0.5, 1)")
    if isinstance(min_pages, bool) or not isinstance(min_pages, int) or min_pages < 2:
        raise InputError(f"min_pages {min_pages!r}: must be an integer >= 2")
    if equivalence and exact:
        raise InputError("--equivalence and --exact are different tests: pick one")
    return margin, source


def compare_scores(baseline: dict[str, dict], candidate: dict[str, dict], metric: str, *,
                   noise: dict[str, dict] | None = None, margin: float | None = None, seed: int = 0,
                   n_resamples: int = DEFAULT_RESAMPLES, confidence: float = DEFAULT_CONFIDENCE,
                   allow_missing: bool = False, names: tuple[str, str] = ("baseline", "candidate"),
                   noise_name: str = "noise run", higher_is_better: bool | None = None, equivalence: bool = False,
                   exact: bool = False, min_pages: int = MIN_PAGES, power: float = DEFAULT_POWER) -> Verdict:
    """``margin=None``: the registry's declared margin for ``metric``. ``higher_is_better`` (and a
    margin) for metrics outside the registry, e.g. lm-eval's. ``noise``: the baseline's scores from
    a second run on the same pages. Non-inferiority by default; ``equivalence`` is two-sided;
    ``exact`` passes only when every page's output text is identical."""
    margin, source = _validate(metric, margin, seed, n_resamples, confidence, min_pages, equivalence, exact)
    hib = get_metric(metric).higher_is_better if higher_is_better is None else higher_is_better
    _has_metric(baseline, metric, names[0])
    _has_metric(candidate, metric, names[1])
    if noise is not None:
        _has_metric(noise, metric, noise_name)
    pages, ids, missing = _pair(baseline, candidate, noise, metric, allow_missing, names, noise_name)
    if len(ids) < 2:
        raise InputError(f"metric {metric!r}: only {len(ids)} page(s) scored on both sides; need at least 2")
    b = np.array([baseline[i][metric] for i in ids], dtype=float)
    c = np.array([candidate[i][metric] for i in ids], dtype=float)
    sign = 1.0 if hib else -1.0
    e = None if noise is None else sign * (np.array([noise[i][metric] for i in ids], float) - b)
    dec = decide(sign * (c - b), margin, noise=e, confidence=confidence, n_resamples=n_resamples, seed=seed,
                 equivalence=equivalence, min_pages=min_pages, power=power)
    changed = _changed(baseline, candidate, pages, names, required=exact)
    verdict, reason, need = dec.verdict, dec.reason, dec.pages_needed
    if exact:  # the scores above are context; the verdict is the texts'
        verdict, reason = ("within_noise", "identical_outputs") if changed == 0 else ("not_equivalent", "outputs_differ")
        need = None
    lo, hi = (dec.ci_low, dec.ci_high) if hib else (-dec.ci_high, -dec.ci_low)
    alpha = (1 - confidence) / 2
    v = Verdict(metric=metric, higher_is_better=hib, verdict=verdict, reason=reason,
                test="exact" if exact else "equivalence" if equivalence else "non_inferiority", message="",
                n=len(ids), baseline_mean=float(b.mean()), candidate_mean=float(c.mean()),
                delta=_clean(float((c - b).mean())), ci_low=_clean(lo), ci_high=_clean(hi), confidence=confidence,
                alpha=alpha, interval=dec.interval, margin=margin, requested_margin=margin, margin_source=source,
                noise_floor=dec.noise_floor, noise_delta=None if e is None else _clean(sign * dec.noise_mean),
                seed=seed, n_resamples=n_resamples, min_pages=min_pages, power=power,
                pages_needed=need, pages_needed_method=POWER_METHOD,
                p_regression=dec.p_regression, p_noninferiority=1 - dec.p_regression,
                pages_changed=changed, pages_compared=None if changed is None else len(pages), missing_pages=missing)
    return v.model_copy(update={"message": explain(v, dec.ci_low, dec.ci_high)})


def _clean(x: float) -> float:
    """No "-0.0000" in reports: rounding residue of the resampling is not a shift."""
    return 0.0 if abs(x) < 1e-13 else x + 0.0


def explain(v: Verdict, lo: float, hi: float) -> str:
    """One sentence: what the verdict rests on and, when it does not decide, what to do. ``lo``/``hi``
    are the oriented bounds (higher is better)."""
    one = f"one-sided {(1 - v.alpha) * 100:.4g}%"  # 95%; a sequential look's nominal level, e.g. 99.99%
    m = v.margin
    if v.reason == "outputs_differ":
        return f"{v.pages_changed} of {v.pages_compared} pages' outputs differ; --exact passes only identical outputs"
    if v.reason == "identical_outputs":
        return ("every page's output is byte-identical" if v.test == "exact"
                else "every page scored exactly the same on both sides")
    if v.reason == "too_few_pages":
        return (f"{v.n} paired pages, below the minimum of {v.min_pages} for a calibrated interval: "
                f"score at least {v.pages_needed} pages")
    if v.reason == "noise_exceeds_margin":
        fix = (f"score more pages (about {v.pages_needed} would bring the floor under the margin at "
               f"{v.power:.0%} power)" if v.pages_needed else
               f"more pages will not help: the baseline's own mean shift, {abs(v.noise_delta):.4f}, reaches the margin")
        return (f"the baseline moves up to {v.noise_floor:.4f} against itself (noise floor, {one} bound), more than "
                f"the margin {m:.4f}, so a pass would not mean the candidate is as good: declare a larger margin, "
                f"{fix}, or serve batch-invariantly so that re-runs agree")
    if v.reason == "ci_inside_margin":
        worse = f"at worst {max(0.0, -lo):.4f} worse than the baseline ({one} bound)"
        if v.test == "equivalence":
            return f"{worse} and at most {max(0.0, hi):.4f} better: both inside ±{m:.4f}"
        return f"{worse}, inside the margin {m:.4f}"
    if v.reason == "ci_beyond_margin":
        if v.verdict == "not_equivalent":
            return (f"at least {lo:.4f} better than the baseline ({one} bound), beyond the margin {m:.4f}: "
                    "the equivalence test fails a candidate that differs in either direction")
        return f"at least {-hi:.4f} worse than the baseline ({one} bound), beyond the margin {m:.4f}"
    need = (f"about {v.pages_needed} pages would decide it at {v.power:.0%} power ({v.pages_needed_method})"
            if v.pages_needed else "the observed shift sits on the margin: no number of pages decides it")
    return f"the {v.confidence:.0%} interval crosses the margin {m:.4f}; {need}"


def compare_files(baseline: Path, candidate: Path, metric: str, noise: Path | None = None, **kw) -> Verdict:
    return compare_scores(read_scores(baseline), read_scores(candidate), metric,
                          noise=read_scores(noise) if noise else None, names=(str(baseline), str(candidate)),
                          noise_name=str(noise) if noise else "noise run", **kw)


def adjust_family(verdicts: list[Verdict]) -> list[Verdict]:
    """Holm-adjusted regression p-values over a family (e.g. every variant × metric of a study):
    calling a regression where ``p_regression_holm <= alpha`` keeps the chance of any false
    regression call in the family at most alpha. The pass side needs no adjustment: a gate that
    passes only when every verdict passes is an intersection–union test, at level alpha as it is."""
    adj = holm([v.p_regression for v in verdicts])
    return [v.model_copy(update={"p_regression_holm": a}) for v, a in zip(verdicts, adj, strict=True)]


def holm_regressions(verdicts: list[Verdict]) -> list[bool]:
    """Which verdicts stay regressions after Holm's adjustment over the family (the verdict itself
    must be a regression: too few pages or a noisy baseline never become one)."""
    return [v.verdict == "regression" and p <= v.alpha
            for v, p in zip(verdicts, holm([v.p_regression for v in verdicts]), strict=True)]


__all__ = ["adjust_family", "compare_files", "compare_scores", "explain", "holm_regressions"]
