"""OmniDocBench's 18 demo pages imported (`pages import --truth OmniDocBench_demo.json`) and upstream's demo predictions
scored with the v1.5 family (`quantgate score --metrics omnidoc15`): the whole-set values beside the per-page
means are upstream v1.5's (its run recorded in lab/2026-12-04-omnidoc15-oracle/result.json, checked live by
tests/unit/scoring/test_omnidoc15_parity.py), and Overall is upstream's (formula CDM rendered, lab/2026-12-05-cdm) where
the CDM toolchain is installed (CI: make setup-cdm), else said to be not computed, not given a number."""

import json

import pytest

from quantgate.cli import main
from tests.support import upstream_cdm as cdm_ref
from tests.support import upstream_omnidoc15 as ref

pytestmark = pytest.mark.skipif(ref.missing_reason() is not None, reason=ref.missing_reason() or "")


@pytest.fixture(scope="module")
def demo_set(tmp_path_factory):
    return ref.demo_pageset(tmp_path_factory.mktemp("omnidoc15"))


def test_the_demo_scores_to_upstreams_v15_values_with_overall_left_out(demo_set, tmp_path, capsys):
    capsys.readouterr()
    assert main(["score", "--pages", str(demo_set), "--predictions", str(ref.DEMO_PREDICTIONS),
                 "-o", str(tmp_path / "s.jsonl"), "--metrics", "omnidoc15", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    recorded = json.loads(ref.RECORDED.read_text(encoding="utf-8"))["whole_set"]
    got = out["omnidoc15"]["set_values"]
    for ours, theirs in (("omnidoc15_text_edit", "text_edit"), ("omnidoc15_formula_edit", "formula_edit"),
                         ("omnidoc15_table_teds", "table_teds"), ("omnidoc15_table_teds_struct", "table_teds_struct"),
                         ("omnidoc15_table_edit", "table_edit"), ("omnidoc15_reading_order", "reading_order_edit")):
        assert got[ours] == pytest.approx(recorded[theirs]["v1.5"], abs=0.005), ours
    if cdm_ref.toolchain_missing() is None:
        assert out["omnidoc15"]["overall"] == pytest.approx(cdm_ref.recorded()["set"]["overall"], abs=0.005)
        assert out["omnidoc15"]["overall_why"] is None and out["omnidoc15"]["formula_cdm_notes"] == []
    else:
        assert out["omnidoc15"]["overall"] is None and "make setup-cdm" in out["omnidoc15"]["overall_why"]
    assert "omnidoc" not in out  # v1.0's values only when its family is asked for
    by_metric = {m["metric"]: m for m in out["metrics"]}
    assert set(by_metric) == {"omnidoc15_text_edit", "omnidoc15_formula_edit", "omnidoc15_table_teds",
                              "omnidoc15_reading_order"}
    # 2 of the 18 pages have display formulas, 9 have tables: the rest are left out, not scored 0
    assert (by_metric["omnidoc15_formula_edit"]["n"], by_metric["omnidoc15_table_teds"]["n"]) == (2, 9)


def test_the_text_summary_prints_v15_beside_v10_and_says_why_no_overall(demo_set, tmp_path, capsys):
    capsys.readouterr()
    assert main(["score", "--pages", str(demo_set), "--predictions", str(ref.DEMO_PREDICTIONS),
                 "-o", str(tmp_path / "s.jsonl"), "--metrics", "omnidoc,omnidoc15"]) == 0
    text = capsys.readouterr().out
    v10 = text.index("OmniDocBench whole-set values")
    v15 = text.index("OmniDocBench v1.5 whole-set values")
    assert v10 < v15
    assert "omnidoc15_formula_edit" in text[v15:] and "0.3189" in text[v15:]
    head = "Overall = ((1 - text edit)*100 + table TEDS + formula CDM) / 3"
    if cdm_ref.toolchain_missing() is None:
        assert f"{head} = 76.94 (formula CDM 0.8758, the mean over 13 display formulas)" in text[v15:]
    else:
        assert f"{head} is not computed" in text[v15:]
