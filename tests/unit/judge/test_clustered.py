"""Documents as the statistical unit. Known answers: one page per document is quantgate's page
bootstrap; the Student-t end on equal documents is scipy's t interval of document means; Kish's design
effect on constructed documents; the rare-failure count and the bounded test on identical scores; every
new reason; the planning alternative; the seeded document order; the quick calibration."""

import math
import sys
import time
from dataclasses import asdict

import numpy as np
import pytest
from scipy import stats as sps

from quantgate.errors import InputError
from quantgate.judge import clustered as C
from quantgate.judge import stats as st
from quantgate.schema.settings import VerdictSettings
from tests.support.paths import REPO

M = 0.01


def _pages(x):
    x = np.atleast_2d(np.asarray(x, dtype=float))
    return C.Documents(np.ones_like(x), x, x * x, x.copy())


def _docs_of(values_by_doc):
    d = np.concatenate(values_by_doc)
    ids = [f"doc{i:03d}" for i, v in enumerate(values_by_doc) for _ in v]
    return d, ids


# --- the interval against known answers -----------------------------------------------------------

@pytest.mark.parametrize("n", [30, 57, 200])
def test_one_page_per_document_is_the_page_bootstrap(n):
    rng = np.random.default_rng(n)
    x = np.where(rng.random((6, n)) < 0.5, 0.0, rng.normal(-0.01, 0.05, (6, n)))
    page = st.paired_bounds(x, M, 0.05, list(st.resample_indices(n, 4000, 7)))
    assert (page.method == st.INTERVALS.index("studentized_hall")).all()  # the Hall-studentized interval, not a fallback
    doc = C.cluster_bounds(_pages(x), M, 0.05, list(C.resample_counts(n, 4000, 7)))
    np.testing.assert_allclose(doc.lo_hall, page.lo, rtol=0, atol=1e-13)
    np.testing.assert_allclose(doc.hi_hall, page.hi, rtol=0, atol=1e-13)
    np.testing.assert_allclose(doc.p_regression_hall, page.p_regression, rtol=0, atol=1e-12)


def test_resample_counts_are_the_page_resamples_chunked(monkeypatch):
    idx = np.concatenate(list(st.resample_indices(37, 3001, 5)))
    want = np.stack([np.bincount(r, minlength=37) for r in idx])
    monkeypatch.setattr(C, "_CHUNK_ELEMENTS", 37 * 7)  # chunks of 7 resamples: the stream must not change
    got = np.concatenate(list(C.resample_counts(37, 3001, 5)))
    assert got.shape == (3001, 37) and (got == want).all()


def test_student_t_end_on_equal_documents_is_scipys_t_interval_of_document_means():
    rng = np.random.default_rng(2)
    per_doc = [rng.normal(rng.normal(0, 0.02), 0.03, 8) for _ in range(25)]
    d, ids = _docs_of(per_doc)
    docs, _ = C.documents_of(d, ids)
    b = C.cluster_bounds(docs, M, 0.05, list(C.resample_counts(25, 2000, 1)))
    ci = sps.ttest_1samp([v.mean() for v in per_doc], 0).confidence_interval(0.90)
    assert b.lo_t[0] == pytest.approx(ci.low, abs=1e-14)
    assert b.hi_t[0] == pytest.approx(ci.high, abs=1e-14)
    assert b.lo[0] <= b.lo_t[0] and b.lo[0] <= b.lo_hall[0] and b.hi[0] >= max(b.hi_t[0], b.hi_hall[0])


def test_documents_not_pages_are_resampled():
    """The same 200 pages judged as 20 documents of alike pages give a wider interval than as 200 pages."""
    rng = np.random.default_rng(4)
    per_doc = [np.full(10, rng.normal(0, 0.03)) + rng.normal(0, 0.002, 10) for _ in range(20)]
    d, ids = _docs_of(per_doc)
    as_docs = C.decide(d, ids, _settings(n_resamples=2000))
    as_pages = C.decide(d, [f"p{i}" for i in range(len(d))], _settings(n_resamples=2000))
    assert as_docs.documents == 20 and as_pages.documents == 200
    assert (as_docs.mean - as_docs.ci_low) > 2.5 * (as_pages.mean - as_pages.ci_low)
    assert as_docs.design_effect > 8


