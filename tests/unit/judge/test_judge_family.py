"""A fixed design's verdicts come from one call into the judge (``judge_family``): it must give what the separate
steps give — each pairing's scored verdict (a tag's row inconclusive when its pages are too few), the truth-free
verdict where one is handed in, each row marked with its layout note, then the other verdicts, Holm-adjusted as
one family."""

import numpy as np

from quantgate.judge.compare import Names, Pairing, compare_scores, judge_family, too_few_to_judge, truth_free_outputs
from quantgate.judge.family import adjust_family
from quantgate.schema.scores import ScoreRow
from quantgate.schema.settings import VerdictSettings
from quantgate.schema.summary import VariantVerdict
from quantgate.study.outputs import OutputTexts, output_pages

IDS = [f"p{i:02d}" for i in range(40)]
SETTINGS = VerdictSettings(metric="ned", margin=0.02, n_resamples=1000, min_pages=10, min_documents=10)


def _rows(values, ids=IDS) -> dict[str, ScoreRow]:
    return {i: ScoreRow.model_validate({"page_id": i, "ned": float(v)}) for i, v in zip(ids, values, strict=True)}


def test_one_call_gives_the_rows_the_truth_free_verdicts_and_the_family_the_steps_give():
    rng = np.random.default_rng(5)
    base_v = rng.uniform(0.05, 0.15, 40)  # ned: an edit distance, lower is better
    base, noise = _rows(base_v), _rows(base_v + rng.normal(0, 0.002, 40))
    same = _rows(base_v + rng.normal(0, 0.002, 40))
    bad = _rows(np.where(np.arange(40) % 3 == 0, base_v + 0.4, base_v))
    empty = _rows(np.ones(40))
    few = IDS[:1]  # a tag value on one page: too few to judge
    note = ("not_measured", "Noise floor not measured in this layout.")
    texts = {p: f"page {p} text {'x' * (i % 7)}" for i, p in enumerate(IDS)}
    worse = {p: t + " garbled" if i % 4 == 0 else t for i, (p, t) in enumerate(texts.items())}
    free = output_pages(OutputTexts(texts, worse), {p: texts[p] for p in IDS[:20]}, {p: p for p in IDS}, set(),
                        "ned")
    names = Names("bf16@c1", "cand@c1", "bf16@c2 (noise run)")
    pairings = [Pairing("same", SETTINGS, (base, same, noise), names, empty),
                Pairing("bad", SETTINGS, (base, bad, noise), names, empty, layout=note, truth_free=free),
                Pairing("bad", SETTINGS, ({i: base[i] for i in few}, {i: bad[i] for i in few}, None), names, empty,
                        tag="font:a", layout=note)]
    others = [compare_scores(base, same, SETTINGS, noise=noise)]  # stands for the lm-eval verdicts joining the family
    family = judge_family(pairings, others)

    steps = [VariantVerdict(variant="same", **compare_scores(base, same, SETTINGS, noise=noise, names=names,
                                                             empty=empty).model_dump()),
             # the truth-free row judges the baseline on the pages with truth against the same empty output
             VariantVerdict(variant="bad", **truth_free_outputs(free, SETTINGS, empty).model_dump()).marked(*note),
             VariantVerdict(variant="bad", tag="font:a", **too_few_to_judge(
                 {i: base[i] for i in few}, {i: bad[i] for i in few}, SETTINGS).model_dump()).marked(*note)]
    assert family == adjust_family([*steps, *others])
    assert [(getattr(v, "variant", None), getattr(v, "tag", None)) for v in family] == [
        ("same", None), ("bad", None), ("bad", "font:a"), (None, None)]
    assert family[1].method is not None and family[1].method != family[0].method  # the truth-free verdict stands
    assert family[1].noise_layout == "not_measured" and family[1].message.endswith(note[1])
    assert family[0].noise_layout is None and family[2].reason == "too_few_pages"
    assert all(v.p_regression_holm is not None for v in family)
