"""A small synthetic decode trace, shaped like vLLM 0.26's torch-profiler traces (CPU step annotations, one
cudaGraphLaunch per step whose correlation id every kernel of the replay carries, sampling launched outside the
step), for a two-layer model: layer 0 Gated DeltaNet + MLP, layer 1 attention + MLP, an LM head. Durations are
made up and known, so a test can check every cell of the cost table against them."""

from quantgate.schema.variant import PlanRow

SHAPES = {  # leaf -> (out, in)
    "in_proj_qkv": (1024, 256), "in_proj_z": (512, 256), "in_proj_b": (16, 256), "in_proj_a": (16, 256),
    "out_proj": (256, 512), "q_proj": (512, 256), "k_proj": (128, 256), "v_proj": (128, 256), "o_proj": (256, 512),
    "gate_proj": (512, 256), "up_proj": (512, 256), "down_proj": (256, 512)}
KIND = {"in_proj_qkv": "linear_attention", "in_proj_z": "linear_attention", "in_proj_b": "linear_attention",
        "in_proj_a": "linear_attention", "out_proj": "linear_attention", "q_proj": "attention", "k_proj": "attention",
        "v_proj": "attention", "o_proj": "attention", "gate_proj": "mlp", "up_proj": "mlp", "down_proj": "mlp"}
PART = {"linear_attention": "linear_attn", "attention": "self_attn", "mlp": "mlp"}
LAYERS = [["out_proj", "in_proj_qkv", "in_proj_z", "in_proj_b", "in_proj_a", "gate_proj", "up_proj", "down_proj"],
          ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]]


def plan(formats: dict[str, str] | None = None, extra: bool = False) -> list[PlanRow]:
    """Plan rows in the order `quantgate plan` lists them (registration order, not decode order); ``formats``:
    kind -> format; ``extra``: one more MLP projection vLLM would not know."""
    formats = formats or {}
    rows = [PlanRow(module="model.visual.blocks.0.attn.qkv", kind="vision", layer=None, shape=[768, 256],
                    params=768 * 256, format="bf16")]
    for i, leaves in enumerate(LAYERS):
        for leaf in leaves + (["extra_proj"] if extra and i == 1 else []):
            o, n = SHAPES.get(leaf, (256, 256))
            kind = KIND.get(leaf, "mlp")
            rows.append(PlanRow(module=f"model.language_model.layers.{i}.{PART[kind]}.{leaf}", kind=kind, layer=i,
                                shape=[o, n], params=o * n, format=formats.get(kind, "bf16")))
    rows.append(PlanRow(module="lm_head", kind="lm_head", layer=None, shape=[320, 256], params=320 * 256,
                        format="bf16"))
    return rows


# One decode step: (name, µs); the GEMM of each decode GEMM, and what runs between them.
BF16_STEP = [
    ("embedding_kernel", 3.0), ("rms_norm_kernel", 4.0),                       # fixed: before the first GEMM
    ("nvjet_qkvz_TNT", 20.0),                                                  # L0 in_proj_qkv+in_proj_z
    ("nvjet_ba_splitK_TNT", 6.0), ("splitKreduce_kernel<32>", 2.0),            # L0 in_proj_a+in_proj_b
    ("causal_conv1d_update_kernel", 5.0), ("fused_recurrent_gated_delta_rule_fwd", 7.0),
    ("nvjet_256x512_TNT", 9.0),                                                # L0 out_proj
    ("triton_poi_fused_add_rms_norm_3", 4.0), ("nvjet_gateup_TNT", 30.0),      # L0 gate_up
    ("act_and_mul_kernel", 3.0), ("nvjet_256x512_TNT", 12.0),                  # L0 down
    ("rms_norm_kernel", 4.0), ("nvjet_qkv_TNT", 15.0),                         # L1 q/k/v
    ("void cutlass::device_kernel<flash::FlashAttnFwdSm90<>>", 6.0),
    ("nvjet_256x512_TNT", 7.0),                                                # L1 o_proj: out_proj's shape
    ("triton_poi_fused_add_rms_norm_3", 4.0), ("nvjet_gateup_TNT", 30.0),      # L1 gate_up
    ("act_and_mul_kernel", 3.0), ("nvjet_256x512_TNT", 12.0),                  # L1 down
    ("rms_norm_kernel", 4.0), ("nvjet_lmhead_TNT", 40.0),                      # lm_head
]
FP8 = "void cutlass::device_kernel<vllm::cutlass_3x_gemm_sm90_fp8<cutlass::float_e4m3_t>>"
QUANT = "triton_red_fused_abs_clamp_cutlass_scaled_mm_div_max_rms_norm_2"
# MLPs in FP8: the norm/activation fuses with the activation quantization into one Triton kernel
FP8_MLP_STEP = [(n, d) for n, d in BF16_STEP[:8]] + [
    (QUANT, 5.0), (FP8, 18.0), (QUANT, 4.0), (FP8, 8.0)] + [(n, d) for n, d in BF16_STEP[12:16]] + [
    (QUANT, 5.0), (FP8, 18.0), (QUANT, 4.0), (FP8, 8.0)] + BF16_STEP[20:]
SAMPLING = ("argmax_kernel", 2.0)
PREFILL = [("nvjet_vision_TNT", 300.0), ("nvjet_qkvz_TNT", 200.0)]


def trace(step: list[tuple[str, float]], steps: int = 4, *, correlation: bool = True, odd_step: bool = False,
          prefill: bool = False, scale: float = 1.0) -> dict:
    """``steps`` decode steps of ``step`` (durations x ``scale``); ``odd_step``: one more decode step missing its
    first kernel; ``prefill``: a step with prefill in it first. Without ``correlation`` no runtime events are
    written and the GPU events sit inside their step's annotation."""
    ev, t, corr = [], 0.0, 0
    plan_steps = ([("prefill", PREFILL)] if prefill else []) + [("decode", step)] * steps + (
        [("decode", step[1:])] if odd_step else [])
    for kind, kernels in plan_steps:
        corr += 1
        name = "execute_context_1(4052)_generation_0(0)" if kind == "prefill" else "execute_context_0(0)_generation_1(1)"
        ev.append({"ph": "X", "cat": "user_annotation", "name": name, "ts": t, "dur": 300.0, "pid": 1, "tid": 1})
        gpu = t + (400.0 if correlation else 10.0)  # with launch records, the GPU runs after the CPU step ended
        if correlation:
            ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaGraphLaunch", "ts": t + 50, "dur": 5.0,
                       "pid": 1, "tid": 1, "args": {"correlation": corr}})
        for n, d in kernels:
            ev.append({"ph": "X", "cat": "kernel", "name": n, "ts": gpu, "dur": d * scale, "pid": 0, "tid": 7,
                       "args": {"correlation": corr} if correlation else {}})
            gpu += d * scale + 0.5
        if kind == "decode":  # the sampler: launched after the step's annotation
            corr += 1
            if correlation:
                ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": t + 350, "dur": 3.0,
                           "pid": 1, "tid": 1, "args": {"correlation": corr}})
            ev.append({"ph": "X", "cat": "kernel", "name": SAMPLING[0], "ts": gpu if correlation else t + 320,
                       "dur": SAMPLING[1] * scale, "pid": 0, "tid": 7, "args": {"correlation": corr} if correlation else {}})
        t += 1000.0
    return {"traceEvents": ev}
