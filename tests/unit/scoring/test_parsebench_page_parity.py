"""The parsebench_content page score against upstream ParseBench's own evaluator (its ``content_faithfulness``
per page), on every page of olmOCR-bench's sample outputs and OmniDocBench's demo predictions with their truth
wrapped as content rules, plus upstream `present` rules it must leave out of this dimension."""

from __future__ import annotations

import itertools

import pytest

from quantgate.scoring.parsebench.page import headline, page_score
from quantgate.scoring.parsebench.rules import RULE, TYPES, problem
from tests.support import parsebench_ref as P
from tests.unit.scoring import test_parsebench_realdata as realdata

pytestmark = pytest.mark.skipif(bool(realdata._WHY), reason=realdata._WHY or "")


def _pages(cases):
    """(rules, output) per output: consecutive cases on one output are one page's rules."""
    for md, group in itertools.groupby(cases(), key=lambda c: c[1]):
        rules = [d for d, _ in group if not problem(RULE.validate_python(d))]
        if rules:
            yield rules, md


@pytest.mark.parametrize("cases", [realdata._cases, realdata._omnidoc_cases], ids=["olmocr-sample", "omnidoc-demo"])
def test_page_scores_and_headline_equal_upstreams(cases):
    ours, theirs = [], []
    for rules, md in _pages(cases):
        present = {"type": "present", "text": rules[0].get("before") or "alpha beta"}  # not this dimension's
        ours.append(page_score([RULE.validate_python(r) for r in rules if r["type"] in TYPES], md))
        theirs.append(P.content_faithfulness([*rules, present], md))
    assert len(ours) >= 18
    assert ours == pytest.approx(theirs, abs=1e-12)
    assert headline(ours) == pytest.approx(sum(theirs) / len(theirs), abs=1e-12)
