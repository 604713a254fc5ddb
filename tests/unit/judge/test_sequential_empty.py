"""A sequential pass judges the baseline's fitness as the fixed design does: at every look, a baseline whose mean
on the look's pages is no better than what an empty output scores on the same pages is ``baseline_unfit`` —
never decisive, so the pass runs to its page budget — and the verdict row states both numbers. Exactly at the
empty output's mean is unfit (the rule is strict), just better is judged as before; for a lower-is-better
metric (ned, where an empty output scores the worst value) the rule mirrors."""

import numpy as np
import pytest

from quantgate.judge.compare import compare_scores
from quantgate.judge.replay import Candidate, Plan, replay, replay_family
from quantgate.schema.scores import ScoreRow
from quantgate.schema.settings import VerdictSettings

IDS = [f"p{i:02d}" for i in range(40)]
PLAN = Plan(IDS, [20, 40], 40, IDS)
# a declared worst page damage of two margins: five identical pages rule out rare failures, so a fit baseline's
# identical candidate passes at the first look and only fitness can keep a look from deciding
CHECKS = {"checks": VerdictSettings(metric="checks", margin=0.05, worst_page_damage=0.1, n_resamples=1000,
                                    min_pages=10, min_documents=10)}
NED = {"ned": VerdictSettings(metric="ned", margin=0.02, worst_page_damage=0.04, n_resamples=1000, min_pages=10,
                              min_documents=10)}


def _rows(values, metric: str) -> dict[str, ScoreRow]:
    return {i: ScoreRow.model_validate({"page_id": i, metric: float(v)}) for i, v in zip(IDS, values, strict=True)}


def _checks_base() -> np.ndarray:
    rng = np.random.default_rng(11)
    return np.round(rng.uniform(0.3, 0.9, 40) * 5) / 5  # five checks a page, well above the floor of 0.2


def _family(settings, base, empty):
    metric = next(iter(settings))
    sides = (_rows(base, metric), _rows(base, metric), None)  # the candidate scores what the baseline scores
    state, family = replay_family(settings, "obrien_fleming", PLAN, [Candidate("cand", sides)], [],
                                  None if empty is None else _rows(empty, metric))
    assert family is not None
    return state["cand"][0], family[0]


@pytest.mark.parametrize("shift, unfit", [(0.0, True), (0.01, True), (-0.01, False)])
def test_checks_at_above_and_below_the_empty_output(shift, unfit):
    """``shift``: how much more an empty output scores than the baseline on every page (at it, above it: unfit)."""
    base = _checks_base()
    empty = base + shift
    dec, row = _family(CHECKS, base, empty)
    m = dec.metrics["checks"]
    assert row.baseline_score == pytest.approx(base.mean()) and row.empty_output_mean == pytest.approx(empty.mean())
    if unfit:
        assert (m.reason, m.decisive, m.decided_at_look) == ("baseline_unfit", False, None)
        assert dec.stop_reason == "page_budget" and dec.pages_used == 40  # no look could decide: the whole budget
        assert (row.verdict, row.reason) == ("inconclusive", "baseline_unfit")
        assert (f"the baseline scores {base.mean():.4f} on checks, no better than an empty output's "
                f"{empty.mean():.4f} on the same pages") in row.message
    else:
        assert (m.verdict, m.decided_at_look, dec.stop_reason) == ("within_noise", 1, "all_decisive")
        assert row.reason != "baseline_unfit"
        # at look 1 the row's numbers are the first 20 pages'
        assert row.empty_output_mean == pytest.approx(empty[:20].mean())


def test_the_floor_alone_passes_what_the_empty_output_refuses():
    """The same pages without the empty output's scores: above the fixed floor, the pass decides at look 1."""
    base = _checks_base()
    dec, row = _family(CHECKS, base, None)
    assert dec.metrics["checks"].verdict == "within_noise" and dec.look == 1
    assert row.empty_output_mean is None and row.baseline_score == pytest.approx(base[:20].mean())


@pytest.mark.parametrize("shift, unfit", [(0.0, True), (-0.01, True), (0.01, False)])
def test_ned_mirrors_the_rule(shift, unfit):
    """ned, lower is better: the baseline must score strictly below what an empty output scores."""
    rng = np.random.default_rng(12)
    base = rng.uniform(0.05, 0.15, 40)
    empty = base + shift
    dec, row = _family(NED, base, empty)
    assert (dec.metrics["ned"].reason == "baseline_unfit") is unfit and (row.reason == "baseline_unfit") is unfit
    assert row.empty_output_mean is not None and row.baseline_score is not None
    assert (row.baseline_score >= row.empty_output_mean) is unfit


def test_ned_against_a_real_empty_output_is_fit():
    """An empty output's ned is 1 on every page with text (the worst value): any reading baseline beats it."""
    base = np.random.default_rng(13).uniform(0.05, 0.15, 40)
    dec, row = _family(NED, base, np.ones(40))
    assert dec.metrics["ned"].verdict == "within_noise" and row.empty_output_mean == 1.0


def test_each_look_judges_its_own_pages():
    """An empty output that scores more than the baseline on the first look's pages but less over the whole budget:
    look 1 is unfit, look 2 decides — the mark is the empty output's mean on each look's pages, as the fixed verdict
    takes it on its pages."""
    base = np.full(40, 0.6)
    empty = np.concatenate([np.full(20, 0.6), np.full(20, 0.2)])  # means: 0.6 on 20 pages, 0.4 on 40
    dec, row = _family(CHECKS, base, empty)
    assert dec.metrics["checks"].decided_at_look == 2 and dec.metrics["checks"].verdict == "within_noise"
    first, _ = replay(CHECKS, "obrien_fleming", Plan(IDS[:20], [20], 20, IDS[:20]),
                      (_rows(base, "checks"), _rows(base, "checks"), None), _rows(empty, "checks"))
    assert first is not None and first.metrics["checks"].reason == "baseline_unfit"
    assert row.empty_output_mean == pytest.approx(0.4)


def test_the_last_look_agrees_with_the_fixed_verdict_on_its_pages():
    """The sequential row's fitness numbers are the fixed design's on the same pages (one rule, one mean)."""
    base = _checks_base()
    empty = base + 0.01
    _, row = _family(CHECKS, base, empty)
    fixed = compare_scores(_rows(base, "checks"), _rows(base, "checks"), CHECKS["checks"],
                           empty=_rows(empty, "checks"))
    assert (fixed.reason, row.reason) == ("baseline_unfit", "baseline_unfit")
    assert (fixed.baseline_score, fixed.empty_output_mean) == (row.baseline_score, row.empty_output_mean)


def test_an_empty_output_missing_a_page_is_not_the_same_pages():
    """Empty-output rows without one of a look's pages: that look's fitness falls back to the floor."""
    base = _checks_base()
    empty = _rows(base, "checks")
    del empty["p03"]
    dec, _ = replay(CHECKS, "obrien_fleming", PLAN, (_rows(base, "checks"), _rows(base, "checks"), None), empty)
    assert dec is not None and dec.metrics["checks"].verdict == "within_noise"
