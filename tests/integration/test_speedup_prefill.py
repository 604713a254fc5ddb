"""`recommend --speedup` with a prefill table beside the decode cost table: the budget and the recipe's speed-up
are the served speed-up (prefill phase included, ``quantgate.speed.served``), and the recipe says so. A format whose
decode step is fast but whose prefill is slow (Marlin's weight-only kernels on Hopper) is no longer bought for speed."""

import pytest

from quantgate.errors import InputError
from quantgate.sensitivity.recommend import recommend
from quantgate.speed.served import PrefillLevel, PrefillTable
from tests.integration.test_speedup_basis import CELLS, FIXED, table
from tests.integration.test_tune import KL, fake_sens

P, D = 2.0, 3.0  # BF16's wave: 2 s before every request has its first token, 3 s after
SLOPE = {"fp8": -0.2, "w4a16": 1.2, "w2a16": 1.2}
PLAN_PARAMS = 3000  # the three groups' 1,500 parameters and as many again kept BF16 (the LM head)


def prefill() -> PrefillTable:
    return PrefillTable(built_from=["bf16", "fp8-all", "w4a16-all"], plan_params=PLAN_PARAMS, source="p.json",
                        levels={1: PrefillLevel(concurrency=1, bf16_prefill_s=P, bf16_decode_s=D, slope=SLOPE)})


def test_the_served_speedup_counts_the_prefill_a_decode_table_cannot_see():
    sens, t = fake_sens(KL), table()
    decode_only = recommend(sens, speedup=1.2, speed_table=t, speed_table_source="t.json")
    assert "w4a16" in decode_only.assignment.values()  # the decode step alone buys W4A16 for 1.2x
    bf16_ms = FIXED + 3 * CELLS["bf16"]
    # served: all FP8 is the fastest (W4A16's prefill costs more than its decode saves): 1.10x at most
    top = (P + D) / (P * (1 + SLOPE["fp8"] * 1500 / PLAN_PARAMS) + D * (FIXED + 3 * CELLS["fp8"]) / bf16_ms)
    with pytest.raises(InputError, match=f"at most {top:.2f}x is predicted .*seconds per served wave"):
        recommend(sens, speedup=1.2, speed_table=t, speed_table_source="t.json", prefill_table=prefill(),
                  prefill_table_source="p.json")
    rec = recommend(sens, speedup=1.08, speed_table=t, speed_table_source="t.json", prefill_table=prefill(),
                    prefill_table_source="p.json")
    assert set(rec.assignment.values()) == {"fp8"}
    assert rec.modelled_speedup == pytest.approx(top) and rec.modelled_speedup >= 1.08
    assert rec.speed.ms_per_step == pytest.approx(FIXED + 3 * CELLS["fp8"])  # the decode step, still reported
    assert rec.speed_basis.startswith("predicted served speed-up at concurrency 1: the decode step from the measured "
                                      "cost table t.json") and "prefill phase from p.json" in rec.speed_basis


def test_a_format_the_prefill_table_never_measured_is_refused():
    sens = fake_sens(KL)
    pt = prefill().model_copy(update={"levels": {1: PrefillLevel(concurrency=1, bf16_prefill_s=P, bf16_decode_s=D,
                                                                 slope={"fp8": -0.2})}})
    with pytest.raises(InputError, match="no recipe it was built from runs w2a16"):
        recommend(sens, speedup=1.05, speed_table=table(), speed_table_source="t", prefill_table=pt)
    assert recommend(sens, speedup=1.05, formats=["fp8"], speed_table=table(), speed_table_source="t",
                     prefill_table=pt).assignment


def test_the_command_line_takes_the_prefill_table_and_the_recipe_says_so(tmp_path, capsys):
    from quantgate.cli import main
    from quantgate.errors import UsageError

    sens, cost, pre = tmp_path / "sens.json", tmp_path / "cost.json", tmp_path / "prefill.json"
    sens.write_text(fake_sens(KL).model_dump_json())
    cost.write_text(table().model_dump_json())
    pre.write_text(prefill().model_dump_json())
    args = ["recommend", "--sensitivity", str(sens), "--speedup", "1.08", "--speed-table", str(cost),
            "-o", str(tmp_path / "r.yaml")]
    assert main([*args, "--prefill-table", str(pre)]) == 0
    text = (tmp_path / "r.yaml").read_text()
    assert f"predicted served speed-up at concurrency 1: the decode step from the measured cost table {cost}" in text
    assert f"prefill phase from {pre}" in text
    assert [line.split("format: ")[1] for line in text.splitlines() if "format: " in line] == ["fp8}"] * 3
    no_table = [a for a in args if a not in ("--speed-table", str(cost))]
    assert main([*no_table, "--prefill-table", str(pre)]) == UsageError.exit_code
    assert "--prefill-table needs --speed-table" in capsys.readouterr().err
