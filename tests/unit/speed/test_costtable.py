"""A decode trace read into a step profile, profiles into the measured cost table (per format
× layer-group GEMM × concurrency, and the fixed cost), and the predicted step of a recipe from it — on a small
synthetic trace with known durations, and on the profile.json files committed from the H200 (2026-11-30)."""

import gzip
import json

import pytest

from quantgate.errors import InputError
from quantgate.schema.speed import CostTable, StepProfile
from quantgate.schema.variant import PlanRow
from quantgate.speed.costtable import build_cost_table, table_from_profile_json
from quantgate.speed.gemms import decode_gemms
from quantgate.speed.predict import by_group, group_costs, predict_plan
from quantgate.speed.trace import step_profile
from tests.support import synthetic_trace as syn
from tests.support.paths import REPO

RESULTS = REPO / "lab"  # the GPU sessions' committed results


def _profile(step, fmts=None, c=1, **kw) -> StepProfile:
    name = "-".join(sorted(set((fmts or {"all": "bf16"}).values())))
    return step_profile(syn.trace(step, scale=float(c), **kw), syn.plan(fmts), variant=name, concurrency=c,
                        source="t.json")


def test_decode_gemms_fuse_siblings_and_follow_the_step_order():
    ids = [g.id for g in decode_gemms(syn.plan())]
    assert ids == ["layers.0.linear_attn:in_proj_qkv+in_proj_z", "layers.0.linear_attn:in_proj_a+in_proj_b",
                   "layers.0.linear_attn:out_proj", "layers.0.mlp:gate_proj+up_proj", "layers.0.mlp:down_proj",
                   "layers.1.attn:k_proj+q_proj+v_proj", "layers.1.attn:o_proj", "layers.1.mlp:gate_proj+up_proj",
                   "layers.1.mlp:down_proj", "lm_head:lm_head"]
    with pytest.raises(InputError, match="extra_proj.*not known"):
        decode_gemms(syn.plan(extra=True))


def test_the_committed_4b_plan_has_the_153_gemms_per_step_the_profile_counted():
    # FACTS.md (2026-12-01): the w4a16-all profile shows Machete in 128 and Marlin in 24 of 153 GEMMs per step
    rows = json.loads(gzip.decompress((RESULTS / "2026-11-30-h200-serving-options" / "q4b-fp8-all.quantgate.json.gz").read_bytes()))
    gemms = decode_gemms([PlanRow(**r) for r in rows["plan"]["modules"]])
    assert len(gemms) == 153 and gemms[-1].group == "lm_head"
    assert sum(g.id.endswith("in_proj_a+in_proj_b") for g in gemms) == 24  # Marlin's 24: the narrow b/a GEMM


def test_step_profile_takes_the_decode_steps_by_their_launches_and_counts_what_it_leaves_out():
    p = _profile(syn.BF16_STEP, odd_step=True, prefill=True)
    assert (p.decode_steps, p.dropped_steps, p.other_steps) == (4, 1, 1)
    assert [p.names[s.name] for s in p.step] == [n for n, _ in syn.BF16_STEP]
    assert [s.us for s in p.step] == [d for _, d in syn.BF16_STEP]
    # the sampler ran once per decode step, outside the annotations: spread over every annotated step
    assert p.outside_ms_per_step == pytest.approx(5 * 2.0 / 6 / 1e3)
    assert len(p.plan) == len(syn.plan()) - 1  # the vision row is not a decode module
    # a trace without launch records: each kernel by its own start
    q = _profile(syn.BF16_STEP, correlation=False)
    assert [s.us for s in q.step] == [s.us for s in p.step] and q.outside_ms_per_step == pytest.approx(2e-3)


