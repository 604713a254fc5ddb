"""Placing variants with TP/DP on a GPU pool (fake devices: no GPU is touched) — groups of the right
size, no GPU shared unless the memory fractions fit, all_at_once packed in waves and the rest queued, one
clear refusal for a variant the pool cannot hold or a TP size the model's heads do not allow."""

from __future__ import annotations

import json
import shutil

import pytest
import yaml

from quantgate.errors import InputError
from quantgate.schema.placement import Device, ParallelSettings, PlacementRequest, VariantDemand, same_placement
from quantgate.study.placement import may_run_together, place
from tests.support.paths import REPO

READER = REPO / "quantgate" / "assets" / "reader"


def _req(servers, pool, *demands):
    variants = [VariantDemand(name=n, parallel=ParallelSettings(tensor_parallel_size=tp, data_parallel_size=dp),
                              memory_fraction=f) for n, tp, dp, f in demands]
    return PlacementRequest(pool=[Device(index=i) if isinstance(i, int) else Device(host=i[0], index=i[1])
                                  for i in pool], servers=servers, variants=variants)


def _where(p):
    return {n: (v.wave, v.gpus) for n, v in p.variants.items()}


def test_tp_and_dp_get_groups_of_their_size_and_what_does_not_fit_waits_for_the_next_wave():
    p = place(_req("all_at_once", [0, 1, 2, 3], ("bf16", 1, 1, None), ("fp8-tp2", 2, 1, None),
                   ("nvfp4-dp2", 1, 2, None), ("mixed", 1, 1, None)))
    # bf16 takes GPU 0, fp8-tp2 two more; nvfp4-dp2 needs two and one is left, so mixed (one) takes it and
    # nvfp4-dp2 waits for the second wave, where it has the pool to itself
    assert _where(p) == {"bf16": (0, [0]), "fp8-tp2": (0, [1, 2]), "mixed": (0, [3]), "nvfp4-dp2": (1, [0, 1])}
    assert p.waves == [["bf16", "fp8-tp2", "mixed"], ["nvfp4-dp2"]]
    assert all(not v.shares_gpu_with for v in p.variants.values())


def test_memory_fractions_decide_whether_servers_share_a_gpu():
    fits = place(_req("all_at_once", [0, 1], *[(n, 1, 1, 0.45) for n in "abcd"]))
    assert _where(fits) == {"a": (0, [0]), "b": (0, [1]), "c": (0, [0]), "d": (0, [1])}  # 0.9 per GPU
    assert fits.variants["a"].shares_gpu_with == ["c"] and fits.variants["d"].shares_gpu_with == ["b"]
    full = place(_req("all_at_once", [0, 1], *[(n, 1, 1, 0.6) for n in "abcd"]))
    assert _where(full) == {"a": (0, [0]), "b": (0, [1]), "c": (1, [0]), "d": (1, [1])}  # 1.2 would not fit
    # a server without a fraction takes its GPU whole: nothing joins it, and it joins nothing
    mixed = place(_req("all_at_once", [0], ("whole", 1, 1, None), ("part", 1, 1, 0.3), ("part2", 1, 1, 0.3)))
    assert _where(mixed) == {"whole": (0, [0]), "part": (1, [0]), "part2": (1, [0])}
    # a backend with no memory option (transformers serve) reserves nothing and shares any GPU not held whole
    free = place(_req("all_at_once", [0], ("t1", 1, 1, 0.0), ("t2", 1, 1, 0.0), ("v", 1, 1, None)))
    assert _where(free) == {"t1": (0, [0]), "t2": (0, [0]), "v": (1, [0])}


def test_a_tp_group_packs_on_the_least_loaded_gpus():
    p = place(_req("all_at_once", [0, 1, 2], ("a", 1, 1, 0.5), ("b", 2, 1, 0.4), ("c", 2, 1, 0.4)))
    # b avoids a's GPU 0; c then takes the least-loaded pair, b's 1 and 2 (0.4 each against 0.5 on GPU 0)
    assert _where(p) == {"a": (0, [0]), "b": (0, [1, 2]), "c": (0, [1, 2])}
    assert p.variants["c"].shares_gpu_with == ["b"] and p.variants["a"].shares_gpu_with == []
    # one more at 0.4 no longer fits on 1 and 2 (1.2); 0 and one of them would be 0.9 and 1.2: next wave
    p = place(_req("all_at_once", [0, 1, 2], ("a", 1, 1, 0.5), ("b", 2, 1, 0.4), ("c", 2, 1, 0.4), ("d", 2, 1, 0.4)))
    assert _where(p)["d"] == (1, [0, 1])


