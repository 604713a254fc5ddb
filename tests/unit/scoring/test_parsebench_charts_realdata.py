"""Parity of the chart rule and page score with upstream ParseBench's on real outputs: olmOCR-bench's sample
system outputs (marker, mistral, ...) with the sample's `table` checks wrapped as `chart_data_point` rules (the
checked cell as the value, its neighbours and headings as labels; numbers like "3.32T" and "11.8B" among them),
and OmniDocBench's 18 demo predictions with their truth tables' cells wrapped the same way. Same score on every
rule, and the same page score as upstream's evaluator."""

from __future__ import annotations

import json

import pytest

from quantgate.scoring.parsebench import charts as C
from quantgate.scoring.parsebench.chart_tables import html_tables
from tests.support import parsebench_ref as P
from tests.unit.scoring.test_parsebench_realdata import _WHY, OLMOCR_SAMPLE, OMNIDOC_DEMO

pytestmark = pytest.mark.skipif(bool(_WHY), reason=_WHY or "")
RELATIONS = ("up", "down", "left", "right", "top_heading", "left_heading")


def _olmocr_pages():
    checks = [json.loads(line) for line in (OLMOCR_SAMPLE / "dataset.jsonl").read_text().splitlines() if line]
    by_page: dict[str, list[dict]] = {}
    for c in (c for c in checks if c["type"] == "table"):
        labels = [c[k] for k in RELATIONS if c.get(k)] or ["Type"]
        by_page.setdefault(f"{c['pdf'].rsplit('.', 1)[0]}_pg{c['page']}", []).append(
            {"type": "chart_data_point", "value": c["cell"], "labels": labels, "max_diffs": c.get("max_diffs", 0)})
    for system in sorted(p for p in OLMOCR_SAMPLE.iterdir() if p.is_dir() and p.name != "pdfs"):
        for out in sorted(system.glob("*_repeat1.md")):
            if rules := by_page.get(out.name.removesuffix("_repeat1.md")):
                yield rules, out.read_text(encoding="utf-8")


def _omnidoc_pages():
    """Each truth table's body cells (up to six a table), labelled by their row's first cell and column's top."""
    for page in json.loads((OMNIDOC_DEMO / "omnidocbench_demo" / "OmniDocBench_demo.json").read_text()):
        stem = page["page_info"]["image_path"].rsplit(".", 1)[0]
        md = (OMNIDOC_DEMO / "end2end" / f"{stem}.md").read_text(encoding="utf-8")
        rules = []
        for block in (d for d in page["layout_dets"] if d["category_type"] == "table" and d.get("html")):
            for t in html_tables(block["html"]):
                rules += [{"type": "chart_data_point", "value": t.cells[r][c], "labels": [t.cells[r][0], t.cells[0][c]]}
                          for r in range(1, len(t.cells)) for c in range(1, t.width)
                          if t.cells[r][c].strip() and t.cells[r][0].strip() and t.cells[0][c].strip()][:6]
        if rules:
            yield rules, md


@pytest.mark.parametrize(("pages", "at_least"), [(_olmocr_pages, 60), (_omnidoc_pages, 40)],
                         ids=["olmocr-sample", "omnidoc-demo"])
def test_every_real_chart_point_and_page_agrees(pages, at_least):
    agree, differ, passed, page_scores = 0, [], 0, []
    for rules, md in pages():
        a, p, d, kept = P.rule_parity(rules, md, C.ChartPoint.model_validate, C.problem, C.score)
        agree, passed, differ = agree + a, passed + p, differ + d
        page_scores.append((C.page_score([C.ChartPoint.model_validate(r) for r in kept], md),
                            P.page_metrics(kept, md).get("rule_chart_data_point_pass_rate")))
    assert agree > at_least and not differ, (agree, differ[:5])
    assert 0 < passed < agree  # both outcomes occur on real outputs
    assert [o for o, _ in page_scores] == pytest.approx([t for _, t in page_scores], abs=1e-12)
