"""parsebench_formatting as a registered metric: what it scores on a page carrying content and formatting rules,
its empty-output rule and truth-free bound, and the ParseBench reader's refusals of bad formatting lines (no
oracle needed: these run on a clone with nothing beside it)."""

from __future__ import annotations

import json

import pytest

from quantgate.errors import DataError, InputError
from quantgate.schema.metrics import FAMILIES, METRICS
from quantgate.scoring.bounds import truth_free_bound
from quantgate.scoring.metrics import get_metric, parse_metric_list, score_one
from quantgate.scoring.parsebench import formatting as F
from quantgate.scoring.parsebench.dataset import read_rules

BOLD = {"type": "is_bold", "text": "Revenue"}
NOT_BOLD = {"type": "is_not_bold", "text": "fell"}
TITLE = {"type": "is_title", "text": "Quarterly report"}
ITALIC = {"type": "is_italic", "text": "fell"}
CONTENT = {"type": "missing_word_percent", "bag_of_word": {"revenue": 1}}
MD = "# Quarterly report\n\n**Revenue** fell."


def _score(pred, rules):
    return score_one(get_metric("parsebench_formatting"), pred, None, [], None, rules)


def test_the_family_scores_each_dimension_from_its_own_rules():
    assert FAMILIES["parsebench"][:2] == ["parsebench_content", "parsebench_formatting"]
    assert [m.name for m in parse_metric_list("parsebench")] == FAMILIES["parsebench"]
    spec = METRICS["parsebench_formatting"]
    assert spec.higher_is_better and spec.range == (0.0, 1.0) and spec.bound == "range_if_changed"
    rules = [CONTENT, BOLD, NOT_BOLD, TITLE]
    assert _score(MD, rules) == 1.0
    assert score_one(get_metric("parsebench_content"), MD, None, [], None, rules) == 1.0
    # the bold lost: styling F(0, 1) = 0, title 1 → (0 + 1) / 2; content unchanged
    assert _score(MD.replace("**", ""), rules) == 0.5
    assert score_one(get_metric("parsebench_content"), MD.replace("**", ""), None, [], None, rules) == 1.0


def test_a_page_without_formatting_rules_or_with_only_unscored_ones_is_not_applicable():
    assert _score(MD, [CONTENT]) is None
    assert _score(MD, [ITALIC]) is None  # italic is scored per rule, outside the page score (as upstream)
    assert _score(MD, []) is None


def test_empty_output_fails_every_rule_missing_output_is_worst_blank_is_run():
    assert _score("", [NOT_BOLD, TITLE]) == 0.0
    assert _score(None, [NOT_BOLD, TITLE]) == 0.0
    assert _score("\n", [NOT_BOLD, TITLE]) == 0.5  # the negative rule passes on whitespace; the title fails


def test_the_bound_is_zero_only_for_the_same_text():
    assert truth_free_bound("parsebench_formatting", MD, MD) == 0.0
    # formatting reads markers: a changed text may change the score anywhere in its range, a blank one too
    assert truth_free_bound("parsebench_formatting", MD, MD.replace("**", "")) == 1.0
    assert truth_free_bound("parsebench_formatting", "", MD) == 1.0


def test_a_formatting_rule_edited_into_pages_jsonl_after_import_is_refused():
    with pytest.raises(InputError, match=r"ParseBench rule 'f1' is not valid .*text must be non-empty"):
        _score(MD, [BOLD, {"type": "is_bold", "id": "f1", "text": " "}])
    with pytest.raises(InputError, match=r"rule 'is_bolt' is not valid \(unknown rule type"):
        _score(MD, [BOLD, {"type": "is_bolt", "text": "x"}])


def _write(tmp_path, rows):
    f = tmp_path / "formatting.jsonl"
    f.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return f


GOOD = {"pdf": "fmt/doc1.pdf", "page": 1, "type": "is_bold", "rule": {"text": "Revenue"}}


def test_reader_keeps_formatting_rules_with_their_page(tmp_path):
    rows = [GOOD, {"pdf": "fmt/doc1.pdf", "page": 1, "type": "title_hierarchy_percent",
                   "rule": json.dumps({"title_hierarchy": {"Report": ["Intro", "Scope"]}}), "id": "h1"},
            {"pdf": "fmt/doc2.pdf", "type": "is_code_block", "rule": {"language": "python", "code": "x = 1"}}]
    got = read_rules(_write(tmp_path, rows))
    assert [r["type"] for r in got.by_page["doc1_pg1"]] == ["is_bold", "title_hierarchy_percent"]
    assert got.by_page["doc1_pg1"][1]["id"] == "h1" and got.by_page["doc2_pg1"][0]["code"] == "x = 1"
    assert got.skipped == {}


def test_reader_keeps_a_rule_the_dataset_marks_unverified(tmp_path):
    """Upstream's runner keeps them unless run with verified_only; a typo'd field is still refused."""
    got = read_rules(_write(tmp_path, [{**GOOD, "rule": {"text": "Revenue", "verified": False}}]))
    assert got.by_page["doc1_pg1"][0]["verified"] is False
    with pytest.raises(DataError, match=r":1: is_bold rule: verifed: Extra inputs are not permitted"):
        read_rules(_write(tmp_path, [{**GOOD, "rule": {"text": "Revenue", "verifed": False}}]))


@pytest.mark.parametrize(("row", "says"), [
    ({"pdf": "a.pdf", "type": "is_bolt", "rule": {"text": "x"}}, r":2: unknown ParseBench rule type 'is_bolt'"),
    ({"pdf": "a.pdf", "type": "is_italic", "rule": {"text": "  "}}, r":2: is_italic rule: text must be non-empty"),
    ({"pdf": "a.pdf", "type": "mark_color", "rule": {"text": "x"}}, r":2: mark_color rule: color must be non-empty"),
    ({"pdf": "a.pdf", "type": "is_latex", "rule": {"formula": "$$ $$"}}, r":2: is_latex rule: formula must keep"),
    ({"pdf": "a.pdf", "type": "is_code_block", "rule": {"code": "x"}}, r":2: is_code_block rule: language and code"),
    ({"pdf": "a.pdf", "type": "title_hierarchy_percent", "rule": {"title_hierarchy": {}}},
     r":2: title_hierarchy_percent rule: title_hierarchy must be a non-empty object"),
    ({"pdf": "a.pdf", "type": "is_title", "rule": {"text": "x", "size": 3}}, r":2: is_title rule: size: Extra"),
    ({"pdf": "a.pdf", "type": "is_header", "rule": {"text": 7}}, r":2: is_header rule: text: Input should be"),
])
def test_reader_refuses_bad_formatting_lines_naming_the_line(tmp_path, row, says):
    with pytest.raises(DataError, match=says):
        read_rules(_write(tmp_path, [GOOD, row]))


@pytest.mark.parametrize("md", ["hello " + "*" * 80 + " x", "**hello " + "*" * 80 + " world", "hello " + "<b>" * 3000,
                                "<b>" * 3000 + "hello world", "# " + "<i>" * 3000 + " hello"])
def test_runs_of_markers_do_not_stall_the_rules(md):
    """Runs of stars or tags make upstream's patterns backtrack exponentially or cubically before failing (80
    stars: hours; upstream stops the rule at 120 s and fails it); here they are decided at once, as the patterns
    would decide them given the time."""
    bold, not_bold = (F.FORMAT_RULE.validate_python({"type": t, "text": "hello world"}) for t in ("is_bold", "is_not_bold"))
    assert (F.score(bold, md), F.score(not_bold, md)) == (0.0, 1.0)