def test_queueing_on_a_single_gpu_and_one_at_a_time_goes_round_the_pool():
    q = place(_req("all_at_once", [0], *[(n, 1, 1, None) for n in "abc"]))
    assert q.waves == [["a"], ["b"], ["c"]] and {v.gpus[0] for v in q.variants.values()} == {0}
    rr = place(_req("one_at_a_time", [0, 1], *[(n, 1, 1, None) for n in "abc"]))
    assert _where(rr) == {"a": (0, [0]), "b": (1, [1]), "c": (2, [0])}  # the old round robin, one GPU each
    tp = place(_req("one_at_a_time", [0, 1, 2], ("a", 1, 1, None), ("b", 2, 1, None)))
    assert _where(tp) == {"a": (0, [0]), "b": (1, [1, 2])}
    assert may_run_together(tp, "a", "b")  # b may start during a's lm-eval: other GPUs
    same = place(_req("one_at_a_time", [0, 1], ("a", 2, 1, None), ("b", 2, 1, None)))
    assert not may_run_together(same, "a", "b")
    halves = place(_req("one_at_a_time", [0, 1], ("a", 2, 1, 0.4), ("b", 2, 1, 0.5)))
    assert may_run_together(halves, "a", "b")


def test_groups_stay_on_one_host():
    p = place(_req("all_at_once", [("n1", 0), ("n1", 1), ("n2", 0), ("n2", 1)], ("a", 2, 1, None), ("b", 1, 1, None),
                   ("c", 2, 1, None)))
    assert {n: (v.host, v.wave, v.gpus) for n, v in p.variants.items()} == \
        {"a": ("n1", 0, [0, 1]), "b": ("n2", 0, [0]), "c": ("n1", 1, [0, 1])}


@pytest.mark.parametrize("pool, tp, dp, match", [
    ([0, 1], 4, 1, r"'big' \(TP=4 × DP=1\) needs 4 GPUs; the pool has 2 \(0, 1\)"),
    ([0, 1, 2], 2, 2, r"needs 4 GPUs; the pool has 3"),
    ([("n1", 0), ("n1", 1), ("n2", 0)], 3, 1, r"needs 3 GPUs; the pool has 2 on one host"),
])
def test_a_variant_the_pool_cannot_hold_is_refused(pool, tp, dp, match):
    with pytest.raises(InputError, match=match):
        place(_req("all_at_once", pool, ("bf16", 1, 1, None), ("big", tp, dp, None)))


def test_without_a_pool_servers_inherit_the_devices():
    p = place(_req("all_at_once", [], ("a", 1, 1, None), ("b", 2, 1, None)))
    assert p.waves == [["a", "b"]] and all(v.placed_by == "inherited" and v.gpus is None for v in p.variants.values())
    assert p.variants["b"].parallel.devices_needed == 2  # nothing to check it against: vLLM takes what it sees
    one = place(_req("one_at_a_time", [], ("a", 1, 1, None), ("b", 2, 1, None)))
    assert one.waves == [["a"], ["b"]] and not may_run_together(one, "a", "b")


def test_the_placement_identity_decides_resume():
    from quantgate.schema.placement import VariantPlacement
    from quantgate.schema.run import ServerLayout

    def layout(gpus, tp=1, placed_by="study", node=None):
        return ServerLayout(servers="all_at_once", servers_in_study=2, placement=VariantPlacement(
            variant="v", parallel=ParallelSettings(tensor_parallel_size=tp), gpus=gpus, placed_by=placed_by, node=node))

    assert same_placement(layout([0, 1], 2), layout([0, 1], 2))
    assert not same_placement(layout([0, 1], 2), layout([2, 3], 2))  # other GPUs: re-served
    assert not same_placement(layout([0], 1), layout([0, 1], 2))  # other parallel settings
    # Ray chose the node and GPUs: resuming on another node after one is lost is the same run
    assert same_placement(layout(None, 2, "ray", "node-a"), layout(None, 2, "ray", "node-b"))
    assert same_placement(None, layout([0], 1)) and same_placement(ServerLayout(servers="one_at_a_time",
                                                                                servers_in_study=1), layout([0], 1))


# --- from a study YAML ---------------------------------------------------------------------------------


def _study(tmp_path, variants, **over):
    body = {"name": "p", "model": str(tmp_path / "model"), "pages": {"synth": {"n": 4}}, "variants": variants,
            "backend": {"name": "vllm", "vllm_cmd": "vllm"}, "min_pages": 2, **over}
    f = tmp_path / "study.yaml"
    f.write_text(yaml.safe_dump(body))
    return f


