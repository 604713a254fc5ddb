"""Per-step GPU time by kernel class, from a torch profiler trace of ``vllm serve`` decode steps
(``profile_step.py``), with the classes of ``quantgate.speed.trace`` (the regex table of the vLLM 0.26 research
notes). Written by hand: no library classifies vLLM's kernels. Unmatched names are listed by time, so the
table can be audited."""

from __future__ import annotations

from collections import defaultdict

from quantgate.serve.kernels import gemm_time

# the class table, the step annotation and the trace reader are quantgate.speed.trace's (one place for the rules)
from quantgate.speed.trace import GPU_CATS, KERNEL_CLASSES, ORDER, STEP, classify, load_trace  # noqa: F401


def classify_trace(trace: dict, top: int = 20) -> dict:
    """Per decode step: ms and kernels of each class, its share of GPU time, the copies inside elementwise,
    the span of the profiled window per step, the ``top`` unmatched kernel names by time and the heaviest
    names of each class. All GPU
    events of the window count (sampling runs outside the step annotation); steps are the annotated
    pure-decode steps (no prefill in them), and steps with prefill are counted apart."""
    events = [e for e in trace.get("traceEvents", []) if isinstance(e, dict) and e.get("ph") == "X"]
    decode = other_steps = 0
    for e in events:
        if e.get("cat") == "user_annotation":
            m = STEP.match(str(e.get("name", "")))
            if m:
                if int(m.group(1)) == 0 and int(m.group(3)) > 0:
                    decode += 1
                else:
                    other_steps += 1
    if decode == 0:
        raise ValueError("no pure-decode step annotation (execute_context_0(0)_generation_N(N)) in the trace")
    us: dict[str, float] = defaultdict(float)
    count: dict[str, int] = defaultdict(int)
    copies_us, copies_n = 0.0, 0
    by_name: dict[tuple[str, str], list[float]] = defaultdict(lambda: [0.0, 0])
    first, last = None, None
    for e in events:
        cat = e.get("cat")
        if cat not in GPU_CATS:
            continue
        name, dur, ts = str(e.get("name", "")), float(e.get("dur", 0.0)), float(e.get("ts", 0.0))
        cls = classify(name, cat)
        us[cls] += dur
        count[cls] += 1
        if cat != "kernel":
            copies_us += dur
            copies_n += 1
        by_name[(cls, name)][0] += dur
        by_name[(cls, name)][1] += 1
        first = ts if first is None else min(first, ts)
        last = ts + dur if last is None else max(last, ts + dur)
    total = sum(us.values())
    gemm_names = _top(by_name, "gemm", None)
    classes = {c: {"ms_per_step": us[c] / 1e3 / decode, "kernels_per_step": count[c] / decode,
                   "share": us[c] / total if total else 0.0} for c in ORDER}
    return {
        "decode_steps": decode, "other_steps": other_steps,
        "gpu_ms_per_step": total / 1e3 / decode, "kernels_per_step": sum(count.values()) / decode,
        "span_ms_per_step": ((last - first) / 1e3 / decode) if first is not None else None,
        "classes": classes,
        "copies": {"ms_per_step": copies_us / 1e3 / decode, "events_per_step": copies_n / decode},
        "top_other": _top(by_name, "other", top),
        # the heaviest names of every class, to audit what the regexes put where
        "top_by_class": {c: _top(by_name, c, 5) for c in ORDER if c != "other"},
        # every GEMM name, and the step's GEMM time per vLLM linear kernel they map to (quantgate.serve.kernels)
        "gemm_names": gemm_names,
        "gemm_by_kernel": {k: t.model_dump() for k, t in
                           gemm_time(gemm_names, decode, classes["gemm"]["ms_per_step"]).items()},
    }


def _top(by_name: dict, cls: str, n: int | None) -> list[dict]:
    rows = sorted(((name, v) for (c, name), v in by_name.items() if c == cls), key=lambda kv: -kv[1][0])[:n]
    return [{"name": name, "ms_total": v[0] / 1e3, "count": int(v[1])} for name, v in rows]


def format_table(results: dict[str, dict]) -> str:
    """One row per class, one column pair (ms/step, share) per profiled variant."""
    names = list(results)
    lines = [f"{'class':<14}" + "".join(f"{n[:18]:>26}" for n in names),
             f"{'':<14}" + "".join(f"{'ms/step  kern/step  share':>26}" for _ in names)]
    for c in ORDER + ["copies", "total"]:
        cells = []
        for n in names:
            r = results[n]
            if c == "copies":
                cells.append(f"{r['copies']['ms_per_step']:>8.3f} {r['copies']['events_per_step']:>10.1f}{'':>7}")
            elif c == "total":
                cells.append(f"{r['gpu_ms_per_step']:>8.3f} {r['kernels_per_step']:>10.1f} {1:>6.0%}")
            else:
                x = r["classes"][c]
                cells.append(f"{x['ms_per_step']:>8.3f} {x['kernels_per_step']:>10.1f} {x['share']:>6.0%}")
        lines.append(f"{c:<14}" + "".join(f"{cell:>26}" for cell in cells))
    return "\n".join(lines)
