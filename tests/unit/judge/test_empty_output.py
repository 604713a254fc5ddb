"""A baseline's fitness is judged against what an empty output scores on the same pages, not only against the
metric's fixed floor: on pages whose checks are mostly "absent" rules, reading nothing passes many of them, so a
baseline that scores above the floor but no better than an empty output cannot read the pages (baseline_unfit,
said in its message), while one above both is judged as before. Also the verdict format's version step."""

import numpy as np
import pytest

from quantgate.judge import clustered as C
from quantgate.judge.compare import compare_scores
from quantgate.schema.metrics import METRICS
from quantgate.schema.scores import ScoreRow
from quantgate.schema.settings import VerdictSettings
from quantgate.schema.verdict import Verdict

N = 60  # pages, each its own document: above both minimums, so only fitness can stop the verdict
CHECKS = VerdictSettings(metric="checks", n_resamples=1000)
FLOOR = METRICS["checks"].baseline_floor


def _rows(values, metric="checks") -> dict[str, ScoreRow]:
    return {f"p{i:03d}": ScoreRow(page_id=f"p{i:03d}", **{metric: float(v)}) for i, v in enumerate(values)}


def _scores(mean: float, rng) -> np.ndarray:
    """Per-page check pass rates around ``mean`` (each page five checks)."""
    return np.clip(np.round(rng.normal(mean, 0.15, N) * 5) / 5, 0.0, 1.0)


def test_above_the_floor_but_no_better_than_reading_nothing_is_unfit():
    rng = np.random.default_rng(3)
    base = _scores(0.39, rng)
    empty = _scores(0.41, rng)  # the pages' absent checks, which an empty output passes
    assert base.mean() > FLOOR and base.mean() <= empty.mean()
    v = compare_scores(_rows(base), _rows(base), CHECKS, empty=_rows(empty))
    assert (v.verdict, v.reason) == ("inconclusive", "baseline_unfit")
    assert v.empty_output_mean == pytest.approx(empty.mean()) and v.baseline_score == pytest.approx(base.mean())
    assert v.baseline_floor == FLOOR and v.pages_needed is None  # no page count fixes a baseline that cannot read
    assert (f"the baseline scores {base.mean():.4f} on checks, no better than an empty output's {empty.mean():.4f} "
            "on the same pages") in v.message
    # the same scores without the empty output's: the fixed floor alone passes this baseline
    alone = compare_scores(_rows(base), _rows(base), CHECKS)
    assert alone.reason != "baseline_unfit" and alone.empty_output_mean is None


def test_above_the_floor_and_the_empty_output_is_judged_as_before():
    rng = np.random.default_rng(4)
    base, empty = _scores(0.8, rng), _scores(0.41, rng)
    v = compare_scores(_rows(base), _rows(base), CHECKS, empty=_rows(empty))
    before = compare_scores(_rows(base), _rows(base), CHECKS)
    assert v.reason == before.reason == "rare_failures_not_ruled_out"  # 60 identical pages: not yet enough
    assert v.empty_output_mean == pytest.approx(empty.mean())
    assert v.model_dump(exclude={"empty_output_mean"}) == before.model_dump(exclude={"empty_output_mean"})


def test_a_baseline_equal_to_the_empty_output_is_unfit():
    """No better than reading nothing includes exactly as good: the rule is strict."""
    rng = np.random.default_rng(5)
    base = _scores(0.6, rng)
    v = compare_scores(_rows(base), _rows(base), CHECKS, empty=_rows(base))
    assert v.reason == "baseline_unfit" and v.empty_output_mean == pytest.approx(base.mean())


def test_lower_is_better_metrics_mirror_the_rule():
    """ned: the baseline must be strictly below (better than) the empty output's ned as well as under its floor."""
    rng = np.random.default_rng(6)
    base = np.clip(rng.normal(0.30, 0.05, N), 0, 1)
    s = VerdictSettings(metric="ned", n_resamples=1000)
    assert base.mean() <= METRICS["ned"].baseline_floor
    worse_than_nothing = compare_scores(_rows(base, "ned"), _rows(base, "ned"), s, empty=_rows(base - 0.05, "ned"))
    assert worse_than_nothing.reason == "baseline_unfit" and "no better than an empty output's" in \
        worse_than_nothing.message
    fit = compare_scores(_rows(base, "ned"), _rows(base, "ned"), s, empty=_rows(np.ones(N), "ned"))
    assert fit.reason != "baseline_unfit" and fit.empty_output_mean == 1.0


def test_the_empty_output_must_cover_the_judged_pages():
    """An empty-output file that lacks a judged page is not "the same pages": fitness falls back to the floor."""
    rng = np.random.default_rng(7)
    base = _scores(0.39, rng)
    empty = _rows(np.full(N, 0.9))
    del empty["p007"]
    v = compare_scores(_rows(base), _rows(base), CHECKS, empty=empty)
    assert v.empty_output_mean is None and v.reason != "baseline_unfit"


def test_baseline_fit_is_vectorised_over_studies():
    scores = np.array([0.1, 0.3, 0.45, 0.5])
    assert C.baseline_fit(scores, 0.2, True, 0.45).tolist() == [False, False, False, True]
    assert C.baseline_fit(scores, 0.2, True).tolist() == [False, True, True, True]
    assert C.baseline_fit(scores, 0.5, False, 0.3).tolist() == [True, False, False, False]


def test_schema_4_verdicts_read_without_the_empty_output():
    row = compare_scores(_rows(np.full(N, 0.8)), _rows(np.full(N, 0.8)), CHECKS).model_dump()
    old = {k: v for k, v in row.items() if k != "empty_output_mean"} | {"schema_version": 4}
    back = Verdict.model_validate(old)
    assert back.schema_version == 5 and back.empty_output_mean is None and back.reason == row["reason"]
    with pytest.raises(ValueError):
        Verdict.model_validate(row | {"schema_version": 6})
