"""quantgate's OmniDocBench v1.5 family against upstream v1.5's own evaluation (523fd1d), run live in this process on
the 18 demo pages (tests/support/upstream_omnidoc15.py, ~5 s): whole-set values within 0.005 (the bar the issue
sets), every per-page and per-table value upstream writes to 1e-9 — on the demo's predictions and on four changes
of them that send real pages down v1.5's other paths. Run with ``-s`` to see the agreement table."""

import json
import re
from pathlib import Path

import pytest

from quantgate.scoring.omnidoc import load_truth
from quantgate.scoring.omnidoc.v15 import aggregate, score_page
from tests.support import upstream_omnidoc15 as ref

pytestmark = pytest.mark.skipif(ref.missing_reason() is not None, reason=ref.missing_reason() or "")


@pytest.fixture(scope="module")
def scored():
    truth = load_truth(ref.DEMO_TRUTH)
    return {name: score_page((ref.DEMO_PREDICTIONS / f"{page.page_id}.md").read_text(encoding="utf-8"), page)
            for name, page in truth.items()}


@pytest.fixture(scope="module")
def upstream():
    return ref.run()


def test_the_demo_pages_score_whole(scored):
    assert len(scored) == 18
    assert all(not s.notes for s in scored.values())  # nothing skipped, no LaTeX table, no unreadable formula


@pytest.mark.parametrize("metric", list(ref.SET_VALUES))
def test_whole_set_value_matches_upstream(scored, upstream, metric):
    category, name, key = ref.SET_VALUES[metric]
    expected = upstream["metric"][category]["all"][name][key]
    got = aggregate(list(scored.values()))[metric]
    print(f"{metric}: quantgate {got:.6f}, upstream {expected:.6f}")
    assert got == pytest.approx(expected, abs=0.005)


@pytest.mark.parametrize("metric", list(ref.PER_PAGE))
def test_per_page_values_match_upstream(scored, upstream, metric):
    theirs = upstream["per_page"][ref.PER_PAGE[metric]]
    ours = {name: s.values[metric] for name, s in scored.items() if s.values[metric] is not None}
    assert set(ours) == set(theirs)  # the same pages scored; one without the category is None here
    diffs = [abs(ours[n] - theirs[n]) for n in theirs]
    print(f"{metric}: {len(diffs)} pages, {sum(d == 0 for d in diffs)} exactly equal, max difference {max(diffs):.2e}")
    assert max(diffs) < 1e-9  # the same computation, not an approximation of it: 0.005 would hide a real difference


def test_per_table_teds_matches_upstream(scored, upstream):
    theirs = upstream["per_table"]  # '<image>_[<truth table index>]' -> both TEDS values
    ours = {f"{name}_[{k}]": (full, struct) for name, s in scored.items()
            for k, (full, struct) in enumerate(zip(s.tables.get("omnidoc15_table_teds", []),
                                                   s.tables.get("omnidoc15_table_teds_struct", []), strict=True))}
    assert set(ours) == set(theirs) and len(ours) == 10
    diffs = [abs(ours[k][0] - v["TEDS"]) for k, v in theirs.items()] + \
            [abs(ours[k][1] - v["TEDS_structure_only"]) for k, v in theirs.items()]
    print(f"per-table TEDS (both kinds): {len(diffs)} values, max difference {max(diffs):.2e}")
    assert max(diffs) < 1e-9


def test_the_lab_note_records_what_upstream_gives(upstream):
    """lab/2026-12-04-omnidoc15-oracle/result.json is the dated record of this oracle; it still says what the live
    run says (so the note's numbers are the ones this test checks)."""
    recorded = json.loads(Path(ref.RECORDED).read_text(encoding="utf-8"))
    for metric, key in (("omnidoc15_text_edit", "text_edit"), ("omnidoc15_reading_order", "reading_order_edit"),
                        ("omnidoc15_table_teds", "table_teds"), ("omnidoc15_formula_edit", "formula_edit")):
        category, name, agg = ref.SET_VALUES[metric]
        assert recorded["whole_set"][key]["v1.5"] == pytest.approx(upstream["metric"][category]["all"][name][agg])
    assert recorded["per_page"]["text_block"] == pytest.approx(upstream["per_page"]["text_block"])


def test_hybrid_matching_is_what_moves_v15_from_v10(scored):
    """On the demo, v1.5 lowers the formula edit distance (a formula written as text is matched, not missing) and
    the reading-order one; v1.0's values on the same pages are the published 0.4929 and 0.2170."""
    values = aggregate(list(scored.values()))
    assert values["omnidoc15_formula_edit"] < 0.4929 - 0.1
    assert values["omnidoc15_reading_order"] < 0.2170 - 0.03


_TABLE, _DISPLAY_MATH = re.compile(r"<table.*?</table>", re.S), re.compile(r"\$\$(.*?)\$\$", re.S)
CHANGED = {  # the demo predictions changed so that each path of v1.5's matching runs on real pages
    "tables_twice": lambda t: _TABLE.sub(lambda m: m.group(0) + "\n\n" + m.group(0), t),  # cells of unmatched tables
    "display_math_as_text": lambda t: _DISPLAY_MATH.sub(lambda m: m.group(1).strip(), t),  # formulas matched to text
    "paragraphs_reversed": lambda t: "\n\n".join(reversed(t.split("\n\n"))),  # the reading order
    "empty": lambda t: "",  # every truth block unmatched
}


@pytest.mark.parametrize("change", list(CHANGED))
def test_changed_predictions_score_as_upstream_scores_them(change, tmp_path):
    for p in ref.DEMO_PREDICTIONS.iterdir():
        (tmp_path / p.name).write_text(CHANGED[change](p.read_text(encoding="utf-8")), encoding="utf-8")
    theirs = ref.run(tmp_path)
    truth = load_truth(ref.DEMO_TRUTH)
    ours = {n: score_page((tmp_path / f"{page.page_id}.md").read_text(encoding="utf-8"), page) for n, page in truth.items()}
    compared = 0
    for metric, category in ref.PER_PAGE.items():
        values = {n: s.values[metric] for n, s in ours.items() if s.values[metric] is not None}
        assert set(values) == set(theirs["per_page"][category]), metric
        for n, v in theirs["per_page"][category].items():
            assert values[n] == pytest.approx(v, abs=1e-9), (metric, n)
            compared += 1
    teds = [t for s in ours.values() for t in s.tables.get("omnidoc15_table_teds", [])]
    assert sorted(teds) == pytest.approx(sorted(t["TEDS"] for t in theirs["per_table"].values()), abs=1e-9)
    print(f"{change}: {compared} page values and {len(teds)} tables equal upstream's")
