"""parsebench_charts as a registered metric: the page's chart-data-point pass rate, its empty-output rule and
truth-free bound, and the ParseBench reader keeping chart rules and refusing bad ones (no oracle needed)."""

from __future__ import annotations

import json

import pytest

from quantgate.errors import DataError, InputError
from quantgate.schema.metrics import FAMILIES, METRICS
from quantgate.scoring.bounds import truth_free_bound
from quantgate.scoring.metrics import get_metric, score_one

REVENUE = {"type": "chart_data_point", "value": "39.2", "labels": ["Revenue", "2021"]}
GROWTH = {"type": "chart_data_point", "value": "12%", "labels": ["Growth", "2022"]}
BOLD = {"type": "is_bold", "text": "Revenue"}
MD = "## Sales\n\n| Year | Revenue | Growth |\n|---|---|---|\n| 2021 | 39.2 | 10% |\n| 2022 | 41.0 | 12.0% |\n"


def _score(pred, rules):
    return score_one(get_metric("parsebench_charts"), pred, None, [], None, rules)


def test_the_page_is_its_chart_rules_pass_rate():
    assert "parsebench_charts" in FAMILIES["parsebench"]
    spec = METRICS["parsebench_charts"]
    assert spec.higher_is_better and spec.bound == "range_if_changed" and spec.range == (0.0, 1.0)
    assert _score(MD, [REVENUE, GROWTH, BOLD]) == 1.0  # 12% is 12.0%; the bold rule is another family's
    assert _score(MD.replace("12.0%", "21%"), [REVENUE, GROWTH]) == 0.5
    # the label "2021" must share the value's row or column: the value moved to another row fails the point
    assert _score(MD.replace("| 2021 | 39.2 |", "| 2021 | 40.5 |").replace("41.0", "39.2"), [REVENUE]) == 0.0
    assert _score(MD, [BOLD]) is None  # no chart rule: not applicable


def test_empty_output_fails_missing_output_is_worst_and_the_bound_is_the_range():
    assert _score("", [REVENUE]) == 0.0 and _score(None, [REVENUE]) == 0.0 and _score(" ", [REVENUE]) == 0.0
    assert truth_free_bound("parsebench_charts", MD, MD) == 0.0
    assert truth_free_bound("parsebench_charts", MD, MD.replace("39.2", "39.3")) == 1.0


def test_a_chart_rule_edited_into_pages_jsonl_after_import_is_refused():
    with pytest.raises(InputError, match=r"ParseBench rule 'c1' is not valid \(labels must name at least one"):
        _score(MD, [REVENUE, {**REVENUE, "id": "c1", "labels": []}])


def _write(tmp_path, rows):
    f = tmp_path / "chart.jsonl"
    f.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return f


GOOD = {"pdf": "chart/doc1.pdf", "page": 1, "type": "chart_data_point", "rule": {"value": 3, "labels": ["Q1"]}}


def test_reader_keeps_chart_points_and_leaves_out_chart_arrays(tmp_path):
    from quantgate.scoring.parsebench.dataset import read_rules

    got = read_rules(_write(tmp_path, [GOOD, {**GOOD, "type": "chart_data_array_data", "rule": {"data": []}}]))
    assert got.by_page == {"doc1_pg1": [{"value": 3, "labels": ["Q1"], "type": "chart_data_point"}]}
    assert got.skipped == {"chart_data_array_data": 1}


@pytest.mark.parametrize(("rule", "says"), [
    ({"value": 3, "labels": []}, r":2: chart_data_point rule: labels must name at least one label"),
    ({"value": "", "labels": ["Q1"]}, r":2: chart_data_point rule: value must keep some text"),
    ({"value": 3, "labels": "Q1"}, r":2: chart_data_point rule: labels: Input should be a valid list"),
    ({"value": 3, "labels": ["Q1"], "relative_tolerance": "wide"}, r":2: chart_data_point rule: relative_tolerance"),
])
def test_reader_refuses_bad_chart_points_naming_the_line(tmp_path, rule, says):
    from quantgate.scoring.parsebench.dataset import read_rules

    with pytest.raises(DataError, match=says):
        read_rules(_write(tmp_path, [GOOD, {**GOOD, "rule": rule}]))
