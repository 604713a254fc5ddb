"""The ParseBench leaderboard numbers (dimension headlines, rule-type pass rates) against upstream's: its
evaluator's per-page metrics averaged over the pages reporting each, as its runner's ``avg_<metric>`` does (the
runner itself imports inference clients this project does not install, so its averaging is restated here)."""

from __future__ import annotations

from collections import defaultdict
from statistics import fmean

import pytest

from quantgate.scoring.parsebench.leaderboard import DIMENSIONS, leaderboard, lines
from tests.support import parsebench_ref as P

pytestmark = pytest.mark.skipif(bool(P.reference_missing_reason()), reason=P.reference_missing_reason() or "")

TABLE = "## Sales\n\n| Year | Revenue |\n|---|---|\n| 2021 | 39.2 |\n| 2022 | 41 |\n"
PAGES = [
    ([{"type": "missing_word_percent", "bag_of_word": {"revenue": 2, "sales": 1}},
      {"type": "order", "before": "Sales", "after": "Revenue"},
      {"type": "is_title", "text": "Sales"}, {"type": "is_bold", "text": "2021"},
      {"type": "chart_data_point", "value": "39.2", "labels": ["Revenue", "2021"]},
      {"type": "chart_data_point", "value": "41", "labels": ["Revenue", "2023"]}], TABLE),
    ([{"type": "is_bold", "text": "Total"}, {"type": "is_bold", "text": "Net"}, {"type": "is_not_bold", "text": "body"},
      {"type": "is_latex", "formula": "x^2"}], "**Total** and body $x^2$ and Net"),
    ([{"type": "missing_word_percent", "bag_of_word": {"alpha": 1}}, {"type": "is_italic", "text": "alpha"}],
     "*alpha*"),
    ([{"type": "chart_data_point", "value": "7", "labels": ["x"]}, {"type": "is_title", "text": "T"}], ""),  # empty
    ([{"type": "unexpected_word_percent", "bag_of_word": {"beta": 1}}], None),  # no output at all
    ([], "no rules on this page"),
    ([{"type": "expected_markdown", "expected_markdown": "<table><tr><th>Year</th><th>Revenue</th></tr>"
       "<tr><td>2021</td><td>39.2</td></tr><tr><td>2022</td><td>41</td></tr></table>"}], TABLE),  # a markdown table
    ([{"type": "expected_markdown", "expected_markdown": "<table><tr><td>a</td><td>b</td></tr></table>",
       "trm_unsupported": True}, {"type": "is_bold", "text": "a"}], "<table><tr><td>**a**</td><td>c</td></tr></table>"),
]


def _upstream() -> dict[str, float]:
    values: dict[str, list[float]] = defaultdict(list)
    for rules, md in PAGES:
        if rules:  # a page's table truth goes to upstream's test case, not among its rules
            (truth, *_), rest = [r for r in rules if r["type"] == "expected_markdown"] or [None], \
                [r for r in rules if r["type"] != "expected_markdown"]
            case = {k: v for k, v in (truth or {}).items() if k != "type"}
            for name, v in P.page_metrics(rest, md or "", **case).items():
                values[name].append(v)
    return {name: fmean(v) for name, v in values.items()}


def test_headlines_and_rule_pass_rates_equal_upstreams_averages():
    ours, theirs = leaderboard(PAGES), _upstream()
    for name, *_ in DIMENSIONS.values():
        assert ours.headlines[name] == pytest.approx(theirs[name], abs=1e-12), name
    assert set(ours.rule_pass_rates) == {r["type"] for rules, _ in PAGES for r in rules} - {"expected_markdown"}
    for kind, v in ours.rule_pass_rates.items():
        assert v == pytest.approx(theirs[f"rule_{kind}_pass_rate"], abs=1e-12), kind
    assert ours.pages == {"content_faithfulness": 3, "semantic_formatting": 4, "rule_chart_data_point_pass_rate": 2,
                          "grits_trm_composite": 2}
    assert ours.rule_pages["is_bold"] == 3 and ours.rule_pages["chart_data_point"] == 2


def test_a_page_weighs_as_one_in_a_rule_types_pass_rate():
    board = leaderboard(PAGES[:2])
    # page 1: is_bold "2021" not bold (0); page 2: "Total" bold, "Net" not (1/2): the mean of the pages (1/4), not
    # of the three rules (1/3)
    assert board.rule_pass_rates["is_bold"] == 0.25


def test_the_printed_board_names_each_number_and_its_pages():
    text = "\n".join(lines(leaderboard(PAGES)))
    assert "semantic_formatting" in text and "rule_is_bold_pass_rate" in text and "(3 pages)" in text
    assert text.count("rule_chart_data_point_pass_rate") == 1  # the chart headline is that type's pass rate
