"""A torch-profiler trace of ``vllm serve`` decode steps (``--profiler-config``), read into a ``StepProfile``:
every GPU kernel of one pure-decode step in execution order, each classed (GEMM, elementwise + copies,
attention, DeltaNet, sampling, activation quantization, other).

The classes are the regex table of the vLLM 0.26 research notes (kernel names read from vLLM's source and shared
objects; cuBLAS names from Hopper experience): first match wins, attention before GEMM because FA3's kernels are
``cutlass::device_kernel<flash::…>``. A GPU kernel belongs to the step whose annotation
(``execute_context_0(0)_generation_N(N)``) holds the CPU call that launched it — the runtime event with the
kernel's ``correlation`` id (a CUDA-graph replay is one ``cudaGraphLaunch`` for all its kernels) — or, in a trace
without launch records, the annotation holding the kernel's own start. Written by hand: no library classifies
vLLM's kernels or maps a trace's kernels to its engine steps."""

from __future__ import annotations

import bisect
import gzip
import io
import re
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from quantgate.errors import InputError
from quantgate.schema.load import parse_json, read_regular
from quantgate.schema.speed import KernelSlot, StepProfile
from quantgate.schema.variant import PlanRow

KERNEL_CLASSES = [  # (class, regex searched in the kernel name); order matters
    ("attention", r"flash::|FlashAttn|flash_fwd|fmha|reshape_and_cache|_compute_slot_mapping|merge_attn_states"
                  r"|unified_attention|paged_attention|BatchPrefillWithPaged|BatchDecodeWithPaged"),
    ("deltanet", r"gated_delta_rule|fused_recurrent|fused_sigmoid_gating|fused_gdn_gating|chunk_fwd_kernel_o"
                 r"|chunk_scaled_dot_kkt|chunk_local_cumsum|solve_tril|merge_16x16_to|recompute_w_u|l2norm_fwd"
                 r"|_fused_post_conv|causal_conv1d|layer_norm_fwd_kernel|layer_norm_gated"),
    ("sampling", r"ArgMax|ArgMin|argmax|[Ss]oft[Mm]ax|log_softmax|[Ss]ampling|_topk_topp|[Tt]op[KkPp]|gumbel"
                 r"|exponential|multinomial|_penalties|_bincount|RadixSort|_min_p_kernel|_temperature_kernel"),
    ("act_quant", r"quant|fp4_convert|cvt_fp16_to_fp4|segmented_max"),
    ("gemm", r"gemm|Gemm|GEMM|nvjet|xmma|cutlass|[Mm]arlin|matmul_kernel|bmm_kernel|splitKreduce|triton_tem_"
             r"|cublas|Kernel2"),
    ("elementwise", r"triton_(poi|red|per)_|elementwise|[Rr]educe|CatArray|[Cc]opy|[Ff]ill|[Ii]ndex|scatter|gather"
                    r"|rms_norm|act_and_mul|silu|gelu|rotary|rope|mrope|embedding|where|masked|_pos_embed"),
]
ORDER = ["gemm", "elementwise", "attention", "deltanet", "sampling", "act_quant", "other"]
_COMPILED = [(c, re.compile(rx)) for c, rx in KERNEL_CLASSES]
GPU_CATS = {"kernel", "gpu_memcpy", "gpu_memset"}
_RUNTIME_CATS = {"cuda_runtime", "cuda_driver"}
# One engine step: execute_context_<n>(<tokens>)_generation_<n>(<tokens>) (plain or "detailed" annotation).
STEP = re.compile(r"^execute_context_(\d+)\((?:sq)?(\d+)[^)]*\)_generation_(\d+)\((?:sq)?(\d+)[^)]*\)$")
# GEMM-class kernels that are not a GEMM of their own: Inductor's Triton kernels whose names carry the fused
# ops (an activation quantization fused ahead of cutlass_scaled_mm reads "..._cutlass_scaled_mm_...": they
# prepare the next GEMM's input), and cuBLAS's split-K reduction (it finishes the GEMM before it).
_PREPARES_NEXT = re.compile(r"^triton_(?!tem_)")
_FINISHES_PREVIOUS = re.compile(r"splitKreduce")


def classify(name: str, cat: str = "kernel") -> str:
    """The class of one GPU event: memory copies and sets count as elementwise."""
    if cat in ("gpu_memcpy", "gpu_memset"):
        return "elementwise"
    for cls, rx in _COMPILED:
        if rx.search(name):
            return cls
    return "other"


def is_gemm(name: str, cls: str) -> bool:
    """A GEMM launch of its own (one linear layer), not a kernel of the GEMM class that serves one."""
    return cls == "gemm" and not _PREPARES_NEXT.search(name) and not _FINISHES_PREVIOUS.search(name)


def finishes_previous(name: str, cls: str) -> bool:
    return cls == "gemm" and bool(_FINISHES_PREVIOUS.search(name))


