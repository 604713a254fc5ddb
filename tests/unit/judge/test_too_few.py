"""A subset of pages too small for a verdict (one tag value's) gets an inconclusive row with the
normal reasons and nothing bounded, not an error; a subset large enough is left to ``compare_scores``."""

import pytest

from quantgate.errors import InputError
from quantgate.judge.compare import compare_scores, too_few_to_judge
from quantgate.schema.scores import ScoreRow
from quantgate.schema.settings import VerdictSettings


def _rows(values, documents=None):
    return {f"p{i}": ScoreRow(page_id=f"p{i}", ned=v, document=None if documents is None else documents[i])
            for i, v in enumerate(values)}


def test_one_page_is_too_few_pages_not_an_error():
    base, cand = _rows([0.1]), _rows([0.4])
    with pytest.raises(InputError, match="need at least 2"):
        compare_scores(base, cand, VerdictSettings(metric="ned"))  # what the row stands in for
    v = too_few_to_judge(base, cand, VerdictSettings(metric="ned", min_pages=5))
    assert (v.verdict, v.reason, v.n) == ("inconclusive", "too_few_pages", 1)
    assert v.delta == pytest.approx(0.3) and (v.ci_low, v.ci_high) == (-1.0, 1.0)
    assert v.p_regression == v.p_noninferiority == 1.0 and v.pages_needed == 5
    assert "below the minimum of 5" in v.message


def test_pages_of_one_document_are_too_few_documents():
    base, cand = _rows([0.1, 0.2, 0.3], ["d"] * 3), _rows([0.1, 0.2, 0.5], ["d"] * 3)
    v = too_few_to_judge(base, cand, VerdictSettings(metric="ned", min_pages=2, min_documents=4))
    assert (v.verdict, v.reason, v.documents, v.documents_needed) == ("inconclusive", "too_few_documents", 1, 4)


def test_a_judgeable_or_empty_subset_is_not_made_here():
    base, cand = _rows([0.1, 0.2, 0.3]), _rows([0.1, 0.2, 0.5])
    assert too_few_to_judge(base, cand, VerdictSettings(metric="ned")) is None  # three documents: compare_scores judges it
    assert too_few_to_judge(_rows([None]), _rows([0.2]), VerdictSettings(metric="ned")) is None  # no page scored on both sides