def test_kish_design_effect_on_constructed_documents():
    # every page of a document has the document's value: deff = (N − 1)/(G − 1) exactly (Kish: 1 + (b − 1)·1)
    values = np.linspace(-0.05, 0.04, 12)
    d, ids = _docs_of([np.full(5, v) for v in values])
    cl = C.cluster_summary(C.documents_of(d, ids)[0])
    assert cl.design_effect[0] == pytest.approx((60 - 1) / (12 - 1), rel=1e-12)
    assert cl.effective_n[0] == pytest.approx(60 / ((60 - 1) / (12 - 1)), rel=1e-12)
    # documents whose totals are all equal (negative intra-document correlation): deff 0, effective n capped at N
    d2, ids2 = _docs_of([np.array([0.02, -0.02, 0.01, -0.01]) for _ in range(10)])
    cl2 = C.cluster_summary(C.documents_of(d2, ids2)[0])
    assert cl2.design_effect[0] == pytest.approx(0.0, abs=1e-12) and cl2.effective_n[0] == 40
    # unequal documents: a failure of the largest ones counts against the document rule
    d3, ids3 = _docs_of([np.zeros(5), np.zeros(15), np.zeros(10)])
    cl3 = C.cluster_summary(C.documents_of(d3, ids3)[0])
    assert cl3.largest_document[0] == 15 and cl3.size_ratio[0] == pytest.approx(1.5)
    assert C.documents_rule(M, 0.2, cl3.size_ratio)[0] == C.rare_failure_count(M, 0.3) == 89


def test_the_order_of_pages_does_not_change_the_verdict():
    rng = np.random.default_rng(8)
    d, ids = _docs_of([rng.normal(0.002, 0.02, rng.integers(3, 9)) for _ in range(60)])
    perm = rng.permutation(len(d))
    a = asdict(C.decide(d, ids, _settings(n_resamples=1000, seed=3)))
    b = asdict(C.decide(d[perm], [ids[i] for i in perm], _settings(n_resamples=1000, seed=3)))
    assert a.keys() == b.keys()
    for k in a:  # the same verdict; numbers to rounding (sums over pages in another order)
        assert a[k] == (pytest.approx(b[k], rel=1e-9, abs=1e-15) if isinstance(a[k], float) else b[k]), k


# --- rare failures -----------------------------------------------------------------------------

def test_rare_failure_count_known_values():
    assert C.rare_failure_count(0.01, 1.0) == 299  # "about 300 for outright failure"
    assert C.rare_failure_count(0.01, 0.3) == 89  # "90 pages for D = 0.3"
    assert C.rare_failure_count(0.02, 1.0) == 149  # checks at its registry margin
    for m, D in ((0.01, 1.0), (0.01, 0.3), (0.02, 0.05), (0.005, 0.7)):
        n = C.rare_failure_count(m, D)
        assert (1 - m / D) ** n <= 0.05 < (1 - m / D) ** (n - 1)  # the smallest n that sees the failure
        if m / D <= 0.05:
            assert abs(n - 3 * D / m) / (3 * D / m) < 0.02  # ≈ 3·D/m where the failure is rare
    assert list(C.rare_failure_count(0.01, [1.0, 0.3], [0.05, 0.01])) == [299, 136]
    with pytest.raises(ValueError, match="must exceed the margin"):
        C.rare_failure_count(0.01, 0.01)


def test_bounded_test_on_identical_scores_stakes_at_its_cap():
    # every stake at 0.9/(D − m): 1/α after ⌈ln 20 / ln(1 + 0.9·m/(D − m))⌉ = 332 pages (count rule: 299)
    need = math.ceil(math.log(20) / math.log1p(0.9 * M / (1 - M)))
    assert need == 332
    lw = C.log_wealth(_pages(np.zeros((1, 400))), M, np.array([1.0]))[0]
    assert lw[need - 1] >= math.log(20) > lw[need - 2]
    docs, _ = C.documents_of(*_docs_of([np.zeros(10) for _ in range(120)]))  # equal documents of 10 pages
    lw_doc = C.log_wealth(docs, M, np.array([0.3]))[0]
    need_doc = math.ceil(math.log(20) / math.log1p(0.9 * M / (0.3 - M)))
    assert lw_doc[need_doc - 1] >= math.log(20) > lw_doc[need_doc - 2]
    # one outright failure costs ln 10 of the log wealth, not all of it
    x = np.zeros((1, 400))
    x[0, 100] = -1.0
    lw_fail = C.log_wealth(_pages(x), M, np.array([1.0]))[0]
    assert lw_fail[100] - lw_fail[99] == pytest.approx(math.log(0.1), rel=1e-9)


