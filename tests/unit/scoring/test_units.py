"""What a score row keeps for the whole-set headlines that are not page means (``scoring.units``), and that the
report's pooling of it gives the family's own whole-set numbers: ParseBench's leaderboard (each dimension, each rule
type, a page weighing as one) to the last bit, and OmniDocBench's table TEDS as the mean over tables on a page with
two. (The leaderboard and the TEDS values themselves are held to upstream's by the parity tests; the OmniDocBench
demo, through ``quantgate score`` and the report, by tests/integration/test_report_family_units.py.)"""

from __future__ import annotations

from quantgate.reports.families import FAMILIES, family_headlines
from quantgate.schema.scores import ScoreRow
from quantgate.scoring.metrics import parse_metric_list
from quantgate.scoring.omnidoc import v15
from quantgate.scoring.omnidoc.truth import parse_truth
from quantgate.scoring.parsebench import leaderboard as lb
from quantgate.scoring.units import page_units, repeats_units

PARSEBENCH = next(f for f in FAMILIES if f.family == "parsebench")
TABLE = "## Sales\n\n| Year | Revenue |\n|---|---|\n| 2021 | 39.2 |\n| 2022 | 41 |\n"
# several rules of one type on a page (is_bold, order), so a page's mean and the rules' mean differ
PAGES = [
    ([{"type": "missing_word_percent", "bag_of_word": {"revenue": 2, "sales": 1}},
      {"type": "order", "before": "Sales", "after": "Revenue"}, {"type": "order", "before": "2022", "after": "2021"},
      {"type": "is_title", "text": "Sales"}, {"type": "is_bold", "text": "2021"},
      {"type": "chart_data_point", "value": "39.2", "labels": ["Revenue", "2021"]}], TABLE),
    ([{"type": "is_bold", "text": "Total"}, {"type": "is_bold", "text": "Net"}, {"type": "is_not_bold", "text": "body"},
      {"type": "order", "before": "Total", "after": "body"}], "**Total** and body and Net"),
    ([{"type": "missing_word_percent", "bag_of_word": {"alpha": 1}}, {"type": "is_italic", "text": "alpha"}], ""),
    ([{"type": "unexpected_word_percent", "bag_of_word": {"beta": 1}}, {"type": "is_bold", "text": "beta"}], None),
    ([{"type": "expected_markdown", "expected_markdown": "<table><tr><td>2021</td><td>39.2</td></tr></table>"}],
     "<table><tr><td>2021</td><td>39.3</td></tr></table>"),  # a table page (its truth entry is no rule)
]
ALL = parse_metric_list("parsebench")


def _rows(metrics) -> dict[str, ScoreRow]:
    return {f"p{i}": ScoreRow(page_id=f"p{i}", units=page_units(metrics, text, None, rules))
            for i, (rules, text) in enumerate(PAGES)}


def _pooled(rows, ms) -> dict[str, float | None]:
    heads, _ = family_headlines(PARSEBENCH, ms, {"v": rows})
    return {h.name: h.values["v"][0] for h in heads if h.metric is None}  # the headlines read off the units


def test_pooled_units_are_the_leaderboard_of_the_same_outputs():
    board = lb.leaderboard(PAGES)
    got = _pooled(_rows(ALL), [m.name for m in ALL])
    want = {**board.headlines, **{f"rule_{k}_pass_rate": v for k, v in board.rule_pass_rates.items()}}
    # the declared headlines (content_faithfulness, ...) are the metrics' page means; every other is here
    declared = {h.name for h in PARSEBENCH.headlines}
    assert got == {k: v for k, v in want.items() if k not in declared}
    # a page weighs as one: is_bold is (0 + 1/2 + 0) / 3 pages, not 1 rule in 4
    assert got["rule_is_bold_pass_rate"] == 1 / 6


def test_only_the_scored_dimensions_are_kept():
    rows = _rows(parse_metric_list("parsebench_content"))
    keys = {k for r in rows.values() for k in r.units["parsebench"]}
    assert keys == {"content_faithfulness", "rule_missing_word_percent_pass_rate", "rule_order_pass_rate",
                    "rule_unexpected_word_percent_pass_rate"}


def test_a_dimension_named_by_the_scorer_reaches_the_rows_with_no_change_here(monkeypatch):
    # the leaderboard's table is read as it is at scoring time: a dimension it names (here content under another
    # name) is what the rows keep and what the report shows
    name, metric, page_fn, rule_fn = lb.DIMENSIONS["content"]
    monkeypatch.setitem(lb.DIMENSIONS, "content", ("a_new_dimension", metric, page_fn, rule_fn))
    got = _pooled(_rows(ALL), [m.name for m in ALL])
    assert got["a_new_dimension"] == lb.leaderboard(PAGES).headlines["a_new_dimension"]
    assert name not in got


def test_a_page_with_two_tables_keeps_their_sum_and_count():
    truth = ("<table><tr><td>year</td><td>sales</td></tr><tr><td>2021</td><td>39</td></tr></table>\n\ntext\n\n"
             "<table><tr><td>name</td><td>age</td></tr><tr><td>Ann</td><td>31</td></tr><tr><td>Bob</td><td>42</td></tr>"
             "</table>\n")
    pred = ("<table><tr><td>year</td><td>sales</td></tr><tr><td>2021</td><td>38</td></tr></table>\n\ntext\n\n"
            "<table><tr><td>name</td><td>age</td></tr><tr><td>Ann</td><td>31</td></tr></table>\n")
    tables = v15.score_page(pred, parse_truth(truth, image="page", source="t")).tables["omnidoc15_table_teds"]
    assert len(tables) == 2 and tables[0] != tables[1]
    units = page_units(parse_metric_list("omnidoc15,omnidoc"), pred, truth, None)
    assert units["omnidoc15"] == {"omnidoc15_table_teds": (sum(tables), 2)}
    assert units["omnidoc"]["omnidoc_table_teds"][1] == 2
    # a family scored on the page without its TEDS metric is keyed, keeping nothing
    assert page_units(parse_metric_list("omnidoc15_text_edit"), pred, truth, None) == {"omnidoc15": {}}
    assert page_units(parse_metric_list("ned"), pred, truth, None) == {}


def test_repeats_keep_the_mean_of_each_number():
    one = {"omnidoc15": {"omnidoc15_table_teds": (1.0, 2)}, "parsebench": {}}
    two = {"omnidoc15": {"omnidoc15_table_teds": (0.5, 2)}, "parsebench": {}}
    assert repeats_units([one, two]) == {"omnidoc15": {"omnidoc15_table_teds": (0.75, 2)}, "parsebench": {}}
