"""`pages import --parsebench`: each page carries its ParseBench content, formatting and chart-point rules, scored by
parsebench_content, parsebench_formatting and parsebench_charts; another dimension's rule is left out and counted;
a rule naming a page not imported, or an unknown rule type, is refused with nothing written."""

from __future__ import annotations

import json

import pytest
from PIL import Image

from quantgate.io.pageset import load_pageset
from quantgate.scoring.metrics import get_metric
from quantgate.scoring.scores import score_pages
from tests.support.cli import run_cli

RULES = [
    {"pdf": "text/doc1.pdf", "page": 1, "type": "missing_word_percent",
     "rule": {"bag_of_word": {"quarterly": 1, "revenue": 2}}},
    {"pdf": "text/doc1.pdf", "page": 1, "type": "order", "rule": {"before": "quarterly", "after": "revenue"}},
    {"pdf": "text/doc1.pdf", "page": 1, "type": "is_bold", "rule": {"text": "quarterly"}},
    {"pdf": "text/doc1.pdf", "page": 1, "type": "chart_data_array_labels", "rule": {"data": [["Q1", 3]]}},
    {"pdf": "text/doc1.pdf", "page": 1, "type": "chart_data_point", "rule": {"value": "4.2", "labels": ["revenue"]}},
]


def _setup(tmp_path, rows):
    src = tmp_path / "src"
    src.mkdir()
    for name in ("doc1_pg1", "doc2_pg1"):
        Image.new("RGB", (64, 64), "white").save(src / f"{name}.png")
    f = tmp_path / "text.jsonl"
    f.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return src, f


def test_rules_travel_with_their_page_and_are_scored(tmp_path):
    src, f = _setup(tmp_path, RULES)
    code, _, err = run_cli("pages", "import", src, "-o", tmp_path / "set", "--parsebench", f)
    assert code == 0, err
    assert "1 chart_data_array_labels rule(s) left out" in err
    # a page with ParseBench rules is scored: not among the pages only the truth-free bound judges
    (neither,) = [line for line in err.splitlines() if "neither truth nor checks" in line]
    assert neither.endswith("not scored: doc2_pg1") and "doc1_pg1" not in neither
    ps = load_pageset(tmp_path / "set")
    pages = ps.by_id()
    assert [r["type"] for r in pages["doc1_pg1"].parsebench] == ["missing_word_percent", "order", "is_bold",
                                                                "chart_data_point"]
    assert pages["doc2_pg1"].parsebench == [] and pages["doc1_pg1"].schema_version == 5
    metrics = [get_metric(m) for m in ("parsebench_content", "parsebench_formatting", "parsebench_charts")]
    rows = {r.page_id: r for r in score_pages(ps, {"doc1_pg1": "Revenue fell; **quarterly** revenue rose.\n\n"
                                                               "| | revenue |\n|---|---|\n| Q3 | $4.2 |",
                                                   "doc2_pg1": "anything"}, metrics)}
    # missing: revenue twice and quarterly once, 3/3; order: the first "quarterly" precedes the last "revenue"
    assert rows["doc1_pg1"].model_extra["parsebench_content"] == 1.0
    assert rows["doc1_pg1"].model_extra["parsebench_formatting"] == 1.0  # quarterly is bold
    assert rows["doc1_pg1"].model_extra["parsebench_charts"] == 1.0  # 4.2 under the revenue column
    assert rows["doc2_pg1"].model_extra["parsebench_content"] is None
    assert rows["doc2_pg1"].model_extra["parsebench_formatting"] is None
    assert rows["doc2_pg1"].model_extra["parsebench_charts"] is None


def test_a_rule_for_a_page_not_imported_is_refused(tmp_path):
    src, f = _setup(tmp_path, RULES + [{"pdf": "text/doc9.pdf", "page": 2, "type": "order",
                                        "rule": {"before": "abc", "after": "def"}}])
    code, _, err = run_cli("pages", "import", src, "-o", tmp_path / "set", "--parsebench", f)
    assert code == 65 and "'doc9_pg2'" in err and "not in the imported set" in err
    assert not (tmp_path / "set").exists() or not any((tmp_path / "set").iterdir())


def test_an_unknown_rule_type_is_refused_naming_its_line(tmp_path):
    src, f = _setup(tmp_path, RULES + [{"pdf": "text/doc1.pdf", "type": "missing_word_pct", "rule": {}}])
    code, _, err = run_cli("pages", "import", src, "-o", tmp_path / "set", "--parsebench", f)
    assert code == 65 and f"{f}:{len(RULES) + 1}: unknown ParseBench rule type 'missing_word_pct'" in err
    assert not (tmp_path / "set").exists()


def test_score_prints_the_dimension_headline_as_upstream_aggregates_it(tmp_path):
    """`score --metrics parsebench` prints the mean over the pages that carry rules: upstream's leaderboard number
    (a page without rules is left out, not counted as 0 or 1)."""
    rows = RULES + [{"pdf": "doc2.pdf", "page": 1, "type": "unexpected_word_percent",
                     "rule": {"bag_of_word": {"alpha": 1}}},
                    {"pdf": "doc2.pdf", "page": 1, "type": "expected_markdown", "rule": {},  # its table truth
                     "expected_markdown": "<table><tr><td>alpha</td><td>beta</td></tr></table>"}]
    src, f = _setup(tmp_path, rows)
    (src / "doc3_pg1.png").write_bytes((src / "doc1_pg1.png").read_bytes())
    assert run_cli("pages", "import", src, "-o", tmp_path / "set", "--parsebench", f, "--calibration-fraction",
                   "0")[0] == 0
    preds = tmp_path / "preds"
    preds.mkdir()
    (preds / "doc1_pg1.md").write_text("revenue quarterly")  # missing 2/3, order broken: (2/3) / 1.5
    (preds / "doc2_pg1.md").write_text("alpha beta")  # unexpected 1/2
    (preds / "doc3_pg1.md").write_text("no rules here")
    code, out, err = run_cli("score", "--pages", tmp_path / "set", "--predictions", preds, "-o",
                             tmp_path / "s.jsonl", "--metrics", "parsebench", "--json")
    assert code == 0, err
    body = json.loads(out)
    summaries = {m["metric"]: m for m in body["metrics"]}
    assert summaries["parsebench_content"]["n"] == 2
    assert summaries["parsebench_content"]["mean"] == pytest.approx(((2 / 3) / 1.5 + 0.5) / 2)
    # only doc1 has a formatting rule (is_bold "quarterly", not bold there): styling F(0, 1) = 0
    assert summaries["parsebench_formatting"]["n"] == 1 and summaries["parsebench_formatting"]["mean"] == 0.0
    # beside them, upstream's leaderboard numbers: the headlines are the same means; each rule type's pass rate
    board = body["parsebench"]
    assert board["headlines"]["content_faithfulness"] == pytest.approx(summaries["parsebench_content"]["mean"])
    assert board["pages"] == {"content_faithfulness": 2, "semantic_formatting": 1, "rule_chart_data_point_pass_rate": 1,
                              "grits_trm_composite": 1}
    # doc2's output has no table where its truth has one: GTRM 0, as upstream scores it
    assert board["headlines"]["grits_trm_composite"] == 0.0 == summaries["parsebench_tables"]["mean"]
    assert summaries["parsebench_tables"]["n"] == 1
    assert board["rule_pass_rates"] == pytest.approx({"chart_data_point": 0.0, "is_bold": 0.0, "order": 0.0,
                                                      "missing_word_percent": 2 / 3, "unexpected_word_percent": 0.5})
