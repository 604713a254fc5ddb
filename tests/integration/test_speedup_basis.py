"""`recommend` / `tune` --speedup without a measured table say that the speed-up is modelled
from weight bytes (recipe comment, terminal, tune report); with `--speed-table` the budget and every speed-up
are the table's predicted GPU time per decode step."""

import pytest

from quantgate.errors import InputError
from quantgate.schema.speed import Cell, CostTable, FixedCost, TableGemm
from quantgate.sensitivity.recommend import recommend
from quantgate.sensitivity.report import format_choice
from quantgate.sensitivity.write import recipe_yaml
from tests.integration.test_tune import BUDGET, KL, FakeStudy, fake_sens, setup  # noqa: F401  (setup: a fixture)

# per decode step (ms), one MLP GEMM per group: INT2 (fewest bytes) runs slower than BF16 here, as a kernel-bound
# step can; FP8 saves a little, W4A16 the most
CELLS = {"bf16": 1.0, "fp8": 0.9, "w4a16": 0.6, "w2a16": 1.1}
FIXED = 0.5


def table(cells=CELLS, modules="m.layers.{}.mlp.up_proj", n=3) -> CostTable:
    gemms = [TableGemm(id=f"layers.{i}.mlp:up_proj", group=f"layers.{i}.mlp", modules=[modules.format(i)], params=500,
                       cells={f: {1: Cell(ms_per_step=v, gemm_ms_per_step=v, sources=["x@1"])} for f, v in cells.items()})
             for i in range(n)]
    return CostTable(attribution="launch_order", concurrency=[1], gemms=gemms,
                     fixed={1: FixedCost(ms_per_step=FIXED, by_source={"x@1": FIXED})}, sources=[], created_utc="now")


def test_without_a_table_the_speedup_says_it_is_modelled_from_weight_bytes():
    sens = fake_sens(KL)
    rec = recommend(sens, speedup=1.5)
    label = "modelled from weight bytes at 4800 GB/s, not measured"
    assert rec.speed is None and rec.speed_basis == label and rec.summary()["speedup_basis"] == label
    text = recipe_yaml(sens, rec, name="r", source="sens.json")
    line = next(x for x in text.splitlines() if "speed-up" in x)
    assert line == f"# decode speed-up {rec.modelled_speedup:.2f}x BF16 ({rec.modelled_decode_ms:.4f} ms per decode step): {label}."
    assert label in format_choice(rec)


def test_with_a_table_speedup_is_the_predicted_step_and_the_recipe_says_so():
    sens = fake_sens(KL)
    t = table()
    # by weight bytes INT2 is fastest, so 2.5x is reachable; by the table INT2 is slower than BF16
    assert recommend(sens, speedup=2.5).modelled_speedup >= 2.5
    bf16 = FIXED + 3 * CELLS["bf16"]
    top = bf16 / (FIXED + 3 * CELLS["w4a16"])
    with pytest.raises(InputError, match=f"at most {top:.2f}x is predicted with these formats by t.json at concurrency 1"):
        recommend(sens, speedup=2.5, speed_table=t, speed_table_source="t.json")
    rec = recommend(sens, speedup=1.3, speed_table=t, speed_table_source="t.json")
    ms = FIXED + sum(CELLS[f] for f in rec.assignment.values())
    assert rec.modelled_speedup == pytest.approx(bf16 / ms) and rec.modelled_speedup >= 1.3
    assert "w2a16" not in rec.assignment.values()  # slower than BF16 by the table: never bought for speed
    basis = (f"predicted from the measured cost table t.json at concurrency 1 (GPU time per decode step, prefill not "
             f"included; BF16 {bf16:.3f} ms)")
    assert rec.speed_basis == basis
    line = next(x for x in recipe_yaml(sens, rec, name="r", source="sens.json").splitlines() if "speed-up" in x)
    assert line == f"# decode speed-up {bf16 / ms:.2f}x BF16 ({ms:.4f} ms per decode step): {basis}."
    # a size budget with a table: the recipe's speed-up is still the table's
    sized = recommend(sens, budget_bytes=BUDGET, speed_table=t, speed_table_source="t.json")
    assert sized.speed is not None and sized.modelled_speedup == pytest.approx(
        bf16 / (FIXED + sum(CELLS[f] for f in sized.assignment.values())))


def test_a_table_of_another_model_or_without_a_format_is_refused():
    sens = fake_sens(KL)
    with pytest.raises(InputError, match="no GEMM of the table holds m.layers.0.mlp.up_proj"):
        recommend(sens, speedup=1.2, speed_table=table(modules="other.layers.{}.mlp.up_proj"), speed_table_source="t")
    with pytest.raises(InputError, match="no w2a16 measurement of layers.0.mlp:up_proj"):
        recommend(sens, speedup=1.2, speed_table=table({"bf16": 1.0, "fp8": 0.9, "w4a16": 0.6}), speed_table_source="t")
    assert recommend(sens, speedup=1.2, formats=["fp8", "w4a16"], speed_table=table({"bf16": 1.0, "fp8": 0.9, "w4a16": 0.6}),
                     speed_table_source="t").speed is not None


def test_the_tune_report_says_where_its_speedups_come_from(setup, tmp_path):  # noqa: F811
    from quantgate.tune.loop import Tuner
    from quantgate.tune.report import markdown_lines

    tmp, study, sens = setup
    Tuner(study, sens, speedup=1.2, out=tmp / "a", run_study=FakeStudy(), log=lambda s: None).run()
    md = "\n".join(markdown_lines(tmp / "a"))
    assert "Speed-up: modelled from weight bytes at 4800 GB/s, not measured" in md
    path = tmp_path / "table.json"
    path.write_text(table().model_dump_json())
    tf = Tuner(study, sens, speedup=1.2, out=tmp / "b", run_study=FakeStudy(), log=lambda s: None,
               speed_table=path).run()
    md = "\n".join(markdown_lines(tmp / "b"))
    assert md.count(f"Speed-up: predicted from the measured cost table {path} at concurrency 1 (GPU time per decode "
                    f"step, prefill not included; BF16 {FIXED + 3 * CELLS['bf16']:.3f} ms)") == 1 and "not measured" not in md
    t1 = tf.trials[0]
    assert t1.speed_basis.startswith("predicted") and t1.modelled_speedup >= 1.2
    assert f"| {t1.modelled_speedup:.2f}× |" in md
    assert tf.inputs.speed_concurrency == 1 and len(tf.inputs.speed_table_sha256) == 64


def test_recommend_cli_takes_the_speed_table(tmp_path):
    import subprocess
    import sys

    sens, tab = tmp_path / "sens.json", tmp_path / "t.json"
    sens.write_text(fake_sens(KL).model_dump_json())
    tab.write_text(table().model_dump_json())
    q = [sys.executable, "-m", "quantgate", "recommend", str(sens), "--speedup", "1.3", "-o", str(tmp_path / "r.yaml")]
    p = subprocess.run(q + ["--speed-table", str(tab)], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert f"predicted from the measured cost table {tab} at concurrency 1" in (tmp_path / "r.yaml").read_text()
    assert "(predicted from the measured cost table" in p.stdout
    tab.write_text(sens.read_text())  # a sensitivity file is not a cost table
    p = subprocess.run(q + ["--speed-table", str(tab)], capture_output=True, text=True, timeout=120)
    assert p.returncode == 65 and "not a quantgate.speed_table file" in p.stderr
