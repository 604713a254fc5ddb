"""quantgate.compare_outputs: two systems' outputs, truth for some pages or none, one verdict — no files, no
servers. Identical outputs pass on unlabeled pages once the baseline is shown on labeled ones; an empty output is
bounded by the metric's range; truth is used for the rectified estimate only when said to be a random draw; and
each kind of bad input is one error naming the page."""

import pytest

import quantgate
from quantgate.errors import DataError, UsageError
from quantgate.io.outputs import MAX_OUTPUT_BYTES
from quantgate.schema.settings import VerdictSettings
from quantgate.study import outputs

WORDS = "the of and quantized model reads page table figure caption results".split()


def _texts(n: int, seed: int = 0) -> dict[str, str]:
    import random

    r = random.Random(seed)
    return {f"p{i:04d}": " ".join(r.choice(WORDS) for _ in range(80)) for i in range(n)}


def test_identical_outputs_pass_without_truth_once_the_baseline_is_shown():
    base = _texts(400)
    truth = {p: t.replace("the", "teh", 1) for p, t in list(base.items())[:30]}
    v = quantgate.compare_outputs(base, dict(base), truth=truth, labeled_at_random=True,
                                  settings=VerdictSettings(metric="ned", n_resamples=1000))
    assert (v.verdict, v.reason, v.method) == ("within_noise", "identical_outputs", "rectified")
    assert (v.pages_with_truth, v.pages_without_truth, v.mean_bound, v.flips) == (30, 370, 0.0, 0)
    unchecked = quantgate.compare_outputs(base, dict(base), truth=dict(list(truth.items())[:10]))
    assert (unchecked.verdict, unchecked.reason) == ("inconclusive", "baseline_unchecked")


def test_an_empty_output_is_bounded_by_the_range_and_whitespace_by_nothing():
    base = _texts(40)
    cand = dict(base, p0001="", p0002=base["p0002"].replace(" ", "   "))
    v = outputs.compare_outputs(base, cand, seed=3)
    assert v.mean_bound == pytest.approx(1 / 40) and v.pages_changed == 2 and v.seed == 3


def test_truth_enters_the_rectified_estimate_only_as_a_random_draw():
    base = _texts(300, seed=1)
    cand = {p: t.replace("model", "modle", 1) if i % 2 else t for i, (p, t) in enumerate(base.items())}
    truth = {p: base[p] for p in list(base)[:100]}
    docs = {p: f"d{i // 4}" for i, p in enumerate(base)}  # 75 documents, 25 of them labeled
    kw = dict(truth=truth, documents=docs, settings=VerdictSettings(metric="ned", n_resamples=1000))
    drawn = outputs.compare_outputs(base, cand, labeled_at_random=True, **kw)
    picked = outputs.compare_outputs(base, cand, labeled_at_random=False, **kw)
    assert drawn.method == "rectified" and drawn.excess_lower is not None and drawn.pages_at_random == 100
    assert picked.method == "bound" and picked.excess_lower is None and picked.pages_at_random == 0
    assert picked.mean_bound == drawn.mean_bound and picked.documents == drawn.documents == 75


