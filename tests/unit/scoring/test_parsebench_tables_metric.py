"""The parsebench_tables metric end to end without a server: a ParseBench table file read into each page's table
truth as upstream's loader reads it (inline expected_markdown, the expected_markdown.json beside the file, the
table settings from any line, a later one winning; compared with upstream's loader), refusals naming the line,
the registered metric (score_one), the leaderboard's tables headline, the report's units and the truth-free bound."""

from __future__ import annotations

import json

import pytest

from quantgate.errors import DataError
from quantgate.scoring.bounds import truth_free_bound
from quantgate.scoring.metrics import get_metric, score_one
from quantgate.scoring.parsebench.dataset import read_rules, typed_rules
from quantgate.scoring.parsebench.leaderboard import leaderboard, lines
from quantgate.scoring.parsebench.tables.page import TableTruth
from quantgate.scoring.units import page_units
from tests.support import parsebench_ref as P

GT = "<table><tr><th>Item</th><th>Qty</th></tr><tr><td>Apple</td><td>3</td></tr><tr><td>Pear</td><td>5</td></tr></table>"
ROWS = [
    {"pdf": "table/a.pdf", "page": 1, "type": "expected_markdown", "id": "a-md", "expected_markdown": "# A\n" + GT,
     "rule": {"trm_unsupported": True}},
    {"pdf": "table/a.pdf", "page": 1, "type": "table", "rule": {"max_top_title_rows": 2}},  # a setting on another line
    {"pdf": "table/b.pdf", "type": "expected_markdown", "rule": json.dumps({"max_top_title_rows": 0})},  # sidecar
    {"pdf": "table/c.pdf", "type": "expected_markdown", "expected_markdown": "no tables on this page"},
    {"pdf": "table/d.pdf", "type": "missing_word_percent", "rule": {"bag_of_word": {"apple": 1}}},
]


def _write(tmp_path, rows, sidecar=None):
    f = tmp_path / "table.jsonl"
    f.write_text("".join(json.dumps(r) + "\n" for r in rows))
    if sidecar is not None:
        (tmp_path / "expected_markdown.json").write_text(json.dumps(sidecar))
    return f


def test_table_truth_and_settings_are_read_per_page(tmp_path):
    got = read_rules(_write(tmp_path, ROWS, {"table/b.pdf": GT})).by_page
    (a,) = typed_rules(got["a_pg1"], "tables")
    assert a == TableTruth(type="expected_markdown", id="a-md", expected_markdown="# A\n" + GT, trm_unsupported=True,
                           max_top_title_rows=2)
    (b,) = typed_rules(got["b_pg1"], "tables")
    assert b.expected_markdown == GT and b.max_top_title_rows == 0 and not b.trm_unsupported
    assert "c_pg1" not in got  # a truth without tables scores no table: no entry
    assert typed_rules(got["d_pg1"], "tables") == [] and len(typed_rules(got["d_pg1"], "content")) == 1


@pytest.mark.skipif(bool(P.reference_missing_reason()), reason=P.reference_missing_reason() or "")
def test_the_reading_is_upstreams_loaders(tmp_path):
    P.load()
    from parse_bench.test_cases.loader import _load_jsonl_dataset

    rows = ROWS[:1] + [{**ROWS[1], "type": "expected_markdown"}] + ROWS[2:4]  # its loader would coerce "table"
    f = _write(tmp_path, rows, {"table/b.pdf": GT})
    ours = read_rules(f).by_page
    compared = 0
    for case in _load_jsonl_dataset(tmp_path):
        pid = f"{case.file_path.stem}_pg1"
        mine = typed_rules(ours.get(pid, []), "tables")
        if not case.expected_markdown or "<table" not in case.expected_markdown:
            assert mine == []
            continue
        (t,) = mine
        assert (t.expected_markdown, t.trm_unsupported, t.allow_splitting_ambiguous_merged_tables,
                t.max_top_title_rows) == (case.expected_markdown, case.trm_unsupported,
                                          case.allow_splitting_ambiguous_merged_tables, case.max_top_title_rows)
        compared += 1
    assert compared == 2


