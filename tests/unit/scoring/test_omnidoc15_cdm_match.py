"""quantgate's CDM matching and score (quantgate/scoring/omnidoc/cdm_match.py) against upstream's: on the token boxes
upstream's own renderer found for the 13 display formulas of the 18 demo pages (recorded by lab/2026-12-05-cdm, RANSAC
fits included), and live against upstream's matcher module on generated tokens and boxes."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from quantgate.scoring.omnidoc.cdm_match import TokenBox, assign, same_token, score, token_cost
from tests.support import upstream_cdm as ref

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
live = pytest.mark.skipif(ref.missing_reason() is not None, reason=ref.missing_reason() or "")

# tokens whose normalisation upstream special-cases, and some it leaves alone
TOKENS = ["a", "b", "x", "1", "=", "+", ".", "'", "*", "|", "(", "T", "\\leq", "\\le", "\\geq", "\\ge", "\\cdot",
          "\\to", "\\rightarrow", "\\Rightarrow", "\\longleftarrow", "\\left(", "\\right)", "\\left<", "\\langle",
          "\\bigl(", "\\Big\\{", "\\big\\|", "\\Bigr\\rangle", "\\bigg", "\\lVert", "\\Vert", "\\|", "\\vert",
          "\\rvert", "\\widehat", "\\hat", "\\widetilde", "\\varphi", "\\phi", "\\varepsilon", "\\prime", "\\ast",
          "\\top", "\\Tilde", "\\tilde", "\\cdots", "\\dots", "\\mid"]
token = st.one_of(st.sampled_from(TOKENS), st.text(alphabet="\\abBiglrtvwe(|{<>", min_size=1, max_size=8))


def _boxes(side: str, formula: dict) -> list[TokenBox]:
    return [TokenBox(b["token"], tuple(b["bbox"])) for b in formula[f"{side}_boxes"]]


def _score(formula: dict) -> float:
    return score(_boxes("gt", formula), _boxes("pred", formula), tuple(formula["gt_size"]),
                 tuple(formula["pred_size"])).f1


def test_each_demo_formula_scores_what_upstream_scored_on_its_own_boxes():
    got = [(f["cdm_id"], _score(f), f["cdm"]) for f in ref.recorded()["formulas"]]
    assert len(got) == 13
    assert [(k, ours) for k, ours, _ in got] == [(k, theirs) for k, _, theirs in got]
    # the set is no trivial one: partial matches, and formulas long enough for several fits
    assert sum(1 for _, ours, _ in got if ours < 0.9) >= 3 and max(len(f["gt_boxes"]) for f in
                                                                   ref.recorded()["formulas"]) > 100


def test_the_pages_and_the_set_equal_upstreams_and_give_its_overall():
    rec = ref.recorded()
    pages: dict[str, list[float]] = {}
    for f in rec["formulas"]:
        pages.setdefault(f["page"], []).append(_score(f))
    for page, value in rec["per_page_cdm"].items():
        assert sum(pages[page]) / len(pages[page]) == pytest.approx(value, abs=0.005)
    scores = [s for v in pages.values() for s in v]
    cdm = sum(scores) / len(scores)
    assert cdm == pytest.approx(rec["set"]["formula_cdm"], abs=0.005)
    s = rec["set"]
    overall = ((1 - s["text_edit"]) * 100 + s["table_teds"] * 100 + cdm * 100) / 3
    assert overall == pytest.approx(s["overall"], abs=0.5)


def test_an_empty_side_scores_zero_and_a_moved_and_scaled_copy_scores_one():
    gt = [TokenBox(t, (10.0 * k, 5.0, 10.0 * k + 8, 20.0)) for k, t in enumerate("x+y=z^2")]
    assert score(gt, [], (100, 30), (100, 30)).f1 == 0.0
    assert score([], gt, (100, 30), (100, 30)).f1 == 0.0
    moved = [TokenBox(b.token, (2 * b.box[0] + 40, 2 * b.box[1] + 7, 2 * b.box[2] + 40, 2 * b.box[3] + 7)) for b in gt]
    assert score(gt, moved, (100, 30), (200, 60)) == (1.0, 1.0, 1.0)


def test_a_wrong_token_in_place_and_a_right_token_out_of_place_do_not_count():
    gt = [TokenBox(t, (30.0 * k, 5.0, 30.0 * k + 20, 40.0)) for k, t in enumerate("abcdefgh")]
    wrong = [*gt[:7], TokenBox("q", gt[7].box)]
    assert score(gt, wrong, (300, 50), (300, 50)).f1 == round(2 * 7 / 16, 3)
    # 'h' 400 px below its place: the layout fit leaves it out though the token is right
    away = [*gt[:7], TokenBox("h", (gt[7].box[0], 440.0, gt[7].box[2], 475.0))]
    assert score(gt, away, (300, 50), (300, 480)).f1 == round(2 * 7 / 16, 3)
    # with three pairs or fewer there is no layout to fit: every pair of the same token counts
    assert score(gt[:3], away[:2] + [TokenBox("c", (0.0, 400.0, 9.0, 420.0))], (300, 50), (300, 480)).f1 == 1.0


@live
@SETTINGS
@given(token)
def test_token_normalisation_matches_upstream(t):
    assert same_token(t) == ref.visual_matcher().norm_same_token(t)


@st.composite
def boxes(draw, n_min: int = 1):
    n = draw(st.integers(n_min, 12))
    out = []
    for _ in range(n):
        x0, y0 = draw(st.integers(0, 400)), draw(st.integers(0, 80))
        out.append(TokenBox(draw(token), (x0, y0, x0 + draw(st.integers(1, 40)), y0 + draw(st.integers(1, 40)))))
    return out


def _theirs(bs: list[TokenBox]) -> list[dict]:
    return [{"token": b.token, "bbox": list(b.box)} for b in bs]


@live
@SETTINGS
@given(boxes(), boxes(), st.tuples(st.integers(450, 900), st.integers(130, 300)),
       st.tuples(st.integers(450, 900), st.integers(130, 300)))
def test_token_cost_and_assignment_match_upstream(gt, pred, gt_size, pred_size):
    matcher = ref.visual_matcher().HungarianMatcher()
    theirs = [(int(i), int(j)) for i, j in matcher(_theirs(gt), _theirs(pred), gt_size, pred_size)]
    pairs, tokens = assign(gt, pred, gt_size, pred_size)
    assert np.array_equal(tokens, matcher.cost["token"])
    assert np.array_equal(token_cost([b.token for b in gt], [b.token for b in pred]), matcher.cost["token"])
    assert pairs == theirs