def test_only_the_pages_named_as_drawn_rectify_and_every_truth_shows_the_baseline():
    """Truth on a random draw plus hand-picked pages where the candidate fixed the baseline's errors (their excess,
    bound minus damage, is large): naming the drawn pages keeps the hand-picked ones out of the rectified estimate,
    while their truth still counts for the baseline's score — the study's rule (``outputs_verdict`` with the draw)."""
    base = _texts(300, seed=4)
    cand = {p: t.replace("model", "modle", 1) if i % 2 else t for i, (p, t) in enumerate(base.items())}
    docs = {p: f"d{i // 4}" for i, p in enumerate(base)}
    ids = list(base)
    drawn = ids[:100]  # 25 whole documents
    picked = [p for p in ids[100:] if cand[p] != base[p]][:40]  # changed pages whose truth is the candidate's text
    truth = {p: base[p] for p in drawn} | {p: cand[p] for p in picked}
    s = VerdictSettings(metric="ned", n_resamples=1000)
    named = outputs.compare_outputs(base, cand, truth=truth, documents=docs, labeled_at_random=drawn, settings=s)
    everyone = outputs.compare_outputs(base, cand, truth=truth, documents=docs, labeled_at_random=True, settings=s)
    only_drawn = outputs.compare_outputs(base, cand, truth={p: truth[p] for p in drawn}, documents=docs,
                                         labeled_at_random=True, settings=s)
    assert named.method == "rectified" and named.pages_at_random == 100 and named.pages_with_truth == 140
    assert named.excess_lower == only_drawn.excess_lower < everyone.excess_lower  # the picked pages left out
    assert named.baseline_score == everyone.baseline_score != only_drawn.baseline_score  # yet their truth counts
    study = outputs.outputs_verdict(outputs.OutputTexts(base, cand), truth, docs, set(drawn), s)
    assert named == study
    assert outputs.compare_outputs(base, cand, truth=truth, documents=docs, labeled_at_random=set(), settings=s
                                   ).method == "bound"


@pytest.mark.parametrize("change,error,match", [
    (lambda b, c, kw: c.pop("p0003"), DataError, r"pages differ between baseline and candidate: 1 only in baseline "
                                                 r"\(p0003\);"),
    (lambda b, c, kw: kw.update(truth={"p9999": "x"}), DataError, r"truth: page 'p9999' is not compared"),
    (lambda b, c, kw: c.update(p0004=b"bytes"), DataError, r"candidate: page 'p0004' is bytes, not text"),
    (lambda b, c, kw: b.update(p0005="a\x00b"), DataError, r"baseline: page 'p0005' contains a NUL byte"),
    (lambda b, c, kw: c.update(p0006="x" * (MAX_OUTPUT_BYTES + 1)), DataError, r"candidate: page 'p0006' is over 1 MiB"),
    (lambda b, c, kw: kw.update(documents={"p0000": "d"}), DataError, r"documents: page 'p0001' has no document"),
    (lambda b, c, kw: kw.update(labeled_at_random=True), UsageError, r"labeled_at_random: no truth given"),
    (lambda b, c, kw: kw.update(truth={"p0001": "x"}, labeled_at_random={"p0001", "p0002"}), DataError,
     r"labeled_at_random: page 'p0002' has no truth \(1 such page\(s\): p0002\)"),
    (lambda b, c, kw: kw.update(truth={"p0001": "x"}, labeled_at_random="p0001"), UsageError,
     r"labeled_at_random: give True, False or a collection of the page ids drawn at random, not str"),
    (lambda b, c, kw: kw.update(truth={"p0001": "x"}, labeled_at_random=[1]), UsageError,
     r"labeled_at_random: 1 is not a page id"),
    (lambda b, c, kw: kw.update(settings=VerdictSettings(metric="ned"), margin=0.02), UsageError, "not both"),
    (lambda b, c, kw: kw.update(metric="checks"), UsageError, r"metric 'checks' scores against checks"),
])
def test_bad_input_is_one_error_naming_the_page(change, error, match):
    base = _texts(10)
    cand, kw = dict(base), {}
    change(base, cand, kw)
    with pytest.raises(error, match=match):
        outputs.compare_outputs(base, cand, **kw)


def test_the_baseline_rerun_is_bounded_beside_the_candidate():
    """The noise floor without truth: the baseline re-run's mean bound and changed pages, beside the candidate's."""
    base = _texts(400, seed=2)
    rerun = {p: t + " the" if i % 10 == 0 else t for i, (p, t) in enumerate(base.items())}  # 40 pages differ
    truth = {p: base[p] for p in list(base)[:30]}
    v = outputs.outputs_verdict(outputs.OutputTexts(base, dict(base), rerun), truth, {p: p for p in base}, set(truth),
                                VerdictSettings(metric="ned", n_resamples=1000))
    assert v.noise_flips == 40 and 0 < v.noise_mean_bound < 0.1 * 40 / 400
    assert (v.verdict, v.reason, v.mean_bound, v.flips) == ("within_noise", "identical_outputs", 0.0, 0)
