"""The parsebench_content page score (upstream's weighting of its content rules), the metric's empty-output rule,
and the ParseBench file reader's refusals."""

from __future__ import annotations

import json
import re

import pytest

from quantgate.errors import DataError, InputError
from quantgate.scoring.bounds import truth_free_bound
from quantgate.scoring.metrics import get_metric, score_one
from quantgate.scoring.parsebench.dataset import FAMILY_OF, OTHER_DIMENSIONS, read_rules
from quantgate.scoring.parsebench.page import headline, page_score
from quantgate.scoring.parsebench.rules import RULE, TYPES
from tests.support import parsebench_ref as P

MISSING = {"type": "missing_word_percent", "bag_of_word": {"alpha": 1, "beta": 1, "gamma": 2}}
UNEXPECTED = {"type": "unexpected_word_percent", "bag_of_word": {"alpha": 1, "beta": 1, "gamma": 2}}
ORDER = {"type": "order", "before": "alpha", "after": "gamma"}


def _rules(*dicts):
    return [RULE.validate_python(d) for d in dicts]


def test_page_is_correctness_and_half_weighted_order():
    # missing 3/4 (gamma once of twice), unexpected 3/4 ("delta" is extra): correctness = mean of the two type
    # means; order broken (gamma before alpha) = 0 → (0.75 + 0.5·0) / 1.5
    text = "gamma alpha beta delta"
    assert page_score(_rules(MISSING, UNEXPECTED, ORDER), text) == pytest.approx(0.75 / 1.5)
    # two rules of one type weigh as one type: (mean(1, 0.75) + 0.75) / 2 against the order rule passing
    assert page_score(_rules(MISSING, {**MISSING, "bag_of_word": {"alpha": 1}}, UNEXPECTED, ORDER),
                      "alpha beta delta gamma") == pytest.approx(((0.875 + 0.75) / 2 + 0.5) / 1.5)
    assert page_score(_rules(MISSING, MISSING, ORDER), "alpha beta gamma gamma") == 1.0
    assert page_score(_rules(ORDER), text) == 0.0  # order alone: its own mean
    assert page_score([], text) is None


def test_headline_is_the_mean_of_pages_with_rules():
    assert headline([1.0, None, 0.5]) == 0.75 and headline([None]) is None


def test_metric_fails_an_empty_output_runs_a_blank_one_and_scores_a_missing_one_worst():
    m = get_metric("parsebench_content")
    assert score_one(m, "", None, [], None, [MISSING, UNEXPECTED]) == 0.0  # upstream fails every rule
    assert score_one(m, " ", None, [], None, [MISSING, UNEXPECTED]) == pytest.approx(0.5)  # run: 0 and 1
    assert score_one(m, None, None, [], None, [MISSING]) == 0.0
    assert score_one(m, "alpha", None, [], None, []) is None  # no rules: not applicable
    # a blank baseline does not bound a changed candidate at 0: it was scored by the rules, not as the worst
    assert truth_free_bound("parsebench_content", "", "alpha") == 1.0


def _write(tmp_path, rows):
    f = tmp_path / "text.jsonl"
    f.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return f


def test_reader_keys_pages_and_leaves_out_other_dimensions(tmp_path):
    f = _write(tmp_path, [
        {"pdf": "text/doc1.pdf", "page": 1, "type": "missing_word_percent", "rule": json.dumps(MISSING), "id": "r1"},
        {"pdf": "text/doc2.pdf", "type": "order", "rule": {"before": "a b c", "after": "d e f"}},
        {"pdf": "text/doc2.pdf", "type": "is_bold", "rule": {"text": "x"}},
        {"pdf": "text/doc2.pdf", "type": "present", "rule": {"text": "x"}},
    ])
    got = read_rules(f)
    assert sorted(got.by_page) == ["doc1_pg1", "doc2_pg1"]
    assert got.by_page["doc1_pg1"][0]["id"] == "r1" and got.skipped == {"present": 1}
    assert [r["type"] for r in got.by_page["doc2_pg1"]] == ["order", "is_bold"]  # formatting: its own family


@pytest.mark.parametrize(("row", "says"), [
    ({"pdf": "a.pdf", "type": "missing_wrod_percent", "rule": {}}, r":2: unknown ParseBench rule type 'missing_wrod"),
    ({"pdf": "a.pdf", "type": "missing_word_percent", "rule": {"bag_of_word": {"x": 1}}}, r":2: .*2\+ characters"),
    ({"pdf": "a.pdf", "type": "unexpected_word_percent", "rule": {"bag_of_word": {}}}, r":2: .*non-empty bag"),
    ({"pdf": "a.pdf", "type": "order", "rule": {"before": "ab", "after": "cd", "max_diffs": 3}}, r":2: .*max_diffs"),
    ({"pdf": "a.pdf", "type": "order", "rule": {"before": "ab"}}, r":2: order rule: after: Field required"),
    ({"pdf": "a.pdf", "type": "extra_content", "rule": {"bag_of_sentence": {"s": 1}, "colour": 1}}, r":2: .*colour"),
    ({"type": "order", "rule": {"before": "abc", "after": "def"}}, r":2: no 'pdf'"),
    ({"pdf": "a.pdf", "type": "order", "rule": "{not json"}, r":2: 'rule' is text that is not JSON"),
])
def test_reader_refuses_bad_lines_naming_the_line(tmp_path, row, says):
    good = {"pdf": "a.pdf", "type": "order", "rule": {"before": "abc", "after": "def"}}
    with pytest.raises(DataError, match=says):
        read_rules(_write(tmp_path, [good, row]))


def test_rule_vocabulary_is_upstreams():
    """The scored families' types plus those left out as other dimensions' are exactly upstream's TestType values
    (and its loader's pointer-only expected_markdown line)."""
    if P.reference_missing_reason():
        pytest.skip(P.reference_missing_reason())
    src = (P.SOURCE / "parse_bench" / "evaluation" / "metrics" / "parse" / "test_types.py").read_text()
    upstream = set(re.findall(r'^\s+[A-Z_0-9]+\s*=\s*"([a-z_0-9]+)"', src, re.MULTILINE)) | {"expected_markdown"}
    assert set(FAMILY_OF) | OTHER_DIMENSIONS == upstream and not set(FAMILY_OF) & OTHER_DIMENSIONS
    assert set(TYPES) < set(FAMILY_OF)


def test_a_rule_edited_into_pages_jsonl_after_import_is_refused_not_half_scored():
    m = get_metric("parsebench_content")
    with pytest.raises(InputError, match=r"ParseBench rule 'r7' is not valid .*pages import --parsebench"):
        score_one(m, "alpha", None, [], None, [MISSING, {"type": "missing_word_percent", "id": "r7", "bag_of_word": {}}])
