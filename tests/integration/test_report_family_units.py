"""The report's per-unit headlines are exact: on OmniDocBench's demo (a page with two tables among them), the table
TEDS the report prints from the rows `quantgate score` writes is the whole-set value `quantgate score` prints and
upstream v1.5's own (lab/2026-12-04-omnidoc15-oracle), where the mean of the pages' values is not; on ParseBench
pages, every leaderboard number the report prints is the one `score --metrics parsebench` prints. In a finished
study the per-unit numbers are bound with their score file: the report pools them, and an edit of one is caught by
the gate and named by the report."""

from __future__ import annotations

import json
import shutil

import pytest
from PIL import Image

from quantgate.io.scores import read_scores
from quantgate.reports import load_summary, write_reports
from quantgate.reports.families import FAMILIES, FamilyView, _tables, family_headlines
from quantgate.study.verdicts import score_file
from tests.support import upstream_omnidoc15 as ref
from tests.support.cli import run_cli
from tests.support.family_units import study_with_units

BY_FAMILY = {f.family: f for f in FAMILIES}


def _printed(family: str, ms: list[str], rows) -> dict[str, str]:
    """Headline name → the cell the report prints for the one variant."""
    fam = BY_FAMILY[family]
    heads, notes = family_headlines(fam, ms, {"v": rows})
    (_, table), = _tables(FamilyView(fam, ms, [], heads, notes), ["v"])
    return {r[0]: r[1] for r in table}


@pytest.mark.skipif(ref.missing_reason() is not None, reason=ref.missing_reason() or "")
def test_the_demos_table_teds_is_printed_as_upstream_and_score_give_it(tmp_path):
    ref.demo_pageset(tmp_path)
    code, out, err = run_cli("score", "--pages", tmp_path / "ps", "--predictions", ref.DEMO_PREDICTIONS,
                             "-o", tmp_path / "s.jsonl", "--metrics", "omnidoc15,omnidoc", "--json")
    assert code == 0, err
    printed_by_score = json.loads(out)
    rows = read_scores(tmp_path / "s.jsonl")
    two = [r.page_id for r in rows.values() if r.units["omnidoc15"].get("omnidoc15_table_teds", (0, 0))[1] > 1]
    assert two  # a real page with more than one table
    upstream = json.loads(ref.RECORDED.read_text(encoding="utf-8"))["whole_set"]["table_teds"]["v1.5"]
    for family, metric in (("omnidoc15", "omnidoc15_table_teds"), ("omnidoc", "omnidoc_table_teds")):
        cell = _printed(family, [metric], rows)["table TEDS"]
        whole_set = printed_by_score[family]["set_values"][metric]
        assert cell == f"{whole_set:.4f} (9 pages)" == f"{upstream:.4f} (9 pages)", (family, cell)
        page_mean = sum(v for r in rows.values() if (v := r.value(metric)) is not None) / 9
        assert f"{page_mean:.4f}" != f"{whole_set:.4f}"  # the mean of page means, printed before, is not upstream's
        # and every other headline the family prints is the value `quantgate score` prints, over the same pages
        # (the metrics scored here: formula CDM is asked for by name, and its headline is tested with it)
        heads = [h for h in BY_FAMILY[family].headlines if h.metric in printed_by_score[family]["set_values"]]
        printed = _printed(family, [h.metric for h in heads], rows)
        assert len(heads) >= 4 and set(printed) >= {h.name for h in heads}
        for h in heads:
            v, n = printed_by_score[family]["set_values"][h.metric], printed_by_score[family]["pages_scored"][h.metric]
            assert printed[h.name] == f"{v:.4f} ({n} pages)", (family, h.name)


RULES = [  # two pages, several rules of a type on one, each dimension quantgate scores
    ("doc1", {"type": "missing_word_percent", "rule": {"bag_of_word": {"quarterly": 1, "revenue": 2}}}),
    ("doc1", {"type": "order", "rule": {"before": "quarterly", "after": "revenue"}}),
    ("doc1", {"type": "is_bold", "rule": {"text": "quarterly"}}),
    ("doc1", {"type": "is_bold", "rule": {"text": "fell"}}),
    ("doc1", {"type": "chart_data_point", "rule": {"value": "4.2", "labels": ["revenue"]}}),
    ("doc2", {"type": "is_bold", "rule": {"text": "Total"}}),
    ("doc2", {"type": "order", "rule": {"before": "Total", "after": "net"}}),
    ("doc2", {"type": "missing_word_percent", "rule": {"bag_of_word": {"net": 1, "gross": 1}}}),
    ("doc2", {"type": "expected_markdown", "expected_markdown": "<table><tr><td>net</td><td>1</td></tr></table>"}),
]
OUTPUTS = {"doc1_pg1": "Revenue fell; **quarterly** revenue rose.\n\n| | revenue |\n|---|---|\n| Q3 | $4.2 |",
           "doc2_pg1": "net before **Total**"}