def test_identical_scores_pass_exactly_at_the_count_rule():
    assert _decide(np.zeros(299), outputs_identical=True).reason == "identical_outputs"
    assert _decide(np.zeros(298), outputs_identical=True).reason == "rare_failures_not_ruled_out"


def test_bounded_test_keeps_alpha_where_the_interval_does_not():
    """The hardest failure to see: pages ruined (d = −1) with probability m, 400 pages, true mean −m."""
    rng = np.random.default_rng(11)
    x = np.where(rng.random((3000, 400)) < M, -1.0, 0.0)
    lw = C.log_wealth(_pages(x), M, np.ones(3000))[:, -1]
    rate = np.mean(lw >= math.log(20))
    assert rate <= 0.05 + 3 * math.sqrt(0.05 * 0.95 / 3000)
    seen_none = np.mean((x == 0).all(axis=1))
    assert rate == pytest.approx(seen_none, abs=0.01)  # it passes only studies that drew no failure


# --- reasons -----------------------------------------------------------------------------------

EVIDENCE = {"outputs_identical", "baseline_score", "noise", "damage_ceiling", "look_alpha", "order_seed"}


def _settings(**kw) -> VerdictSettings:
    return VerdictSettings(metric="ned", margin=M, **{"n_resamples": 1000} | kw)


def _decide(d, ids=None, **kw):
    """``clustered.decide`` on pages ``d`` (each its own document unless ``ids``): settings and evidence by name."""
    ids = [f"p{i:04d}" for i in range(len(d))] if ids is None else ids
    evidence = C.Evidence(**{k: v for k, v in kw.items() if k in EVIDENCE})
    return C.decide(np.asarray(d, float), ids, _settings(**{k: v for k, v in kw.items() if k not in EVIDENCE}),
                    evidence)


def test_identical_outputs_and_identical_scores():
    zeros = np.zeros(400)
    a = _decide(zeros, outputs_identical=True)
    b = _decide(zeros, outputs_identical=False)
    assert (a.verdict, a.reason) == ("within_noise", "identical_outputs")
    assert (b.verdict, b.reason) == ("within_noise", "identical_scores")


def test_identical_outputs_below_the_rare_failure_count_are_inconclusive():
    dec = _decide(np.zeros(200), outputs_identical=True)
    assert (dec.verdict, dec.reason) == ("inconclusive", "rare_failures_not_ruled_out")
    assert dec.rare_failure_pages == 299 and dec.pages_needed >= 299
    declared = _decide(np.zeros(200), outputs_identical=True, worst_page_damage=0.3)
    assert (declared.verdict, declared.reason) == ("within_noise", "identical_outputs")
    assert C.assumption(declared) == "assuming no page is damaged by more than 0.3"


def test_a_pass_needs_the_rare_failure_count_even_when_the_interval_clears():
    rng = np.random.default_rng(5)
    d = rng.normal(0.0, 0.01, 200)
    dec = _decide(d)
    assert dec.ci_low > -M  # the interval alone would pass
    assert (dec.verdict, dec.reason) == ("inconclusive", "rare_failures_not_ruled_out")
    assert _decide(rng.normal(0.0, 0.01, 600)).verdict == "within_noise"


def test_a_declared_damage_the_pages_exceed_is_replaced_by_the_range():
    d = np.zeros(200)
    d[7] = -0.5  # a page damaged by more than the declared 0.3
    dec = _decide(d, worst_page_damage=0.3)
    assert dec.worst_page_damage == 1.0 and dec.worst_page_damage_source == "range (declared value exceeded)"
    assert dec.verdict == "inconclusive"


def test_a_lone_damaged_page_cannot_pass_on_the_interval():
    d = np.zeros(400)
    d[3] = -1.0  # an outright failure, seen once
    dec = _decide(d)
    assert dec.verdict == "inconclusive" and dec.bounded_log_wealth < math.log(20)