def test_a_variants_tp_and_dp_are_the_backends_own_options(tmp_path):
    from quantgate.study.placement import plan_placement
    from quantgate.study.spec import load_study

    st = load_study(_study(tmp_path, [{"name": "bf16", "recipe": "bf16"},
                                      {"name": "fp8-tp2", "recipe": "fp8-dynamic", "backend": {"tensor_parallel_size": 2}},
                                      {"name": "fp8-dp2", "recipe": "fp8-dynamic", "backend": {"data_parallel_size": 2,
                                                                                               "gpu_memory_utilization": 0.4}}],
                           gpus=[0, 1], servers="all_at_once"))
    p = plan_placement(st)
    assert {n: (v.parallel.tensor_parallel_size, v.parallel.data_parallel_size, v.wave, v.gpus)
            for n, v in p.variants.items()} == {"bf16": (1, 1, 0, [0]), "fp8-tp2": (2, 1, 1, [0, 1]),
                                                "fp8-dp2": (1, 2, 2, [0, 1])}
    from quantgate.serve.backends.derive import backend_from_spec
    from quantgate.study.placement import variant_backend

    b = backend_from_spec(variant_backend(st.backend, st.variants[1]))
    cmd = b.server(tmp_path / "m", tmp_path / "log").make_command(8000)
    assert cmd[cmd.index("--tensor-parallel-size") + 1] == "2" and cmd[cmd.index("--data-parallel-size") + 1] == "1"


@pytest.mark.parametrize("variant, over, match", [
    ({"backend": {"tensor_parallel_size": 2}}, {"backend": {"name": "transformers"}},
     r"variants\.1\.backend\.tensor_parallel_size': not an option of backend transformers \(it is an option of: vllm\)"),
    ({"backend": {"tensor_parallel_size": 0}}, {}, r"variants\.1\.backend\.tensor_parallel_size': Input should be greater"),
    ({"backend": {"extra_args": ["--x"]}}, {}, r"variants\.1\.backend\.extra_args': not a per-variant option"),
    ({"backend": {"tensor_parallel_size": 4}}, {"gpus": [0, 1]}, r"study\.yaml: variant 'x' \(TP=4 × DP=1\) needs 4 GPUs"),
])
def test_bad_variant_layouts_are_refused_when_the_study_is_read(tmp_path, variant, over, match):
    from quantgate.study.spec import load_study

    with pytest.raises(InputError, match=match):
        load_study(_study(tmp_path, [{"name": "bf16", "recipe": "bf16"}, {"name": "x", "recipe": "bf16", **variant}],
                          **over))


def test_tp_must_divide_the_models_heads(tmp_path):
    """The bundled reader (a Qwen3.5): 4 attention heads, 2 KV heads, 8/16 Gated DeltaNet key/value heads, 4 vision
    heads. TP 2 and 4 fit (4 KV-replicates 2 heads); 3 divides none; 8 is more than the attention heads."""
    from quantgate.study.heads import check_heads, head_counts, tp_problems

    counts = head_counts(json.loads((READER / "config.json").read_text()))
    assert counts == {"text_config.num_attention_heads": 4, "text_config.num_key_value_heads": 2,
                      "text_config.linear_num_key_heads": 8, "text_config.linear_num_value_heads": 16,
                      "vision_config.num_heads": 4}
    assert tp_problems(counts, 2) == [] and tp_problems(counts, 4) == []
    assert tp_problems(counts, 8) == ["text_config.num_attention_heads = 4", "vision_config.num_heads = 4"]
    assert tp_problems({"num_key_value_heads": 4}, 6) == ["num_key_value_heads = 4 (neither divisible by 6 nor dividing it)"]
    with pytest.raises(InputError, match=r"tensor_parallel_size 3 does not divide the heads of .*config\.json: "
                       r"text_config\.num_attention_heads = 4; .*linear_num_value_heads = 16.*Sizes that fit: 1, 2, 4"):
        check_heads(READER, 3, [])
    # the vision encoder run data-parallel is not sharded, so only the language model's heads count
    model = tmp_path / "m"
    model.mkdir()
    cfg = json.loads((READER / "config.json").read_text())
    cfg["vision_config"]["num_heads"] = 6
    (model / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(InputError, match="vision_config.num_heads = 6"):
        check_heads(model, 4, [])
    check_heads(model, 4, ["--mm-encoder-tp-mode", "data"])


def test_a_study_whose_tp_does_not_divide_the_heads_stops_before_any_work(tmp_path):
    from quantgate.study import run_study

    shutil.copytree(READER, tmp_path / "model")
    out = tmp_path / "out"
    f = _study(tmp_path, [{"name": "bf16", "recipe": "bf16"},
                          {"name": "fp8-tp3", "recipe": "fp8-dynamic", "backend": {"tensor_parallel_size": 3}}],
               gpus=[0, 1, 2])
    with pytest.raises(InputError, match=r"variant 'fp8-tp3' \(variants\.1\): tensor_parallel_size 3 does not divide"):
        run_study(f, out, log=lambda s: None)
    assert not out.exists()  # nothing written


def test_the_example_of_docs_scale_md_places_as_the_doc_says():
    p = place(_req("all_at_once", [0, 1, 2, 3], ("bf16", 1, 1, 0.45), ("fp8-tp2", 2, 1, 0.45), ("bf16-tp2", 2, 1, 0.45),
                   ("nvfp4-dp2", 1, 2, 0.9)))
    assert _where(p) == {"bf16": (0, [0]), "fp8-tp2": (0, [1, 2]), "bf16-tp2": (0, [0, 3]), "nvfp4-dp2": (1, [0, 1])}