def test_cells_hold_each_gemm_and_the_kernels_that_make_its_input():
    bf16 = _profile(syn.BF16_STEP)
    fp8 = _profile(syn.FP8_MLP_STEP, {"mlp": "fp8"})
    bf16_c4 = _profile(syn.BF16_STEP, c=4)
    t = CostTable.model_validate_json(build_cost_table([bf16, fp8, bf16_c4]).model_dump_json())  # JSON round trip
    assert t.attribution == "launch_order" and t.concurrency == [1, 4]
    cell = {(g.id, f, c): x.ms_per_step * 1e3 for g in t.gemms for f, per in g.cells.items() for c, x in per.items()}
    # µs, from syn.BF16_STEP by hand: the split-K reduction is its GEMM's, the DeltaNet core is out_proj's input
    assert cell[("layers.0.linear_attn:in_proj_a+in_proj_b", "bf16", 1)] == pytest.approx(6 + 2)
    assert cell[("layers.0.linear_attn:out_proj", "bf16", 1)] == pytest.approx(5 + 7 + 9)
    assert cell[("layers.0.mlp:down_proj", "bf16", 1)] == pytest.approx(3 + 12)
    # one kernel name, one shape, two groups: told apart by position
    assert cell[("layers.1.attn:o_proj", "bf16", 1)] == pytest.approx(6 + 7)
    assert cell[("lm_head:lm_head", "bf16", 1)] == pytest.approx(4 + 40)
    # FP8 MLPs: the fused norm + activation quantization is the FP8 GEMM's, measured once per format
    assert cell[("layers.0.mlp:gate_proj+up_proj", "fp8", 1)] == pytest.approx(5 + 18)
    assert cell[("layers.1.mlp:down_proj", "fp8", 1)] == pytest.approx(4 + 8)
    assert ("layers.0.linear_attn:out_proj", "fp8", 1) not in cell
    assert cell[("layers.0.mlp:down_proj", "bf16", 4)] == pytest.approx(4 * 15)
    # shared cells are the mean of their profiles; the fixed cost: embedding, first norm, sampling
    lm = next(g for g in t.gemms if g.group == "lm_head").cells["bf16"][1]
    assert lm.sources == ["bf16@1", "fp8@1"] and lm.kernels == ["nvjet_lmhead_TNT"]
    assert t.fixed[1].ms_per_step * 1e3 == pytest.approx(3 + 4 + 2) and set(t.fixed[1].by_source) == {"bf16@1", "fp8@1"}
    # per format x layer group x concurrency: a group's GEMMs summed where all were measured
    groups = by_group(t)
    assert groups["bf16"]["layers.0.linear_attn"] == pytest.approx({1: (20 + 8 + 21) / 1e3, 4: 4 * (20 + 8 + 21) / 1e3})
    assert set(groups["fp8"]) == {"layers.0.mlp", "layers.1.mlp"}  # no FP8 cell of an attention half: left out
    assert groups["fp8"]["layers.1.mlp"] == pytest.approx({1: (23 + 12) / 1e3})
    # the table predicts each profiled variant's own step, and a mix from its cells
    assert predict_plan(t, bf16.plan, levels=[1])[0].ms_per_step == pytest.approx(bf16.gpu_ms_per_step)
    assert predict_plan(t, fp8.plan, levels=[1])[0].ms_per_step == pytest.approx(fp8.gpu_ms_per_step)
    assert predict_plan(t, bf16.plan, levels=[4])[0].ms_per_step == pytest.approx(bf16_c4.gpu_ms_per_step)
    one = [r.model_copy(update={"format": "fp8"}) if ".1.mlp." in r.module else r for r in bf16.plan]
    p1 = predict_plan(t, one, levels=[1])[0]
    assert p1.ms_per_step * 1e3 == pytest.approx(230 + 2 - (34 + 15) + (23 + 12))
    assert p1.speedup == pytest.approx((230 + 2) / (230 + 2 - 49 + 35))
    with pytest.raises(InputError, match="no fp8 measurement of layers.1.mlp:gate_proj\\+up_proj at concurrency 4"):
        predict_plan(t, one)


def test_a_profile_whose_launches_do_not_match_its_plan_is_refused():
    p = step_profile(syn.trace(syn.BF16_STEP[:-1]), syn.plan(), variant="bf16", concurrency=1, source="t.json")
    with pytest.raises(InputError, match="9 GEMM launches .* its plan has 10 decode GEMMs"):
        build_cost_table([p])
    other = step_profile(syn.trace(syn.BF16_STEP), syn.plan({"mlp": "w4a16"})[:-1], variant="x", concurrency=1,
                         source="t.json")
    with pytest.raises(InputError):
        build_cost_table([_profile(syn.BF16_STEP), other])


def test_group_costs_give_the_solver_one_row_per_group_and_format():
    from types import SimpleNamespace as NS

    t = build_cost_table([_profile(syn.BF16_STEP), _profile(syn.FP8_MLP_STEP, {"mlp": "fp8"})])
    mods = {r.module for r in syn.plan()}
    groups = [NS(name=f"layers.{i}.mlp", modules=sorted(m for m in mods if f".{i}.mlp." in m), decode=True)
              for i in (0, 1)]
    groups.append(NS(name="vision.0", decode=False, modules=["model.visual.blocks.0.attn.qkv"]))
    gc = group_costs(t, groups, ["fp8"], 1)
    assert gc.cost[("layers.0.mlp", "fp8")] * 1e3 == pytest.approx(23 + 12)
    assert gc.cost[("layers.0.mlp", "bf16")] * 1e3 == pytest.approx(34 + 15)
    assert gc.cost[("vision.0", "fp8")] == 0
    # the GEMMs of no group (here both attention halves and the LM head) cost their BF16 cells whatever is chosen
    assert gc.fixed_ms * 1e3 == pytest.approx(9 + (20 + 8 + 21) + (19 + 13) + 44)
    assert gc.bf16_ms * 1e3 == pytest.approx(232)
    # a group without FP8 cells cannot be offered FP8; a group that splits one GEMM is another model's grouping
    la = NS(name="layers.0.linear_attn", decode=True, modules=sorted(
        m for m in mods if ".0.linear_attn." in m and not m.endswith(("in_proj_a", "in_proj_b"))))
    with pytest.raises(InputError, match="no fp8 measurement of layers.0.linear_attn:in_proj_qkv"):
        group_costs(t, [la], ["fp8"], 1)
    assert group_costs(t, [la], [], 1).cost[("layers.0.linear_attn", "bf16")] * 1e3 == pytest.approx(20 + 21)
    half = NS(name="layers.0.linear_attn", decode=True, modules=[m for m in la.modules if m.endswith("in_proj_qkv")])
    with pytest.raises(InputError, match=r"in_proj_qkv\+in_proj_z is one GEMM but its modules are in groups"):
        group_costs(t, [half], [], 1)
    with pytest.raises(InputError, match="concurrency 4 was not profiled"):
        group_costs(t, groups[:2], ["fp8"], 4)