# a trace of the few decode steps speed.profile records is tens of MiB; 1 GiB leaves room for a long one (the loader's
# default, 256 MiB, is sized for quantgate's own files)
TRACE_BYTES = 1 << 30


def load_trace(path: Path) -> dict:
    path = Path(path)
    raw = read_regular(path, "torch-profiler trace", TRACE_BYTES)
    if raw[:2] == b"\x1f\x8b":
        try:  # read to the limit, not decompressed whole: a small gzip bomb would fill memory
            raw = gzip.GzipFile(fileobj=io.BytesIO(raw)).read(TRACE_BYTES + 1)
        except (OSError, EOFError) as e:
            raise InputError(f"{path}: not a readable torch-profiler trace ({e})") from None
        if len(raw) > TRACE_BYTES:
            raise InputError(f"{path}: larger than {TRACE_BYTES >> 20} MiB unpacked; not a trace of the few decode "
                             "steps quantgate profiles")
    obj = parse_json(raw, str(path))  # under the loader's limits: one DataError naming the file and line
    if not isinstance(obj, dict) or not isinstance(obj.get("traceEvents"), list):
        raise InputError(f"{path}: no 'traceEvents' list: not a torch-profiler (Chrome) trace")
    return obj


def _steps(trace: dict, where: str) -> tuple[list[list[dict]], list[dict], int]:
    """(each pure-decode step's GPU events in execution order, GPU events launched outside every step, number of
    steps with prefill in them)."""
    events = [e for e in trace["traceEvents"] if isinstance(e, dict) and e.get("ph") == "X"]
    spans: list[tuple[float, float, bool]] = []
    for e in events:
        m = STEP.match(str(e.get("name", ""))) if e.get("cat") == "user_annotation" else None
        if m:
            ts = float(e.get("ts", 0.0))
            spans.append((ts, ts + float(e.get("dur", 0.0)), int(m.group(1)) == 0 and int(m.group(3)) > 0))
    if not any(decode for *_, decode in spans):
        raise InputError(f"{where}: no pure-decode step annotation (execute_context_0(0)_generation_N(N)): was the "
                         "profile taken while requests were decoding, with vLLM's torch profiler?")
    spans.sort()
    starts = [s for s, _, _ in spans]
    launch = {e["args"]["correlation"]: float(e.get("ts", 0.0)) for e in events
              if e.get("cat") in _RUNTIME_CATS and isinstance(e.get("args"), dict) and "correlation" in e["args"]}
    per_step: dict[int, list[dict]] = {}
    outside: list[dict] = []
    for e in events:
        if e.get("cat") not in GPU_CATS:
            continue
        corr = e.get("args", {}).get("correlation") if isinstance(e.get("args"), dict) else None
        at = launch.get(corr, float(e.get("ts", 0.0)))
        i = bisect.bisect_right(starts, at) - 1
        if i >= 0 and at <= spans[i][1]:
            if spans[i][2]:
                per_step.setdefault(i, []).append(e)
        else:
            outside.append(e)
    steps = [sorted(per_step[i], key=lambda e: float(e.get("ts", 0.0))) for i in sorted(per_step)]
    return steps, outside, sum(1 for *_, decode in spans if not decode)


def step_profile(trace: dict, plan: Sequence[PlanRow], *, variant: str, concurrency: int, source: str) -> StepProfile:
    """The trace's pure-decode steps as one averaged step (module docstring). Steps whose kernel sequence differs
    from the most common one (another batch size's CUDA graph, a step cut by the profiler window) are dropped and
    counted; ``plan``: the variant's plan rows (vision and projector rows are left out)."""
    steps, outside, other = _steps(trace, source)
    seqs = [tuple(str(e.get("name", "")) for e in s) for s in steps]
    common, _ = Counter(seqs).most_common(1)[0]
    kept = [s for s, q in zip(steps, seqs, strict=True) if q == common]
    names = list(dict.fromkeys(common))
    index = {n: i for i, n in enumerate(names)}
    slots = []
    for k, name in enumerate(common):
        durs = [float(s[k].get("dur", 0.0)) for s in kept]
        slots.append(KernelSlot(name=index[name], cls=classify(name, str(kept[0][k].get("cat"))), us=sum(durs) / len(durs),
                                us_min=min(durs), us_max=max(durs)))
    n_all = len(steps) + other  # outside events serve every annotated step, decode or not
    decode_rows = [r for r in plan if r.kind not in ("vision", "projector")]
    return StepProfile(variant=variant, concurrency=concurrency, source=source, decode_steps=len(kept),
                       dropped_steps=len(steps) - len(kept), other_steps=other, names=names, step=slots,
                       outside_ms_per_step=sum(float(e.get("dur", 0.0)) for e in outside) / 1e3 / n_all,
                       outside_kernels_per_step=len(outside) / n_all, plan=decode_rows)
