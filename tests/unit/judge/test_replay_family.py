"""A sequential study's verdicts come from one call into the judge (``replay_family``): it must give what the
separate steps give — each candidate's replayed decision, its verdict rows marked with the layout note handed in,
then the other verdicts, Holm-adjusted as one family — and no family while a pass is unfinished."""

import numpy as np

from quantgate.judge.family import adjust_family
from quantgate.judge.replay import Candidate, Plan, replay, replay_family, verdict_rows
from quantgate.schema.scores import ScoreRow
from quantgate.schema.settings import VerdictSettings

IDS = [f"p{i:02d}" for i in range(40)]
PLAN = Plan(IDS, [20, 40], 40, IDS)
SETTINGS = {"ned": VerdictSettings(metric="ned", margin=0.02, n_resamples=1000, min_pages=10, min_documents=10)}


def _rows(values) -> dict[str, ScoreRow]:
    return {i: ScoreRow.model_validate({"page_id": i, "ned": float(v)}) for i, v in zip(IDS, values, strict=True)}


def test_one_call_gives_the_decisions_the_rows_and_the_family_the_steps_give():
    rng = np.random.default_rng(3)
    base_v = rng.uniform(0.05, 0.15, 40)  # ned: an edit distance, lower is better
    base = _rows(base_v)
    same = _rows(base_v + rng.normal(0, 0.002, 40))
    bad = _rows(np.where(np.arange(40) % 3 == 0, base_v + 0.4, base_v))
    note = ("not_measured", "Noise floor not measured in this layout.")
    cands = [Candidate("same", (base, same, None)), Candidate("bad", (base, bad, None), note)]
    others = verdict_rows(SETTINGS, PLAN, replay(SETTINGS, "obrien_fleming", PLAN, (base, same, None))[0],
                          "lm", (base, same, None))  # stands for the lm-eval verdicts joining the family
    state, family = replay_family(SETTINGS, "obrien_fleming", PLAN, cands, others)

    steps = {c.name: replay(SETTINGS, "obrien_fleming", PLAN, c.sides) for c in cands}
    assert state == steps
    rows = [r.marked(*c.layout) for c in cands for r in verdict_rows(SETTINGS, PLAN, steps[c.name][0], c.name, c.sides)]
    assert family == adjust_family([*rows, *others])
    assert [v.variant for v in family] == ["same", "bad", "lm"]
    assert family[1].noise_layout == "not_measured" and family[1].message.endswith(note[1])
    assert family[0].noise_layout is None
    assert family[1].verdict == "regression" and all(v.p_regression_holm is not None for v in family)


def test_no_family_while_a_pass_is_unfinished():
    base = _rows(np.full(40, 0.1))
    half = {i: r for i, r in _rows(np.full(40, 0.1)).items() if i in IDS[:20]}
    none_yet = {}
    state, family = replay_family(SETTINGS, "obrien_fleming", PLAN,
                                  [Candidate("a", (base, half, None)), Candidate("b", (base, none_yet, None))], [])
    assert family is None
    assert state["b"] == (None, IDS[:20])  # no look made: the first look's pages are next
    dec, nxt = state["a"]
    assert dec is not None and dec.look == 1 and (nxt is None) == dec.stop
