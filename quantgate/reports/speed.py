"""What a report may say about speed, per backend and per level measured: one place for
whether a variant's speed is a quantized speed, which levels the SLO comparison uses, and what the measured
throughput across levels shows."""

from __future__ import annotations

from quantgate.schema.run import RunNumerics
from quantgate.schema.summary import Summary, VariantSummary

BF16_KERNELS = "BF16 kernels: not a quantized speed"
# A change in pages/s between levels within this share reads as flat (a rule for the wording, not a test).
FLAT = 0.10


def honest_speed(n: RunNumerics | None) -> bool:
    """False for a quantized variant served by transformers serve: it dequantizes compressed-tensors weights to
    BF16 and runs BF16 matmuls (measured: serve.numerics, MEASURED_BY), so its speed says nothing about quantized
    kernels. A BF16 variant's speed is BF16's on any backend; other backends run the checkpoint's own kernels."""
    return not (n is not None and n.quantized and n.backend == "transformers")


def quantized_speed(v: VariantSummary) -> bool:
    return honest_speed(v.numerics)


def speedup_text(v: VariantSummary, concurrency: int) -> str:
    if not quantized_speed(v):
        return BF16_KERNELS
    sp = v.speedup.get(str(concurrency))
    return "–" if sp is None else f"{sp:.2f}×"


def common_levels(r: Summary) -> list[int]:
    """The concurrency levels every variant was measured at: the only ones an SLO row compares."""
    sets = [{lv.concurrency for lv in v.levels} for v in r.variants]
    return sorted(set.intersection(*sets)) if sets else []


def slo_text(r: Summary, v: VariantSummary) -> str:
    """The highest level, of those every variant was measured at, whose p90 latency is within the SLO."""
    if not quantized_speed(v):
        return BF16_KERNELS
    common = common_levels(r)
    slo = r.study["slo_s"]
    ok = [lv.concurrency for lv in v.levels if lv.concurrency in common and lv.n_errors == 0
          and lv.latency_s.get("p90") is not None and lv.latency_s["p90"] <= slo]
    text = str(max(ok)) if ok else "none"
    extra = sorted({lv.concurrency for lv in v.levels} - set(common))
    if extra:
        text += f" (of {', '.join(map(str, common))}; also measured at {', '.join(map(str, extra))}, which the others were not)"
    return text


def throughput_lines(r: Summary) -> list[str]:
    """Per variant measured at two or more levels, what its pages/s did from the lowest level to the highest."""
    out = []
    for v in r.variants:
        lv = sorted(v.levels, key=lambda x: x.concurrency)
        if len(lv) < 2 or not lv[0].pages_per_s:
            continue
        a, b = lv[0], lv[-1]
        ratio = b.pages_per_s / a.pages_per_s
        how = "flat" if abs(ratio - 1) <= FLAT else "rose" if ratio > 1 else "fell"
        out.append(f"{v.name}: throughput {how} from {a.pages_per_s:.3g} pages/s at concurrency {a.concurrency} to "
                   f"{b.pages_per_s:.3g} at {b.concurrency} (×{ratio:.2f}, measured)"
                   + ("" if quantized_speed(v) else f"; {BF16_KERNELS}"))
    return out + preemption_lines(r)


def preemption_lines(r: Summary) -> list[str]:
    """Per variant whose server counts preemptions (vLLM), how many requests it preempted at each level
    — a level where the KV cache ran out measures recomputation too; nothing when no server counts them."""
    counted = [v for v in r.variants if v.preemptions is not None]
    if not counted:
        return []
    out = []
    for v in r.variants:
        if v.preemptions is None:
            out.append(f"{v.name}: preemptions not measured (its server publishes no count)")
            continue
        hit = {c: n for c, n in v.preemptions.items() if n}
        levels = ", ".join(sorted(v.preemptions, key=int))
        if not hit:
            out.append(f"{v.name}: no request preempted at concurrency {levels} (the server's own counter)")
        else:
            what = ", ".join(f"{n} at concurrency {c}" for c, n in sorted(hit.items(), key=lambda x: int(x[0])))
            out.append(f"{v.name}: the server preempted requests — {what} (vllm:num_preemptions_total over the "
                       "level): its KV cache was full, so those requests were evicted and recomputed, and the speed "
                       "there includes that")
    return out


def report_notes(r: Summary) -> list[str]:
    """The variants' notes, less any claim about throughput across levels (the measured lines say it)."""
    return sorted({n for v in r.variants for n in v.notes if "throughput is flat across" not in n})


def pareto_variants(r: Summary) -> tuple[list[VariantSummary], list[str]]:
    """The variants an accuracy-versus-speed front may place, and the ones left out with why."""
    kept, left = [], []
    for v in r.variants:
        (kept if quantized_speed(v) else left).append(v)
    return kept, [f"{v.name}: {BF16_KERNELS} (transformers serve dequantizes to BF16)" for v in left]
