"""Formula CDM as a per-page metric (``omnidoc15_formula_cdm``) on OmniDocBench's 18 demo pages, rendered for real:
`quantgate score` writes each page's CDM (upstream's per-page values, lab/2026-12-05-cdm) and its per-unit numbers,
the report's Overall from those rows is upstream's 76.94 and the value `quantgate score` prints, and every formula
is rendered once for the metric, the units and score's Overall together. Needs `make setup-cdm`; ~15 s."""

from __future__ import annotations

import json

import pytest

from quantgate.io.scores import read_scores
from quantgate.reports.families import FAMILIES, family_headlines
from quantgate.scoring.omnidoc import cdm, v15
from tests.support import upstream_cdm as rc
from tests.support import upstream_omnidoc15 as ref
from tests.support.cli import run_cli

pytestmark = [pytest.mark.skipif(ref.missing_reason() is not None, reason=ref.missing_reason() or ""),
              pytest.mark.skipif(rc.toolchain_missing() is not None, reason=rc.toolchain_missing() or "")]
V15 = next(f for f in FAMILIES if f.family == "omnidoc15")


def test_the_demo_scored_on_formula_cdm_gives_upstreams_pages_and_overall_rendering_each_formula_once(
        tmp_path, monkeypatch):
    ref.demo_pageset(tmp_path)
    rendered = []
    real = cdm.formula_cdm
    monkeypatch.setattr(cdm, "formula_cdm", lambda gt, pred: rendered.append(gt) or real(gt, pred))
    v15.page_cdm.cache_clear()
    code, out, err = run_cli("score", "--pages", tmp_path / "ps", "--predictions", ref.DEMO_PREDICTIONS,
                             "-o", tmp_path / "s.jsonl", "--metrics", "omnidoc15,omnidoc15_formula_cdm", "--json")
    assert code == 0, err
    by_score = json.loads(out)["omnidoc15"]
    rec = rc.recorded()
    assert len(rendered) == 13  # the demo's 13 formula pairs, once each: metric, units and Overall share them
    rows = read_scores(tmp_path / "s.jsonl")
    per_page = {pid: v for pid, r in rows.items() if (v := r.value(v15.CDM)) is not None}
    assert per_page.keys() == {p.removesuffix(".jpg") for p in rec["per_page_cdm"]}
    for page, value in rec["per_page_cdm"].items():
        assert per_page[page.removesuffix(".jpg")] == pytest.approx(value, abs=0.005), page
    # every row carries the metric (null without a formula), the pages with formulas their CDM sum and count
    assert all(v15.CDM in (r.model_extra or {}) for r in rows.values())
    assert sum(r.units["omnidoc15"].get(v15.CDM, (0, 0))[1] for r in rows.values()) == 13
    ms = [*v15.METRICS, v15.CDM]
    heads, notes = family_headlines(V15, ms, {"bf16": rows})
    overall, = (h.values["bf16"][0] for h in heads if h.name == "Overall")
    assert not notes
    assert f"{overall:.2f}" == f"{rec['set']['overall']:.2f}" == "76.94"
    assert overall == pytest.approx(by_score["overall"], abs=1e-9)  # the report and `quantgate score` agree
    formula_cdm, = (h.values["bf16"][0] for h in heads if h.name == "formula CDM")
    assert formula_cdm == pytest.approx(by_score["formula_cdm"], abs=1e-12)
    assert formula_cdm == pytest.approx(rec["set"]["formula_cdm"], abs=0.005)