def test_baseline_unfit_comes_first():
    dec = _decide(np.zeros(400), outputs_identical=True, baseline_score=0.996, baseline_floor=0.5,
                  higher_is_better=False)
    assert (dec.verdict, dec.reason) == ("inconclusive", "baseline_unfit") and dec.pages_needed is None
    ok = _decide(np.zeros(400), outputs_identical=True, baseline_score=0.04, baseline_floor=0.5,
                 higher_is_better=False)
    assert ok.reason == "identical_outputs"
    assert list(C.baseline_fit([0.1, 0.3], 0.2, higher_is_better=True)) == [False, True]


def test_too_few_documents_and_too_few_pages():
    rng = np.random.default_rng(1)
    d, ids = _docs_of([rng.normal(0, 0.01, 40) for _ in range(12)])  # 480 pages in 12 documents
    dec = C.decide(d, ids, _settings(n_resamples=1000))
    assert (dec.verdict, dec.reason) == ("inconclusive", "too_few_documents") and dec.documents_needed >= 30
    assert _decide(np.zeros(20)).reason == "too_few_pages"


def test_interval_reasons_and_noise():
    rng = np.random.default_rng(3)
    assert _decide(rng.normal(-0.05, 0.02, 400)).reason == "ci_beyond_margin"
    straddle = _decide(rng.normal(-0.01, 0.05, 400))
    assert straddle.reason == "ci_straddles_margin" and straddle.pages_needed >= straddle.rare_failure_pages
    noisy = _decide(rng.normal(0, 0.01, 600), noise=rng.normal(0.02, 0.02, 600))
    assert noisy.reason == "noise_exceeds_margin" and noisy.noise_floor > M
    assert noisy.pages_needed is None  # the baseline's own shift (0.02) reaches the margin: no size helps
    e = rng.normal(0, 1, 600)
    e = 0.007 + 0.06 * (e - e.mean()) / e.std(ddof=1)  # shifted 0.007 against itself, floor above 0.01
    shaky = _decide(rng.normal(0, 0.01, 600), noise=e)
    assert shaky.reason == "noise_exceeds_margin" and shaky.pages_needed > 2000  # ≈ (2.49·0.06/0.003)²
    good = _decide(rng.normal(0, 0.01, 600), noise=rng.normal(0, 0.002, 600))
    assert (good.verdict, good.reason) == ("within_noise", "ci_inside_margin")
    assert good.bounded_low <= good.mean and good.bounded_low > -M
    assert good.p_noninferiority <= 0.05 < straddle.p_noninferiority


@pytest.mark.parametrize("kw, match", [
    ({"worst_page_damage": 0.005}, "worst_page_damage for ned: 0.005 must be above the margin"),
    ({"worst_page_damage": 1.5}, "at most ned's range"),
    ({"worst_page_damage": 0.3, "worst_document_damage": 0.5}, "worst_document_damage for ned: 0.5"),
    ({"worst_page_damage": float("nan")}, "not a finite number"),
])
def test_bad_damage(kw, match):
    """Checked once, where the settings are made: no page is resampled with a damage the rule cannot use."""
    with pytest.raises(InputError, match=match):
        _decide(np.zeros(100), **kw)


def test_bad_input():
    with pytest.raises(ValueError, match="3 document ids for 4 page differences"):
        C.decide(np.zeros(4), ["a", "b", "c"], _settings())
    with pytest.raises(ValueError, match="NaN or infinite"):
        C.decide(np.array([0.0, np.nan, 0.0]), ["a", "b", "c"], _settings())
    with pytest.raises(ValueError, match="non-empty document id"):
        C.decide(np.zeros(3), ["a", "", "c"], _settings())


# --- planning ----------------------------------------------------------------------------------

def test_pages_needed_plans_at_the_alternative_not_the_observed_shift():
    rng = np.random.default_rng(6)
    base = rng.normal(0, 0.03, 50)
    base = (base - base.mean()) / base.std(ddof=1) * 0.03
    a, b = _decide(base - 0.004), _decide(base - 0.009)  # same spread, different observed shifts
    assert a.pages_needed == b.pages_needed  # planned at shift 0, not at the observed shift
    assert a.pages_needed >= a.rare_failure_pages
    near = _decide(base - 0.009, expected_shift=0.008)  # settings: how much worse, in the metric's units
    assert near.pages_needed > 5 * a.pages_needed
    docs, _ = C.documents_of(base - 0.009, [f"p{i:04d}" for i in range(len(base))])
    cl = C.cluster_summary(docs)
    bounds = C.cluster_bounds(docs, M, 0.05, list(C.resample_counts(len(base), 1000, 0)), cl)
    # no size passes at the margin (a setting can only declare a shift below it)
    assert C.plan(cl, bounds, M, damage_document=1.0, expected_shift=-M).pages is None


