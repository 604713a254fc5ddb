"""quantgate's formula CDM end to end (quantgate/scoring/omnidoc/cdm.py) against upstream v1.5's own CDM on the 18
demo pages: from the demo predictions and truth through v1.5's match, upstream's stripping, the tokenizer port, the
colouring, XeLaTeX and the matching — per formula, per page and over the set within 0.005 of what upstream's code
gave (lab/2026-12-05-cdm, under the numeric stack it pins), and Overall with it. Needs `make setup-cdm`; ~20 s."""

import pytest

from quantgate.scoring.omnidoc import cdm, load_truth, v15
from tests.support import upstream_cdm as rc
from tests.support import upstream_omnidoc15 as ref

pytestmark = [pytest.mark.skipif(ref.missing_reason() is not None, reason=ref.missing_reason() or ""),
              pytest.mark.skipif(rc.toolchain_missing() is not None, reason=rc.toolchain_missing() or "")]


def test_the_demo_pages_score_upstreams_cdm_and_overall():
    truth = load_truth(ref.DEMO_TRUTH)
    preds = {page.page_id: (ref.DEMO_PREDICTIONS / f"{page.page_id}.md").read_text(encoding="utf-8")
             for page in truth.values()}
    pairs = {pid: v15.formula_pairs(preds[pid], page) for pid, page in
             ((page.page_id, page) for page in truth.values())}
    per_page, whole, notes = cdm.set_cdm(pairs, workers=2)
    rec = rc.recorded()
    # the pages without a display formula have no value, as upstream has none for them
    assert {pid for pid, v in per_page.items() if v is not None} == {p.removesuffix(".jpg") for p in
                                                                     rec["per_page_cdm"]}
    for page, value in rec["per_page_cdm"].items():
        assert per_page[page.removesuffix(".jpg")] == pytest.approx(value, abs=0.005), page
    assert whole == pytest.approx(rec["set"]["formula_cdm"], abs=0.005)
    assert not notes
    scores = v15.aggregate([v15.score_page(preds[page.page_id], page) for page in truth.values()])
    got = cdm.overall(scores[v15.TEXT], scores[v15.TEDS], whole)
    assert got == pytest.approx(rec["set"]["overall"], abs=0.005)


def test_a_formula_that_does_not_render_scores_zero_and_is_noted():
    per_page, whole, notes = cdm.set_cdm({"p": [("$$x+y$$", "\\[ x + y \\]"), ("$$a$$", "\\frac{")]}, workers=2)
    assert per_page == {"p": 0.5} and whole == 0.5
    assert len(notes) == 1 and notes[0].startswith("p: display formula 2 scored CDM 0")
