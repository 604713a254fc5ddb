"""quantgate's CDM renderer (quantgate/scoring/omnidoc/cdm_render.py: XeLaTeX, Ghostscript, boxes by colour) against
upstream's on the 13 display formulas of the 18 demo pages: fed what upstream's tokenizer made of each formula
(recorded by lab/2026-12-05-cdm), it must find upstream's token boxes, pixel for pixel, and so upstream's CDM per
formula, per page and over the set. Needs the toolchain (`make setup-cdm`); ~10 s on 2 cores."""

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from quantgate.scoring.omnidoc import cdm_render
from quantgate.scoring.omnidoc.cdm_match import score
from tests.support import upstream_cdm as ref

pytestmark = pytest.mark.skipif(ref.toolchain_missing() is not None, reason=ref.toolchain_missing() or "")


def _ready(formula: dict, side: str) -> str:
    from quantgate.scoring.omnidoc.cdm_latex import after_tokenizer

    return after_tokenizer(formula[f"{side}_tokenized"], formula[side])


def test_the_demo_formulas_render_to_upstreams_boxes_and_score_its_cdm(tmp_path: Path):
    formulas = ref.recorded()["formulas"]
    jobs = [(f, side) for f in formulas for side in ("gt", "pred")]

    def render(job):
        f, side = job
        work = tmp_path / f"{f['cdm_id']}-{side}"
        work.mkdir()
        return cdm_render.token_boxes(_ready(f, side), work)

    with ThreadPoolExecutor(max_workers=2) as pool:
        rendered = dict(zip([(f["cdm_id"], s) for f, s in jobs], pool.map(render, jobs), strict=True))
    for f in formulas:
        for side in ("gt", "pred"):
            boxes, size = rendered[f["cdm_id"], side]
            assert [{"token": b.token, "bbox": list(b.box)} for b in boxes] == f[f"{side}_boxes"], (f["cdm_id"], side)
            assert list(size) == f[f"{side}_size"]
    ours = {f["cdm_id"]: score(*rendered[f["cdm_id"], "gt"][:1], *rendered[f["cdm_id"], "pred"][:1],
                               rendered[f["cdm_id"], "gt"][1], rendered[f["cdm_id"], "pred"][1]).f1 for f in formulas}
    assert ours == {f["cdm_id"]: f["cdm"] for f in formulas}
    for page, value in ref.recorded()["per_page_cdm"].items():
        mine = [ours[f["cdm_id"]] for f in formulas if f["page"] == page]
        assert sum(mine) / len(mine) == pytest.approx(value, abs=0.005)
    assert sum(ours.values()) / len(ours) == pytest.approx(ref.recorded()["set"]["formula_cdm"], abs=0.005)


def test_a_formula_the_renderer_cannot_take_scores_zero_with_its_reason():
    assert cdm_render.score_ready("x + y", "x + y") == (1.0, None)
    f1, why = cdm_render.score_ready("x + y", "\\frac { x")  # an unclosed brace: upstream's colouring fails
    assert f1 == 0.0 and why is not None and why.startswith("prediction: the formula cannot be coloured")
    f1, why = cdm_render.score_ready("\\quad", "x")  # nothing visible: no token has a box
    assert f1 == 0.0 and why is not None and why.startswith("truth: no token")