@pytest.mark.parametrize("row, says", [
    ({"pdf": "t/x.pdf", "type": "expected_markdown", "expected_markdown": '<table><tr><td rowspan="two">a</td></tr>'
                                                                           "</table>"}, r"table\.jsonl:1 .*truth table 1"),
    ({"pdf": "t/x.pdf", "type": "expected_markdown", "expected_markdown": GT, "rule": {"max_top_title_rows": "x"}},
     r"table\.jsonl:1: x_pg1's table settings: max_top_title_rows"),
    ({"pdf": "t/x.pdf", "type": "expected_markdown", "expected_markdown": ["<table>"]},
     r"table\.jsonl:1: 'expected_markdown' must be"),
    ({"type": "expected_markdown", "expected_markdown": GT}, r"table\.jsonl:1: no 'pdf'"),
])
def test_bad_table_truth_is_refused_naming_the_line(tmp_path, row, says):
    with pytest.raises(DataError, match=says):
        read_rules(_write(tmp_path, [row]))


def test_a_bad_sidecar_is_refused(tmp_path):
    with pytest.raises(DataError, match="expected_markdown.json: must map"):
        read_rules(_write(tmp_path, [ROWS[2]], {"table/b.pdf": 3}))


def test_the_metric_scores_the_page_and_its_empty_and_missing_outputs():
    m = get_metric("parsebench_tables")
    rules = [{"type": "expected_markdown", "expected_markdown": GT}]
    assert m.higher_is_better and m.worst == 0.0 and m.margin > 0
    assert score_one(m, GT, None, [], parsebench=rules) == 1.0
    assert score_one(m, "", None, [], parsebench=rules) == 0.0  # upstream: no table predicted
    assert score_one(m, None, None, [], parsebench=rules) == 0.0
    half = GT.replace("Pear", "Plum").replace("Apple", "Fig")
    assert 0.0 < score_one(m, half, None, [], parsebench=rules) < 1.0
    assert score_one(m, GT, None, [], parsebench=[{"type": "order", "before": "a", "after": "b"}]) is None


def test_the_leaderboard_averages_grits_trm_composite_over_pages_with_tables():
    with_tables = [{"type": "expected_markdown", "expected_markdown": GT}]
    board = leaderboard([(with_tables, GT), (with_tables, ""), ([{"type": "order", "before": "a", "after": "b"}], "a b")])
    assert board.headlines["grits_trm_composite"] == 0.5 and board.pages["grits_trm_composite"] == 2
    assert not any("expected_markdown" in k for k in board.rule_pass_rates)  # the truth is no rule to pass
    assert any(line.strip().startswith("grits_trm_composite") for line in lines(board))
    units = page_units([get_metric("parsebench_tables")], GT, None, with_tables)
    assert units == {"parsebench": {"grits_trm_composite": (1.0, 1)}}


def test_the_bound_is_the_range_unless_neither_output_has_a_table():
    table = "Intro.\n" + GT
    assert truth_free_bound("parsebench_tables", "some words", "other words entirely") == 0.0
    assert truth_free_bound("parsebench_tables", table, table) == 0.0
    assert truth_free_bound("parsebench_tables", table, "Intro.\n" + GT.replace("5", "6")) == 1.0
    assert truth_free_bound("parsebench_tables", table, "no table") == 1.0


def test_init_proposes_parsebench_tables_for_pages_with_table_truth(tmp_path):
    from quantgate.study.init import prepare_pages, render_study
    from tests.unit.study.test_init_parsebench import RULES as TEXT_RULES
    from tests.unit.study.test_init_parsebench import _model, _page_set

    table = {"pdf": "text/doc3.pdf", "page": 1, "type": "expected_markdown", "expected_markdown": GT}
    pset = _page_set(tmp_path, [*TEXT_RULES, table])
    pf = prepare_pages(pset, pset, tmp_path / "no-model")
    assert pf.parsebench == {"parsebench_content": 1, "parsebench_formatting": 2, "parsebench_tables": 1}
    text = render_study(_model(tmp_path), pf, tmp_path / "study.yaml", "transformers", None)
    assert "parsebench_tables" in text.split("metrics:")[1].split("margins:")[0]
