"""A ``speed.profile`` study writes its prefill table itself: from its own speed waves (``runs/<v>/speed.jsonl``)
and the plans its decode profiles carry, ``speed/prefill-table.json`` beside the cost table, in the form
``recommend --prefill-table`` reads — on synthetic waves whose per-format prefill cost is known."""

import json

import pytest

from quantgate.io.chain import Chain
from quantgate.schema.run import RequestRecord
from quantgate.speed.predict import Prediction
from quantgate.speed.served import format_shares, load_prefill_table, predict_served
from quantgate.speed.trace import step_profile
from quantgate.study.profile import PREFILL_TABLE, write_prefill_table
from tests.support import synthetic_trace as syn

FORMATS = {"bf16": {}, "fp8-all": {"mlp": "fp8", "attention": "fp8", "linear_attention": "fp8"},
           "nvfp4-all": {"mlp": "nvfp4", "attention": "nvfp4", "linear_attention": "nvfp4"},
           "mix": {"mlp": "nvfp4", "attention": "fp8"}}
SLOPE = {"fp8": -0.25, "nvfp4": 0.5}  # the synthetic truth: prefill time added per unit share of the parameters
BF16_PREFILL_S, DECODE_S = {1: 0.2, 32: 2.0}, {1: 3.0, 32: 4.0}


def _profile(variant: str):
    return step_profile(syn.trace(syn.BF16_STEP), syn.plan(FORMATS[variant]), variant=variant, concurrency=1,
                        source="t.json")


def _prefill_s(variant: str, c: int) -> float:
    # the shares of the decode modules the profile carries (the vision encoder is not among them)
    shares = format_shares(_profile(variant).plan)
    return BF16_PREFILL_S[c] * (1 + sum(SLOPE[f] * s for f, s in shares.items()))


def _wave(v: str, c: int, wave: int) -> list[RequestRecord]:
    p, d, t0 = _prefill_s(v, c), DECODE_S[c], 100.0 * wave
    if c == 1:  # one request after another: each split at its own first token
        return [RequestRecord(page_id=f"p{i}", concurrency=1, output="", start=t0 + i * (p + d) / 2, ttft_s=p / 2,
                              latency_s=(p + d) / 2, end=t0 + (i + 1) * (p + d) / 2, wave=wave) for i in range(2)]
    # sent together: first tokens arrive over the prefill phase, the last at p; the batch then decodes for d
    return [RequestRecord(page_id=f"p{i}", concurrency=c, output="", start=t0, ttft_s=p * (i + 1) / c,
                          latency_s=p + d * (i + 1) / c, end=t0 + p + d * (i + 1) / c, wave=wave) for i in range(c)]


def _study(out, variants, levels=(1, 32)):
    """A study folder as a speed.profile study leaves it: a decode profile per variant, its speed waves chained."""
    for v in variants:
        (out / "speed" / v).mkdir(parents=True)
        (out / "speed" / v / "c1.profile.json").write_text(_profile(v).model_dump_json())
        (out / "runs" / v).mkdir(parents=True)
        chain, lines = Chain("anchor"), []
        for rec in (r for c in levels for wave in range(3) for r in _wave(v, c, wave)):
            linked = chain.link(rec.model_dump(mode="json"))
            chain.advance(linked)
            lines.append(json.dumps(linked))
        (out / "runs" / v / "speed.jsonl").write_text("\n".join(lines) + "\n")


def test_the_study_fits_its_waves_into_the_prefill_table_recommend_reads(tmp_path):
    _study(tmp_path, ["bf16", "fp8-all", "nvfp4-all"])
    logs: list[str] = []
    path = write_prefill_table(tmp_path, ["bf16", "fp8-all", "nvfp4-all"], "bf16", logs.append)
    assert path == tmp_path / "speed" / PREFILL_TABLE and "prefill table from the speed waves of 3" in logs[-1]
    table = load_prefill_table(path)
    assert table.built_from == ["bf16", "fp8-all", "nvfp4-all"] and sorted(table.levels) == [1, 32]
    for c in (1, 32):
        lv = table.levels[c]
        assert lv.slope == {f: pytest.approx(s) for f, s in SLOPE.items()}
        assert (lv.bf16_prefill_s, lv.bf16_decode_s) == (pytest.approx(BF16_PREFILL_S[c]), pytest.approx(DECODE_S[c]))
    # a recipe the table was not built from: its served speed-up from its own prefill and a decode step 0.8x BF16's
    served = predict_served(table, Prediction(concurrency=32, ms_per_step=4.0, bf16_ms_per_step=5.0),
                            _profile("mix").plan)
    assert served.speedup == pytest.approx((2.0 + 4.0) / (_prefill_s("mix", 32) + 0.8 * 4.0))


def test_no_table_when_the_waves_cannot_tell_the_formats_apart(tmp_path):
    _study(tmp_path, ["bf16", "mix"])  # one recipe, two formats: any split of its prefill between them fits
    logs: list[str] = []
    assert write_prefill_table(tmp_path, ["bf16", "mix"], "bf16", logs.append) is None
    assert "do not tell the formats" in logs[-1] and not (tmp_path / "speed" / PREFILL_TABLE).exists()
    logs.clear()
    assert write_prefill_table(tmp_path, ["mix"], "bf16", logs.append) is None  # the baseline has no waves here
    assert "no prefill table: it needs speed waves and decode profiles of bf16" in logs[-1]
