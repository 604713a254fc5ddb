"""Parity of the semantic-formatting rules and page score with upstream ParseBench's on real outputs: olmOCR-bench's
sample system outputs (marker, mistral, ...), its `math` checks wrapped as `is_latex` rules and its `present` texts
as style and title rules; OmniDocBench's 18 demo predictions against their truth's titles (`is_title`, and their
order as a `title_hierarchy_percent`), display formulas (`is_latex`), page headers (`is_header`) and body text
(`is_not_bold`, `is_italic`). Same score on every rule, and the same page score as upstream's evaluator."""

from __future__ import annotations

import json

import pytest

from quantgate.scoring.parsebench import formatting as F
from quantgate.scoring.parsebench import formatting_page as FP
from tests.support import parsebench_ref as P
from tests.unit.scoring.test_parsebench_realdata import _WHY, OLMOCR_SAMPLE, OMNIDOC_DEMO

pytestmark = pytest.mark.skipif(bool(_WHY), reason=_WHY or "")


def _omnidoc_pages():
    """(rules, output) per demo page."""
    for page in json.loads((OMNIDOC_DEMO / "omnidocbench_demo" / "OmniDocBench_demo.json").read_text()):
        stem = page["page_info"]["image_path"].rsplit(".", 1)[0]
        md = (OMNIDOC_DEMO / "end2end" / f"{stem}.md").read_text(encoding="utf-8")
        blocks = sorted(page["layout_dets"], key=lambda d: d.get("order") or 0)
        titles = [d["text"].strip() for d in blocks if d["category_type"] == "title" and d.get("text", "").strip()]
        rules = [{"type": "is_title", "text": t} for t in titles]
        if titles:
            rules.append({"type": "title_hierarchy_percent", "title_hierarchy": {titles[0]: titles[1:]}})
        rules += [{"type": "is_latex", "formula": d["latex"]} for d in blocks
                  if d["category_type"] == "equation_isolated" and d.get("latex", "").strip()]
        rules += [{"type": "is_header", "text": d["text"]} for d in blocks
                  if d["category_type"] == "header" and d.get("text", "").strip()]
        body = [d["text"].strip() for d in blocks if d["category_type"] == "text_block" and d.get("text", "").strip()]
        rules += [{"type": kind, "text": t[:40]} for t in body[:4] for kind in ("is_not_bold", "is_italic")]
        if rules:
            yield rules, md


def _olmocr_pages():
    checks = [json.loads(line) for line in (OLMOCR_SAMPLE / "dataset.jsonl").read_text().splitlines() if line]
    by_page: dict[str, list[dict]] = {}
    for c in checks:
        rules = [{"type": "is_latex", "formula": c["math"]}] if c["type"] == "math" else [
            {"type": kind, "text": c["text"]} for kind in ("is_bold", "is_not_bold", "is_title", "is_sup")
        ] if c["type"] == "present" else []
        by_page.setdefault(f"{c['pdf'].rsplit('.', 1)[0]}_pg{c['page']}", []).extend(rules)
    for system in sorted(p for p in OLMOCR_SAMPLE.iterdir() if p.is_dir() and p.name != "pdfs"):
        for out in sorted(system.glob("*_repeat1.md")):
            if rules := by_page.get(out.name.removesuffix("_repeat1.md")):
                yield rules, out.read_text(encoding="utf-8")


@pytest.mark.parametrize(("pages", "at_least"), [(_olmocr_pages, 150), (_omnidoc_pages, 200)],
                         ids=["olmocr-sample", "omnidoc-demo"])
def test_every_real_rule_and_page_agrees(pages, at_least):
    agree, differ, page_scores, passed = 0, [], [], 0
    for rules, md in pages():
        a, p, d, kept = P.rule_parity(rules, md, F.FORMAT_RULE.validate_python, F.problem, F.score)
        agree, passed, differ = agree + a, passed + p, differ + d
        ours_page = FP.page_score([F.FORMAT_RULE.validate_python(r) for r in kept], md)
        page_scores.append((ours_page, P.page_metrics(kept, md).get("semantic_formatting")))
    assert agree > at_least and not differ, (agree, differ[:5])
    assert 0 < passed < agree  # both outcomes occur on real outputs
    assert [o for o, _ in page_scores] == pytest.approx([t for _, t in page_scores], abs=1e-12)