def test_every_parsebench_number_is_printed_as_score_prints_it(tmp_path):
    (tmp_path / "src").mkdir()
    (tmp_path / "out").mkdir()
    for pid, text in OUTPUTS.items():
        Image.new("RGB", (64, 64), "white").save(tmp_path / "src" / f"{pid}.png")
        (tmp_path / "out" / f"{pid}.md").write_text(text)
    (tmp_path / "rules.jsonl").write_text("".join(json.dumps({"pdf": f"text/{d}.pdf", "page": 1, **r}) + "\n"
                                                  for d, r in RULES))
    code, _, err = run_cli("pages", "import", tmp_path / "src", "-o", tmp_path / "set", "--parsebench",
                           tmp_path / "rules.jsonl", "--calibration-fraction", "0")
    assert code == 0, err
    code, out, err = run_cli("score", "--pages", tmp_path / "set", "--predictions", tmp_path / "out",
                             "-o", tmp_path / "s.jsonl", "--metrics", "parsebench", "--json")
    assert code == 0, err
    board = json.loads(out)["parsebench"]
    printed = _printed("parsebench", ["parsebench_content", "parsebench_formatting", "parsebench_charts"],
                       read_scores(tmp_path / "s.jsonl"))
    want = {name: (v, board["pages"][name]) for name, v in board["headlines"].items()}
    want |= {f"rule_{k}_pass_rate": (v, board["rule_pages"][k]) for k, v in board["rule_pass_rates"].items()}
    assert printed == {name: f"{v:.4f} ({n} page{'s' * (n != 1)})" for name, (v, n) in want.items()}
    assert board["rule_pass_rates"]["is_bold"] == 0.75  # (1/2 + 1) / 2 pages: a page weighs as one


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    return study_with_units(tmp_path_factory.mktemp("units") / "s")


def _expected(out, variant):
    lines = [json.loads(x) for x in (out / score_file(variant, 1)).read_text().splitlines()]
    teds = [u["omnidoc15"]["omnidoc15_table_teds"] for r in lines if "omnidoc15_table_teds" in (u := r["units"])["omnidoc15"]]
    order = [r["units"]["parsebench"]["rule_order_pass_rate"][0] for r in lines if r["units"]["parsebench"]]
    return (f"{sum(s for s, _ in teds) / sum(n for _, n in teds):.4f} ({len(teds)} pages)",
            f"{sum(order) / len(order):.4f} ({len(order)} pages)")


def test_a_study_report_pools_the_bound_units(study):
    md, html = (study / "report.md").read_text(), (study / "report.html").read_text()
    for variant in ("bf16", "fp8", "bad"):
        teds, order = _expected(study, variant)
        assert f"<td>{teds}</td>" in html and f"<td>{order}</td>" in html
    teds_row = next(x for x in md.splitlines() if x.startswith("| table TEDS |"))
    assert teds_row == "| table TEDS | " + " | ".join(_expected(study, v)[0] for v in ("bf16", "fp8", "bad")) + \
        " | mean over all tables, as upstream |"
    assert "| rule_order_pass_rate |" in md and "scored before score rows kept" not in md


def test_an_edited_unit_is_caught_by_the_gate_and_named_by_the_report(study, tmp_path):
    folder = shutil.copytree(study, tmp_path / "s")
    f = folder / score_file("fp8", 1)
    rows = [json.loads(x) for x in f.read_text().splitlines()]
    row = next(r for r in rows if r["units"]["omnidoc15"])
    row["units"]["omnidoc15"]["omnidoc15_table_teds"][0] += 0.5  # the metric values untouched
    f.write_text("".join(json.dumps(r) + "\n" for r in rows))
    code, out, err = run_cli("gate", folder, "--variants", "fp8")
    assert code == 3 and out.startswith("INVALID: ") and score_file("fp8", 1) in out, (code, out, err)
    write_reports(load_summary(folder), folder)
    md = (folder / "report.md").read_text()
    assert f"fp8: {score_file('fp8', 1)} changed since the study" in md