def test_documents_needed_follow_the_documents():
    rng = np.random.default_rng(7)
    d, ids = _docs_of([np.full(10, rng.normal(0, 0.02)) for _ in range(40)])
    dec = C.decide(d, ids, _settings(n_resamples=1000))
    assert dec.verdict == "inconclusive" and dec.documents_needed >= dec.rare_failure_documents
    assert dec.pages_needed == dec.documents_needed * 10


# --- sequential -------------------------------------------------------------------------------

def test_document_order_is_seeded_and_keeps_documents_together():
    docs = [f"doc{i}" for i in range(30)]
    order = C.document_order(docs, 4)
    assert order == C.document_order(list(reversed(docs)), 4) and order != C.document_order(docs, 5)
    assert [x for x in order if x in set(docs[:10])] == C.document_order(docs[:10], 4)  # subsets keep the order
    pages = {f"{d}-p{j}": d for d in docs for j in range(3)}
    served = C.page_order(pages, 4)
    assert [pages[p] for p in served][::3] == order
    assert all(len({pages[p] for p in served[i:i + 3]}) == 1 for i in range(0, 90, 3))


def test_looks_start_at_the_rare_failure_counts():
    looks = C.plan_looks([1] * 400, n_looks=4, first_pages=C.rare_failure_count(M, 1.0), first_documents=30)
    assert looks == [299, 400]
    looks = C.plan_looks([10] * 150, n_looks=3, first_pages=299, first_documents=C.rare_failure_count(M, 0.2))
    assert looks == [59, 100, 150]
    assert C.plan_looks([1] * 100, n_looks=4, first_pages=299, first_documents=30) == [100]


def test_a_look_tests_the_interval_at_its_nominal_level_and_the_rest_at_alpha():
    rng = np.random.default_rng(9)
    d = rng.normal(0.0, 0.02, 500)
    fixed, look = _decide(d), _decide(d, look_alpha=0.001)
    assert look.ci_low < fixed.ci_low and look.rare_failure_pages == fixed.rare_failure_pages == 299
    assert look.bounded_log_wealth == fixed.bounded_log_wealth


# --- the calibration, quick, and the documented example ----------------------------------------------

@pytest.fixture(scope="module")
def bench():
    sys.path.insert(0, str(REPO / "benchmarks"))
    try:
        import verdict_calibration_documents as module
    finally:
        sys.path.pop(0)
    module._load_calibration(module.OUT)  # the committed run's solved model parameters
    return module


def test_worked_example_of_the_docs(bench):
    """docs/statistics.md, "Worked example": the same seeded document set, the same verdicts."""
    pages, docs, declared = bench.worked_example()
    assert (pages["verdict"], pages["reason"], pages["documents"]) == ("within_noise", "ci_inside_margin", 2010)
    assert (docs["verdict"], docs["reason"]) == ("inconclusive", "rare_failures_not_ruled_out")
    assert (docs["documents"], docs["pages"], docs["largest_document"]) == (200, 2010, 15)
    assert round(docs["design_effect"], 2) == 1.93 and docs["rare_failure_documents"] == 446
    assert docs["documents_needed"] == 565
    assert (declared["verdict"], declared["reason"], declared["rare_failure_documents"]) == (
        "within_noise", "ci_inside_margin", 88)
    assert declared["assumption"].endswith("no document by more than 0.2 on average")


def test_quick_calibration_every_cell_at_most_ten_percent(bench, tmp_path):
    t0 = time.perf_counter()
    res = bench.main(["--quick", "--out", str(tmp_path / "quick.json")])
    assert time.perf_counter() - t0 < 60
    assert len(res["cells"]) == len(bench.grid())
    for cell in res["cells"]:
        assert cell["at_margin"]["within_noise"]["rate"] <= 0.10, cell["name"]