# --- the committed H200 profiles (profile.json: GPU time per kernel name) ---------------------------------

def _plan(period: str, variant: str) -> list[PlanRow]:
    obj = json.loads(gzip.decompress((RESULTS / period / f"q4b-{variant}.quantgate.json.gz").read_bytes()))
    return [PlanRow(**r) for r in obj["plan"]["modules"]]


@pytest.fixture(scope="module")
def h200():
    prof = json.loads(gzip.decompress((RESULTS / "2026-11-30-h200-serving-options" / "profile.json.gz").read_bytes()))
    dyn = _plan("2026-11-30-h200-serving-options", "fp8-dynamic")
    plans = {"bf16": [r.model_copy(update={"format": "bf16"}) for r in dyn], "fp8-dynamic": dyn,
             "fp8-all": _plan("2026-11-30-h200-serving-options", "fp8-all")}
    return prof, plans


def test_the_committed_bf16_and_fp8_all_profiles_make_a_table_that_predicts_fp8_dynamic(h200):
    prof, plans = h200
    alone = table_from_profile_json({"bf16": prof["bf16"]}, {"bf16": plans["bf16"]}, source="profile.json")
    assert predict_plan(alone, plans["bf16"])[0].ms_per_step == pytest.approx(prof["bf16"]["gpu_ms_per_step"], rel=1e-12)
    t = table_from_profile_json({v: prof[v] for v in ("bf16", "fp8-all")}, plans, source="profile.json")
    assert t.attribution == "weight_bytes" and len(t.gemms) == 153
    head = next(g for g in t.gemms if g.group == "lm_head").cells["bf16"][1]
    # the LM head is the GEMM name launched once per step: 9.72 / 9.78 ms over 32 steps in the two profiles
    assert head.ms_per_step == pytest.approx((9.724067 + 9.775742) / 2 / 32)
    for v in ("bf16", "fp8-all"):  # each profile's own step, but for the averaged LM head
        got = predict_plan(t, plans[v])[0].ms_per_step
        assert got == pytest.approx(prof[v]["gpu_ms_per_step"], abs=abs(head.ms_per_step - 9.724067 / 32) + 1e-12)
    # fp8-dynamic (FP8 attention and MLP, DeltaNet BF16) was not in the table: its predicted step lies between
    dyn = predict_plan(t, plans["fp8-dynamic"])[0]
    assert prof["fp8-all"]["gpu_ms_per_step"] < dyn.ms_per_step < prof["bf16"]["gpu_ms_per_step"]


def test_a_committed_profile_mixing_formats_without_its_gemm_split_is_refused(h200):
    prof, plans = h200
    with pytest.raises(InputError, match="fp8-dynamic.*bf16, fp8.*no gemm_by_kernel"):
        table_from_profile_json({v: prof[v] for v in ("bf16", "fp8-dynamic")}, plans, source="profile.json")
    with pytest.raises(InputError, match="no all-BF16 variant"):
        table_from_profile_json({"fp8-all": prof["fp8-all"]}, plans, source="profile.json")
    # with the per-kernel split kernel_classes.py now writes, the formats' GEMM time is divided as measured
    entry = dict(prof["fp8-dynamic"], gemm_by_kernel={
        "CutlassFP8ScaledMMLinearKernel": {"ms_per_step": 1.40}, "cuBLAS (unquantized layers)": {"ms_per_step": 1.0334497}})
    t = table_from_profile_json({"bf16": prof["bf16"], "fp8-dynamic": entry}, plans, source="profile.json")
    fp8 = [g.cells["fp8"][1] for g in t.gemms if "fp8" in g.cells]
    assert len(fp8) == 8 * 2 + 32 * 2 and sum(c.gemm_ms_per_step for c in fp8) == pytest.approx(1.40)
    # and fp8-dynamic's non-GEMM time against BF16's goes to its FP8 GEMMs
    nongemm = {v: prof[v]["gpu_ms_per_step"] - prof[v]["classes"]["gemm"]["ms_per_step"] for v in ("bf16", "fp8-dynamic")}
    assert sum(c.ms_per_step for c in fp8) == pytest.approx(1.40 + nongemm["fp8-dynamic"] - nongemm["bf16"])
