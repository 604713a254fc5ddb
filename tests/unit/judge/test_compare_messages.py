"""What ``compare`` says when score files cannot be judged (quantgate.judge.compare): a metric no page has a value
for names the metrics that do have one — not a key every page holds empty — and says why it is empty; pages that
differ between the files are listed as plain ids, the first ten and a count, never as a Python list."""

import pytest

from quantgate.errors import InputError
from quantgate.judge.compare import compare_scores, listing
from quantgate.schema.scores import ScoreRow
from quantgate.schema.settings import VerdictSettings

NED = VerdictSettings(metric="ned", n_resamples=1000)


def _rows(n: int, **metrics) -> dict[str, ScoreRow]:
    """``n`` pages, each row holding ``metrics`` (a value, or None: scored but not applicable to the page)."""
    return {f"p{i:03d}": ScoreRow(page_id=f"p{i:03d}", **metrics) for i in range(n)}


def test_a_metric_scored_without_truth_says_so_and_lists_only_metrics_with_values():
    """Scored with --metrics ned,checks on pages with checks but no truth: every row holds ned, all None."""
    rows = _rows(20, ned=None, checks=0.8)
    with pytest.raises(InputError) as err:
        compare_scores(rows, rows, NED)
    msg = str(err.value)
    assert msg.startswith("baseline: no page has a value for 'ned' (ned needs truth and no page of this file has "
                          "truth; metrics with values: checks)")
    assert "checks, ned" not in msg


def test_checks_without_checks_and_a_metric_never_scored():
    rows = _rows(20, checks=None, ned=0.1)
    with pytest.raises(InputError, match=r"'checks' \(checks needs checks and no page of this file has checks; "
                                         r"metrics with values: ned\)"):
        compare_scores(rows, rows, VerdictSettings(metric="checks", n_resamples=1000))
    with pytest.raises(InputError, match=r"'cer' \(the file was not scored with it; metrics with values: ned\)"):
        compare_scores(rows, rows, VerdictSettings(metric="cer", n_resamples=1000))


def test_pages_that_differ_are_listed_as_plain_ids():
    base = _rows(40, ned=0.1)
    fewer = {k: v for k, v in base.items() if k not in {f"p{i:03d}" for i in range(18)}}
    with pytest.raises(InputError) as err:
        compare_scores(base, fewer, NED)
    msg = str(err.value)
    assert ("pages differ between baseline and candidate: 18 only in the first (p000, p001, p002, p003, p004, p005, "
            "p006, p007, p008, p009 and 8 more); pass --allow-missing") in msg
    assert "[" not in msg and "'" not in msg


def test_listing_sorts_and_counts():
    assert listing({"b", "a"}) == "a, b"
    assert listing([]) == ""
    assert listing(f"x{i:02d}" for i in range(11)) == ", ".join(f"x{i:02d}" for i in range(10)) + " and 1 more"
