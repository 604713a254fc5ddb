"""The verdict on pages without truth: the bound alone passes only inside the margin and never calls a regression,
the rectified verdict uses only the pages drawn at random (hand-picked truth never enters it), a truth-free pass
needs the baseline shown to read on labeled pages, every page labeled is today's verdict unchanged, and the
excess's lower bound holds its level."""

import numpy as np
import pytest

from quantgate.judge import clustered as C
from quantgate.judge.compare import compare_scores
from quantgate.judge.truth_free import OutputPages, excess_lower, truth_free_verdict
from quantgate.schema.scores import ScoreRow
from quantgate.schema.settings import VerdictSettings
from quantgate.schema.verdict import Verdict

S = VerdictSettings(metric="ned", n_resamples=1000)


def _pages(bound, documents, damage=None, at_random=None, baseline=0.05) -> OutputPages:
    bound = np.asarray(bound, dtype=float)
    n = len(bound)
    damage = np.full(n, np.nan) if damage is None else np.asarray(damage, dtype=float)
    return OutputPages(ids=[f"p{i:05d}" for i in range(n)], documents=list(documents), bound=bound, damage=damage,
                       at_random=np.zeros(n, bool) if at_random is None else np.asarray(at_random, bool),
                       baseline_score=np.where(np.isnan(damage), np.nan, baseline), changed=bound > 0)


def _neutral_study(rng, labeled_docs: int, mean_bound: float, G: int = 600, n: int = 5):
    """G documents of n pages, 60% changed by edits that do no damage; the first ``labeled_docs`` documents'
    pages labeled (their damage 0)."""
    changed = rng.random(G * n) < 0.6
    bound = np.where(changed, mean_bound / 0.6, 0.0)
    docs = [f"d{i // n:04d}" for i in range(G * n)]
    labeled = np.arange(G * n) < labeled_docs * n
    return bound, docs, np.where(labeled, 0.0, np.nan), labeled


def test_hand_picked_truth_never_enters_the_rectified_estimate():
    """The same labeled pages pass as a random draw (the rectified verdict subtracts what the bound overstates)
    and do not as hand-picked truth: the bound alone is then the verdict, the sample's excess unused."""
    bound, docs, damage, labeled = _neutral_study(np.random.default_rng(1), 30, 0.011)
    drawn = truth_free_verdict(_pages(bound, docs, damage, at_random=labeled), S, None)
    assert (drawn.verdict, drawn.reason, drawn.method) == ("within_noise", "ci_inside_margin", "rectified")
    assert drawn.excess_lower > 0.001 and drawn.bound_upper > S.margin  # only the rectified path can pass it
    picked = truth_free_verdict(_pages(bound, docs, damage, at_random=np.zeros(len(bound), bool)), S, None)
    assert picked.method == "bound" and picked.excess_lower is None and picked.pages_at_random == 0
    assert picked.verdict == "inconclusive"
    assert picked.mean_bound == drawn.mean_bound and picked.pages_with_truth == drawn.pages_with_truth == 150


def test_few_documents_drawn_leave_the_bound_its_whole_alpha():
    bound, docs, damage, labeled = _neutral_study(np.random.default_rng(2), 10, 0.004)
    v = truth_free_verdict(_pages(bound, docs, damage, at_random=labeled), S, None)
    assert v.method == "bound" and v.verdict == "within_noise" and v.excess_lower is None
    assert v.pages_without_truth == 2950 and v.documents_with_truth == 10 and v.documents_without_truth == 590


def test_a_truth_free_pass_needs_the_baseline_shown_on_labeled_pages():
    docs = [f"d{i}" for i in range(400)]
    zeros = np.zeros(400)
    for n_labeled, want in ((19, "baseline_unchecked"), (20, "identical_outputs")):
        damage = np.where(np.arange(400) < n_labeled, 0.0, np.nan)
        v = truth_free_verdict(_pages(zeros, docs, damage), S, None)
        assert v.reason == want and v.verdict == ("within_noise" if want == "identical_outputs" else "inconclusive")
        assert "label-sample" in v.message or want == "identical_outputs"
    fives = [f"d{i // 5}" for i in range(2000)]  # 400 documents of 5: 30 labeled pages in 6 of them
    v = truth_free_verdict(_pages(np.zeros(2000), fives, np.where(np.arange(2000) < 30, 0.0, np.nan)), S, None)
    assert v.reason == "baseline_unchecked" and v.documents_with_truth == 6
    unfit = truth_free_verdict(_pages(zeros, docs, np.where(np.arange(400) < 30, 0.0, np.nan), baseline=0.8), S, None)
    assert (unfit.verdict, unfit.reason) == ("inconclusive", "baseline_unfit")
    nothing = truth_free_verdict(_pages(zeros, docs), S, None)
    assert nothing.reason == "baseline_unchecked" and nothing.pages_with_truth == 0


