"""What bounds a variant's decode step, from four measured numbers: its GPU ms per step and kernels per step (a
decode profile), its decode weight bytes, and the measured copy bandwidth of the GPU.

Reading the weights once at the copy bandwidth is the least time a step can take by bytes (the weight-read
bound); its share of the measured step says how much fewer weight bytes could buy at most. When the read is most
of the step (share >= 1/2), the step is weight-read bound. When it is not, most of the step is time beyond the
read: at c=1 — one token per step, so the GEMMs' arithmetic and the KV-cache reads are small — that is the
step's many short kernels (kernel-count bound); at c > 1 these numbers do not separate kernel count from the
batch's arithmetic and KV-cache reads, and the sentence says so."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class StepBound:
    concurrency: int
    gpu_ms_per_step: float
    kernels_per_step: float
    weight_bytes: int
    copy_gbs: float
    bound_ms: float  # the weights read once at copy_gbs
    share: float  # bound_ms / gpu_ms_per_step
    label: str  # "weight-read bound", "kernel-count bound" or "not weight-read bound"
    sentence: str


def explain_step(gpu_ms_per_step: float, kernels_per_step: float, weight_bytes: int, copy_gbs: float, *,
                 concurrency: int = 1) -> StepBound:
    if min(gpu_ms_per_step, kernels_per_step, weight_bytes, copy_gbs) <= 0 or concurrency < 1:
        raise ValueError("GPU ms per step, kernels per step, weight bytes and copy bandwidth must be positive "
                         f"(got {gpu_ms_per_step}, {kernels_per_step}, {weight_bytes}, {copy_gbs}) and concurrency >= 1")
    bound = weight_bytes / (copy_gbs * 1e9) * 1e3
    share = bound / gpu_ms_per_step
    at = f"at c={concurrency}"
    read = f"reading its {weight_bytes / 1e9:.2f} GB of weights at {copy_gbs:,.1f} GB/s"
    steps = f"{kernels_per_step:.0f} kernels, {gpu_ms_per_step:.2f} ms/step ({gpu_ms_per_step * 1e3 / kernels_per_step:.1f} µs each)"
    if share >= 0.5:
        label = "weight-read bound"
        sentence = (f"{label} {at}: {read} takes {bound:.2f} ms, {share:.0%} of its {gpu_ms_per_step:.2f} ms GPU step "
                    f"({kernels_per_step:.0f} kernels); fewer weight bytes save at most that share")
    elif concurrency == 1:
        label = "kernel-count bound"
        sentence = (f"{label} {at}: {steps}; {read} would take {bound:.2f} ms ({share:.0%}), so fewer weight bytes "
                    "buy little")
    else:
        label = "not weight-read bound"
        sentence = (f"{label} {at}: {read} would take {bound:.2f} ms, {share:.0%} of its {steps}; the rest is kernel "
                    "count, the batch's arithmetic and KV-cache reads, which these numbers do not separate")
    return StepBound(concurrency=concurrency, gpu_ms_per_step=gpu_ms_per_step, kernels_per_step=kernels_per_step,
                     weight_bytes=weight_bytes, copy_gbs=copy_gbs, bound_ms=bound, share=share, label=label,
                     sentence=sentence)
