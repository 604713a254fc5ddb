"""The prefill term of the served-speed prediction on synthetic waves and plans: the first-token split of a wave,
the per-format slopes recovered from recipes with known prefill costs, and a mixed recipe's served speed-up."""

import pytest

from quantgate.errors import InputError
from quantgate.schema.run import RequestRecord
from quantgate.schema.variant import PlanRow
from quantgate.speed.predict import Prediction
from quantgate.speed.served import (
    WavePhases,
    build_prefill_table,
    format_shares,
    predict_served,
    wave_phases,
)


def _rec(wave: int, c: int, start: float, ttft: float, latency: float) -> RequestRecord:
    return RequestRecord(page_id=f"p{wave}-{start}", concurrency=c, output="", ttft_s=ttft, latency_s=latency,
                         start=start, end=start + latency, wave=wave)


def _plan(formats: list[str]) -> list[PlanRow]:
    # three projections of 100, 300 and 600 parameters, and a BF16 LM head of 1,000
    rows = [PlanRow(module=f"m{i}", kind="mlp", layer=0, shape=[1, p], params=p, format=f)
            for i, (p, f) in enumerate(zip([100, 300, 600], formats, strict=True))]
    return rows + [PlanRow(module="lm_head", kind="lm_head", layer=None, shape=[1, 1000], params=1000, format="bf16")]


def test_a_wave_splits_where_its_last_request_has_its_first_token():
    at32 = [_rec(0, 32, 10.0, 1.0, 5.0), _rec(0, 32, 10.1, 2.4, 4.0), _rec(1, 32, 20.0, 1.5, 3.5)]
    ph = wave_phases(at32, 32)
    # wave 0: first tokens all in at 12.5, last end 15.0; wave 1: 1.5 and 2.0
    assert (ph.concurrency, ph.prefill_s, ph.decode_s, ph.waves) == (32, pytest.approx(2.0), pytest.approx(2.25), 2)
    at1 = [_rec(0, 1, 0.0, 0.3, 2.0), _rec(0, 1, 2.0, 0.5, 2.5)]  # one after another: each split at its own
    ph = wave_phases(at1, 1)
    assert (ph.prefill_s, ph.decode_s, ph.waves) == (pytest.approx(0.8), pytest.approx(3.7), 1)
    assert wave_phases(at1, 32) is None


def test_the_slopes_of_recipes_with_known_prefill_costs_are_recovered_and_predict_a_mix():
    # synthetic truth: a projection's prefill time is proportional to its parameters; FP8 runs it at 0.8x BF16's
    # time, NVFP4 at 1.6x; half of BF16's prefill (1.0 s of 2.0 s) is in the projections, the rest unchanged
    time_of = {"bf16": 1.0, "fp8": 0.8, "nvfp4": 1.6}
    plans = {"bf16": _plan(["bf16"] * 3), "fp8-all": _plan(["fp8"] * 3), "nvfp4-all": _plan(["nvfp4"] * 3),
             "mix": _plan(["fp8", "nvfp4", "nvfp4"])}

    def prefill(plan):  # 1.0 s outside the projections, plus each projection's share of BF16's 1.0 s in its format
        return 1.0 + sum(2 * r.params / 2000 * time_of[r.format] for r in plan if r.module != "lm_head")

    assert prefill(plans["bf16"]) == pytest.approx(2.0)
    phases = {v: {32: WavePhases(concurrency=32, prefill_s=prefill(p), decode_s=3.0, waves=3)} for v, p in plans.items()}
    table = build_prefill_table(phases, plans, ["bf16", "fp8-all", "nvfp4-all"])
    lv = table.levels[32]
    # all-FP8 prefill 1.8 s (0.9x), all-NVFP4 2.6 s (1.3x), the projections half the parameters
    assert lv.slope == {"fp8": pytest.approx(-0.2), "nvfp4": pytest.approx(0.6)}
    assert format_shares(plans["mix"]) == {"fp8": pytest.approx(0.05), "nvfp4": pytest.approx(0.45)}
    # the mix: prefill 1.0 + 0.1 * 0.8 + 0.9 * 1.6 = 2.52 s; its decode step 0.9x BF16's: 2.7 s
    step = Prediction(concurrency=32, ms_per_step=4.5, bf16_ms_per_step=5.0)
    served = predict_served(table, step, plans["mix"])
    assert served.prefill_ratio == pytest.approx(prefill(plans["mix"]) / 2.0) == pytest.approx(1.26)
    assert served.speedup == pytest.approx((2.0 + 3.0) / (2.52 + 2.7))
    assert served.speedup < step.speedup  # the slower prefill undoes the faster decode step


def test_a_format_no_recipe_measured_is_refused():
    plans = {"bf16": _plan(["bf16"] * 3), "fp8-all": _plan(["fp8"] * 3)}
    phases = {v: {1: WavePhases(concurrency=1, prefill_s=1.0, decode_s=2.0, waves=3)} for v in plans}
    table = build_prefill_table(phases, plans, ["bf16", "fp8-all"])
    with pytest.raises(InputError, match="no recipe it was built from runs nvfp4"):
        predict_served(table, Prediction(concurrency=1, ms_per_step=1.0, bf16_ms_per_step=1.0), _plan(["nvfp4"] * 3))
    with pytest.raises(InputError, match="no waves at concurrency 32"):
        predict_served(table, Prediction(concurrency=32, ms_per_step=1.0, bf16_ms_per_step=1.0), plans["fp8-all"])
