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


def timed(r: Summary) -> bool:
    """Whether the study timed its speed in repeated waves (``speed:``): then the waves are the report's speed, and
    the accuracy pass's throughput (pages sent for scoring, a few at a time) appears only in the time budget."""
    return any(v.speed for v in r.variants)


def speed_curve(r: Summary, v: VariantSummary) -> list[tuple[int, float, float | None]]:
    """(concurrency, pages/s, p90 latency s) per level, as the report plots it: the waves' means when the study timed
    waves, else the accuracy pass's levels."""
    if timed(r):
        out = []
        for lv in v.speed:
            if lv.waves:
                p90 = [w.latency_s.get("p90") for w in lv.waves]
                out.append((lv.concurrency, sum(w.pages_per_s for w in lv.waves) / len(lv.waves),
                            None if None in p90 else sum(p90) / len(p90)))  # type: ignore[arg-type]
        return out
    return [(lv.concurrency, lv.pages_per_s, lv.latency_s.get("p90")) for lv in v.levels]


def _interval_cell(iv) -> str:
    if iv is None or iv.ratio is None:
        return iv.note if iv is not None and iv.note else "–"
    if iv.low is None or iv.high is None:
        return f"{iv.ratio:.2f}× — {iv.note}"
    return f"{iv.ratio:.2f}× [{iv.low:.2f}, {iv.high:.2f}] ({iv.level:.0%}, {iv.n_variant} vs {iv.n_baseline} waves)"


def wave_rows(r: Summary) -> list[dict[str, str]]:
    """One row per variant and timed speed level, for both renderers: the waves, each wave's output tok/s, and the
    ratio to the baseline's with its interval (judge.speed.speedup_interval)."""
    rows = []
    for v in r.variants:
        for lv in v.speed:
            more = f" (+{lv.incomplete_waves} incomplete)" if lv.incomplete_waves else ""
            rows.append({"variant": v.name, "concurrency": str(lv.concurrency),
                         "waves": f"{len(lv.waves)} × {lv.per_wave}{more}",
                         "tok_s": ", ".join(f"{w.output_tokens_per_s:.1f}" for w in lv.waves) or "–",
                         "ratio": _interval_cell(v.speedup_interval.get(str(lv.concurrency))) if quantized_speed(v)
                         else BF16_KERNELS, "ignore_eos": "yes" if lv.ignore_eos else "no"})
    return rows
