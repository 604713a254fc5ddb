"""Parity with upstream ParseBench's rule classes on real outputs: olmOCR-bench's sample system outputs (marker,
mistral, ...), with the sample's own `order` checks wrapped as ParseBench order rules and its `present` texts
wrapped as word, sentence and digit bags of every content type; and OmniDocBench's 18 demo predictions against
their truth's text blocks wrapped the same way (Chinese pages among them). Same score on every case, or both
refuse."""

from __future__ import annotations

import json
import re
from collections import Counter

import pytest

from quantgate.scoring.parsebench import rules as R
from tests.support import parsebench_ref as P
from tests.support.paths import OLMOCR_SAMPLE, SHARED, oracle_missing

OMNIDOC_DEMO = SHARED / "reference" / "omnidocbench" / "demo_data"
_WHY = P.reference_missing_reason() or oracle_missing(OLMOCR_SAMPLE / "dataset.jsonl",
                                                      OMNIDOC_DEMO / "omnidocbench_demo" / "OmniDocBench_demo.json")
pytestmark = pytest.mark.skipif(bool(_WHY), reason=_WHY or "")


def _wrapped(texts: list[str], md: str):
    """Every content rule type built from a truth's texts, for one output."""
    joined = "\n\n".join(texts)
    words = dict(Counter(re.findall(r"\w+", joined)))
    sentences = dict(Counter(texts))
    yield {"type": "missing_word_percent", "bag_of_word": words}, md
    yield {"type": "unexpected_word_percent", "bag_of_word": words}, md
    yield {"type": "too_many_word_occurence_percent", "bag_of_word": words}, md
    yield {"type": "missing_sentence_percent", "bag_of_sentence": sentences}, md
    yield {"type": "unexpected_sentence_percent", "bag_of_sentence": sentences, "original_md": joined}, md
    yield {"type": "too_many_sentence_occurence_percent", "bag_of_sentence": sentences}, md
    yield {"type": "extra_content", "bag_of_sentence": sentences}, md
    digits = Counter(ch for ch in joined if ch in "0123456789")
    if digits:
        yield {"type": "bag_of_digit_percent", "bag_of_digit": dict(digits)}, md
    for before, after in list(zip(texts, texts[1:], strict=False))[:6]:
        yield {"type": "order", "before": before, "after": after}, md


def _omnidoc_cases():
    for page in json.loads((OMNIDOC_DEMO / "omnidocbench_demo" / "OmniDocBench_demo.json").read_text()):
        stem = page["page_info"]["image_path"].rsplit(".", 1)[0]
        md = (OMNIDOC_DEMO / "end2end" / f"{stem}.md").read_text(encoding="utf-8")
        texts = [d["text"].strip() for d in page["layout_dets"]
                 if d["category_type"] in ("title", "text_block") and d.get("text", "").strip()]
        if texts:
            yield from _wrapped(texts, md)


def _cases():
    checks = [json.loads(line) for line in (OLMOCR_SAMPLE / "dataset.jsonl").read_text().splitlines() if line]
    by_page: dict[str, list[dict]] = {}
    for c in checks:
        by_page.setdefault(f"{c['pdf'].rsplit('.', 1)[0]}_pg{c['page']}", []).append(c)
    for system in sorted(p for p in OLMOCR_SAMPLE.iterdir() if p.is_dir() and p.name != "pdfs"):
        for out in sorted(system.glob("*_repeat1.md")):
            page = out.name.removesuffix("_repeat1.md")
            md = out.read_text(encoding="utf-8")
            for c in by_page.get(page, []):
                if c["type"] == "order":
                    yield {"type": "order", "before": c["before"], "after": c["after"],
                           "max_diffs": c.get("max_diffs", 0)}, md
                elif c["type"] == "present":
                    words = Counter(re.findall(r"\w+", c["text"]))
                    sentence = {c["text"]: 1}
                    yield {"type": "missing_word_percent", "bag_of_word": dict(words)}, md
                    yield {"type": "unexpected_word_percent", "bag_of_word": dict(words)}, md
                    yield {"type": "too_many_word_occurence_percent", "bag_of_word": dict(words)}, md
                    for kind in ("missing_sentence_percent", "unexpected_sentence_percent",
                                 "too_many_sentence_occurence_percent", "extra_content"):
                        yield {"type": kind, "bag_of_sentence": sentence}, md
                    digits = Counter(ch for ch in c["text"] if ch.isdigit() and ch in "0123456789")
                    if digits:
                        yield {"type": "bag_of_digit_percent", "bag_of_digit": dict(digits)}, md


@pytest.mark.parametrize(("cases", "at_least"), [(_cases, 1000), (_omnidoc_cases, 200)],
                         ids=["olmocr-sample", "omnidoc-demo"])
def test_every_real_case_agrees(cases, at_least):
    agree, differ = 0, []
    for data, md in cases():
        a, _, d, _ = P.rule_parity([data], md, R.RULE.validate_python, R.problem, R.score)
        agree += a
        differ += [(rule["type"], ours, theirs) for rule, ours, theirs in d]
    assert agree > at_least and not differ, (agree, differ[:5])
