"""Our olmOCR-style checks agree with the reference implementation (olmocr on PyPI), test by test,
on every system's output in the bundled olmOCR-bench sample."""

import json
import sys
import types
from pathlib import Path

import pytest

from quantgate.scoring.olmocr_checks import checks_pass_rate, run_check

from .conftest import OLMOCR_SAMPLE


@pytest.fixture(scope="module")
def reference():
    # The reference imports Playwright at load for its math (KaTeX) checks, which we do not run;
    # an empty stand-in module lets the rest of it import without a browser.
    if "playwright.sync_api" not in sys.modules:
        pw = types.ModuleType("playwright.sync_api")
        pw.Error, pw.sync_playwright = Exception, None
        sys.modules.setdefault("playwright", types.ModuleType("playwright"))
        sys.modules["playwright.sync_api"] = pw
    from olmocr.bench import tests as ref

    return ref


def _checks():
    out = []
    for f in ("dataset.jsonl", "blanks.jsonl"):
        for line in (OLMOCR_SAMPLE / f).read_text().splitlines():
            if line.strip():
                out.append(json.loads(line))
    return out


SYSTEMS = ["chatgpt", "gemini_flash2", "marker", "mistral", "olmocr_pipeline"]


@pytest.mark.parametrize("system", SYSTEMS)
def test_agrees_with_reference_on_every_system(reference, system):
    compared = 0
    disagreements = []
    for c in _checks():
        if c["type"] == "math":
            continue
        stem = Path(c["pdf"]).stem
        mds = sorted((OLMOCR_SAMPLE / system).rglob(f"{stem}_pg{c['page']}_repeat*.md"))
        for md in mds:
            content = md.read_text("utf-8")
            ours = run_check(c, content)
            theirs, _ = reference.load_single_test(dict(c)).run(content)
            compared += 1
            if ours != theirs:
                disagreements.append((c["id"], md.name, ours, theirs))
    assert compared >= 20, f"too few comparisons for {system}: {compared}"
    assert disagreements == []


def test_math_is_skipped_not_guessed():
    c = {"pdf": "x.pdf", "page": 1, "id": "m", "type": "math", "math": "a^2+b^2=c^2"}
    assert run_check(c, "$a^2+b^2=c^2$") is None
    rate, passed, skipped = checks_pass_rate([c, {"pdf": "x.pdf", "page": 1, "id": "p", "type": "present",
                                                  "text": "hello"}], "hello world")
    assert (rate, passed, skipped) == (1.0, 1, 1)


def test_hand_made_cases():
    present = {"type": "present", "text": "The quick brown fox", "max_diffs": 1, "pdf": "a", "page": 1, "id": "x"}
    assert run_check(present, "**The** quick  brown\nfox jumps")
    assert not run_check(present, "The quack brawn fox")
    order = {"type": "order", "before": "alpha beta", "after": "gamma delta", "pdf": "a", "page": 1, "id": "o"}
    assert run_check(order, "alpha beta then gamma delta")
    assert not run_check(order, "gamma delta then alpha beta")
    table = {"type": "table", "cell": "42", "up": "Count", "left": "apples", "top_heading": "Count",
             "pdf": "a", "page": 1, "id": "t"}
    assert run_check(table, "| fruit | Count |\n|---|---|\n| apples | 42 |\n")
    assert run_check(table, "<table><tr><th>fruit</th><th>Count</th></tr><tr><td>apples</td><td>42</td></tr></table>")
    assert not run_check(table, "| fruit | Count |\n|---|---|\n| pears | 42 |\n")
    blank = {"type": "baseline", "max_length": 10, "pdf": "a", "page": 1, "id": "b"}
    assert run_check(blank, "") and not run_check(blank, "a" * 11)
    base = {"type": "baseline", "pdf": "a", "page": 1, "id": "b2"}
    assert not run_check(base, "ab " + "la" * 40) and run_check(base, "a normal page")
