"""The verdict on pages with and without truth judges the baseline's fitness as every other verdict does: on the
pages with truth, a baseline no better than what an empty output scores there is ``baseline_unfit`` with both
numbers — through ``quantgate.compare_outputs`` (which scores the empty output itself) and through a study's
family (which hands in the rows of its ``scores/empty-output.jsonl``), with the same numbers. ned's empty output
scores the worst value, 1, so only a baseline at 1 on those pages (garbage sharing no character with the page)
is unfit by it; the floor is declared at 1 here so the empty output's rule alone decides."""

import pytest

from quantgate.judge.compare import Names, Pairing, judge_family
from quantgate.schema.settings import VerdictSettings
from quantgate.study import outputs

WORDS = "the of and quantized model reads page table figure caption results".split()
S = VerdictSettings(metric="ned", n_resamples=1000, baseline_floor=1.0)
LABELED = 30


def _case(garbage: str) -> tuple[dict[str, str], dict[str, str]]:
    """60 one-page documents, the first 30 labeled; the baseline writes ``garbage`` on the labeled pages and the
    truth elsewhere (what it writes on unlabeled pages no verdict can check)."""
    import random

    r = random.Random(5)
    truth = {f"p{i:03d}": " ".join(r.choice(WORDS) for _ in range(40)) for i in range(60)}
    base = {p: garbage if i < LABELED else t for i, (p, t) in enumerate(truth.items())}
    return base, {p: truth[p] for p in list(truth)[:LABELED]}


def test_garbage_that_shares_nothing_with_the_page_is_unfit():
    base, truth = _case("jjjj")  # no character of the pages: ned exactly 1, an empty output's ned
    v = outputs.compare_outputs(base, dict(base), truth=truth, labeled_at_random=True, settings=S)
    assert (v.verdict, v.reason) == ("inconclusive", "baseline_unfit")
    assert v.baseline_score == 1.0 and v.empty_output_mean == 1.0 and v.baseline_floor == 1.0
    assert "no better than an empty output's 1.0000 on the same pages" in v.message


def test_a_baseline_just_better_than_reading_nothing_is_judged():
    base, truth = _case("the")  # shares a few characters with each page: ned just below 1
    v = outputs.compare_outputs(base, dict(base), truth=truth, labeled_at_random=True, settings=S)
    assert v.reason != "baseline_unfit" and v.empty_output_mean == 1.0 and 0.9 < v.baseline_score < 1.0


@pytest.mark.parametrize("garbage", ["jjjj", "the"])
def test_a_study_family_and_compare_outputs_give_the_same_numbers(garbage):
    """The study's row (its empty-output rows handed in) and the library's verdict (which scores the empty output
    itself) agree on the reason and on both numbers."""
    base, truth = _case(garbage)
    docs = {p: p for p in base}
    texts = outputs.OutputTexts(base, dict(base))
    tf = outputs.output_pages(texts, truth, docs, set(truth), "ned")
    assert tf.labeled is not None
    empty = outputs._score_rows(dict.fromkeys(truth, ""), truth, docs, "ned")
    (row,) = judge_family([Pairing("cand", S, (*tf.labeled, None), Names(), empty, truth_free=tf)], [])
    lib = outputs.compare_outputs(base, dict(base), truth=truth, labeled_at_random=True, settings=S)
    assert (row.reason, row.baseline_score, row.empty_output_mean) == (lib.reason, lib.baseline_score,
                                                                      lib.empty_output_mean)
    assert row.empty_output_mean == 1.0
