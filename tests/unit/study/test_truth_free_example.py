"""The committed truth-free example (docs/examples/truth-free) is what the code writes today and what its README and
the project README say of it: its summary.json reads as the current summary schema with current verdicts (an
example written before a verdict field existed fails here, not in a reader's hands), both candidates pass through
the rectified verdict on 100 labeled and 410 unlabeled pages, and the numbers the READMEs quote are the file's."""

import json
import re

import pytest

from quantgate.schema.summary import SUMMARY_SCHEMA_VERSION, Summary, load_summary
from quantgate.schema.verdict import Verdict
from tests.support.paths import REPO

EXAMPLE = REPO / "docs" / "examples" / "truth-free"
CANDIDATES = ("fp8-dynamic", "nvfp4")
METRICS = ("ned", "bow_f1")


@pytest.fixture(scope="module")
def summary() -> Summary:
    return load_summary(EXAMPLE)


@pytest.fixture(scope="module")
def readme() -> str:
    return " ".join((EXAMPLE / "README.md").read_text().split())  # one line: quoted numbers may wrap


def _verdict(summary: Summary, variant: str, metric: str):
    (v,) = [v for v in summary.verdicts if v.variant == variant and v.metric == metric]
    return v


def test_the_example_is_written_in_the_current_schemas(summary):
    raw = json.loads((EXAMPLE / "summary.json").read_text())
    assert raw["schema_version"] == SUMMARY_SCHEMA_VERSION
    current = Verdict.model_fields["schema_version"].default
    assert {v["schema_version"] for v in raw["verdicts"]} == {current}
    assert all("empty_output_mean" in v for v in raw["verdicts"])  # written, not defaulted on reading


def test_both_candidates_pass_through_the_rectified_verdict_on_100_labeled_pages(summary):
    t = summary.truth
    assert (t.pages, t.with_truth, t.without_truth, t.label_sample, t.labeled_at_random) == (510, 100, 410, 100, True)
    for variant in CANDIDATES:
        for metric in METRICS:
            v = _verdict(summary, variant, metric)
            assert (v.verdict, v.reason, v.method) == ("within_noise", "ci_inside_margin", "rectified"), v
            assert (v.pages_with_truth, v.pages_without_truth, v.pages_at_random) == (100, 410, 100)
            assert v.empty_output_mean is not None  # the baseline was judged against reading nothing
            assert v.baseline_score is not None and v.baseline_score != v.empty_output_mean


def test_the_readme_quotes_the_files_numbers(summary, readme):
    evidence = {(e.variant, e.metric): e for e in summary.truth_free}
    noise = evidence[(summary.baseline, "ned")]
    for variant in CANDIDATES:
        e = evidence[(variant, "ned")]
        row = f"| {variant} | {e.changed} of {e.pages} | {e.mean_bound:.4f} | {e.margin:g} | {noise.changed}, " \
              f"{noise.mean_bound:.4g} |"
        assert row in readme, row
    ned = [_verdict(summary, v, "ned").bound_upper for v in CANDIDATES]
    bow = [_verdict(summary, v, "bow_f1").bound_upper for v in CANDIDATES]
    assert f"`ned` {ned[0]:.4f} for fp8-dynamic and {ned[1]:.4f} for nvfp4 against the 0.01 margin" in readme
    assert f"`bow_f1` {bow[0]:.4f} and {bow[1]:.4f} against 0.02" in readme
    assert f"({_verdict(summary, 'fp8-dynamic', 'ned').rare_failure_pages} for `ned`)" in readme
    ned = _verdict(summary, "fp8-dynamic", "ned")
    assert f"`ned` {ned.baseline_score:.4f} on all 100, where an empty output scores {ned.empty_output_mean:.4f}" in readme


def test_the_project_readme_says_what_the_example_shows(summary):
    text = " ".join((REPO / "README.md").read_text().split())
    m = re.search(r"docs/examples/truth-free.*?pass \(`within_noise`, gate exit 0\) on (\d+) pages with truth "
                  r"written for a random (\d+)", text)
    assert m, "README's 'Verdicts without written truth' no longer describes the example"
    assert (int(m[1]), int(m[2])) == (summary.truth.pages, summary.truth.with_truth)