def test_the_bound_never_calls_a_regression_and_truth_does():
    rng = np.random.default_rng(3)
    docs = [f"d{i}" for i in range(400)]
    bound = rng.uniform(0.1, 0.3, 400)  # outputs that differ a lot: the damage could be anything up to that
    v = truth_free_verdict(_pages(bound, docs), S, None)
    assert (v.verdict, v.reason, v.method) == ("inconclusive", "bound_exceeds_margin", "bound")
    assert "label pages at random" in v.message
    rows = ({f"p{i:05d}": ScoreRow(page_id=f"p{i:05d}", ned=0.05) for i in range(60)},
            {f"p{i:05d}": ScoreRow(page_id=f"p{i:05d}", ned=0.05 + rng.uniform(0.05, 0.1)) for i in range(60)})
    labeled = compare_scores(*rows, S)
    assert labeled.verdict == "regression"
    v = truth_free_verdict(_pages(bound, docs, np.where(np.arange(400) < 60, 0.07, np.nan)), S, labeled)
    assert (v.verdict, v.method, v.pages_without_truth) == ("regression", "labeled", 340)


def test_every_page_labeled_is_todays_verdict():
    rng = np.random.default_rng(4)
    base = {f"p{i:05d}": ScoreRow(page_id=f"p{i:05d}", ned=float(x)) for i, x in enumerate(rng.uniform(0, .2, 500))}
    cand = {k: ScoreRow(page_id=k, ned=r.ned + float(rng.normal(0, 0.002))) for k, r in base.items()}
    today = compare_scores(base, cand, S)
    damage = np.array([cand[k].ned - base[k].ned for k in base])
    v = truth_free_verdict(_pages(np.abs(damage) * 2, list(base), damage), S, today)
    assert v.method == "labeled" and v.pages_without_truth == 0
    assert v.model_dump(exclude=set(Verdict.model_fields) - set(today.model_dump(exclude_none=True))) == \
        today.model_dump(exclude_none=True)


def test_excess_lower_bound_holds_its_level():
    """A skewed excess (most pages overstate a little, a few a lot): the lower bound at 5% stays below the true mean
    in at least 95% of 300 draws of 30 documents (binomial slack: at least 276)."""
    rng = np.random.default_rng(5)
    true_mean = 0.9 * 0.004 + 0.1 * 0.1
    below = 0
    for s in range(300):
        x = np.where(rng.random(150) < 0.1, 0.1, 0.004) * rng.uniform(0.5, 1.5, 150)
        docs = [f"d{i // 5}" for i in range(150)]
        p = _pages(x, docs, np.zeros(150), at_random=np.ones(150, bool))
        below += excess_lower(p, 0.05, s) <= true_mean
    assert below >= 276


def test_a_bound_below_the_damage_is_refused():
    p = _pages([0.1, 0.0, 0.2], ["a", "b", "c"], [0.05, 0.02, 0.1], at_random=[True, True, True])
    with pytest.raises(ValueError, match="page 'p00001'"):
        excess_lower(p, 0.05, 0)


def test_schema_3_verdicts_still_read():
    row = compare_scores({f"p{i}": ScoreRow(page_id=f"p{i}", ned=0.1) for i in range(40)},
                         {f"p{i}": ScoreRow(page_id=f"p{i}", ned=0.1) for i in range(40)}, S).model_dump()
    old = {k: v for k, v in row.items() if k not in ("method", "mean_bound", "bound_upper", "excess_lower",
                                                     "pages_with_truth", "pages_without_truth", "documents_with_truth",
                                                     "documents_without_truth", "pages_at_random",
                                                     "noise_mean_bound", "noise_flips")}
    back = Verdict.model_validate({**old, "schema_version": 3})
    assert back.schema_version == 5 and back.method is None and back.verdict == row["verdict"]


def test_a_page_count_says_where_it_comes_from():
    v = compare_scores({f"p{i}": ScoreRow(page_id=f"p{i}", ned=0.1) for i in range(20)},
                       {f"p{i}": ScoreRow(page_id=f"p{i}", ned=0.1 + 0.001 * (i % 3)) for i in range(20)}, S)
    assert v.reason == "too_few_pages"
    assert "(1 - 1/100)^n" in v.message and f"takes {C.rare_failure_count(0.01, 1.0)} pages" in v.message


def test_pages_without_truth_are_judged_by_non_inferiority_only():
    """A bound says how much worse the candidate can be, never how much better: no equivalence without truth."""
    p = _pages(np.zeros(400), [f"d{i}" for i in range(400)], np.where(np.arange(400) < 30, 0.0, np.nan))
    with pytest.raises(ValueError, match="non-inferiority only"):
        truth_free_verdict(p, VerdictSettings(metric="ned", n_resamples=1000, test="equivalence"), None)
    assert truth_free_verdict(p, S, None).verdict == "within_noise"


@pytest.mark.parametrize("G, want", [(510, "within_noise"), (120, "inconclusive")])
def test_a_lone_changed_page_passes_on_the_bounded_test_once_the_counts_allow(G, want):
    """One changed page among G single-page documents leaves the bootstrap's worse end without spread
    ("unbounded"); B in [0, range] makes the betting test exact on its own, so with the rare-failure counts met
    (about 300 documents at ned's margin) it decides — and with too few documents it cannot pass."""
    bound = np.zeros(G)
    bound[7] = 0.3
    damage = np.where(np.arange(G) < 40, 0.0, np.nan)
    v = truth_free_verdict(_pages(bound, [f"d{i}" for i in range(G)], damage), S, None)
    assert v.verdict == want
    if want == "within_noise":
        assert (v.reason, v.lower_bound_from) == ("ci_inside_margin", "bounded_test")
        assert v.mean_bound < v.bound_upper < S.margin and v.p_noninferiority <= 0.05
    else:
        assert v.reason in ("rare_failures_not_ruled_out", "ci_straddles_margin")
