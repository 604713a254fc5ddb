"""The engine settings table printed next to the speed table, and the note a study gets when its
variants ran under different settings (then a speed ratio compares settings as well as formats)."""

from __future__ import annotations

from quantgate.schema.run import EngineSettings, KernelCounts
from quantgate.schema.summary import Summary

# (field, column title); a column is shown when any variant states a value for it.
COLUMNS = [("compilation", "compilation"), ("cudagraph_mode", "CUDA graphs"), ("cudagraph_capture_sizes", "capture sizes"),
           ("prefix_caching", "prefix cache"), ("max_num_batched_tokens", "max batched tokens"),
           ("max_num_seqs", "max seqs"), ("kv_cache_dtype", "KV cache"), ("speculative", "speculative"),
           ("async_scheduling", "async scheduling"), ("attention_backend", "attention"), ("dtype", "dtype"),
           ("device", "device"), ("continuous_batching", "continuous batching"), ("env", "environment"),
           ("start_s", "start")]  # the start: seconds to healthy, compile cache hit or miss
# Settings that change speed (or numerics) once the server runs; where it keeps its caches and how long it
# took to start do not, so they never make variants "differ".
# cudagraph_mode_effective is folded into the cudagraph_mode cell.
COMPARED = ["compilation", "cudagraph_mode", "cudagraph_mode_effective", "cudagraph_capture_sizes", "enforce_eager",
            "prefix_caching", "max_num_batched_tokens", "max_num_seqs", "kv_cache_dtype", "speculative",
            "async_scheduling", "attention_backend", "dtype", "device", "continuous_batching"]
CACHE_ENV = {"VLLM_CACHE_ROOT", "TRITON_CACHE_DIR"}
START_WORDS = {"cold": "cold cache", "warm": "warm cache", "uncached": "cache off", "none": "not compiled"}


def _cell(e: EngineSettings, field: str) -> str:
    v = getattr(e, field)
    if field == "cudagraph_mode" and v is not None and e.cudagraph_mode_effective:
        return f"{v} → {e.cudagraph_mode_effective}"
    if field == "cudagraph_capture_sizes" and v is not None:
        return f"{len(v)} ({v[0]}–{v[-1]})" if v else "none"
    if field == "env":
        return ", ".join(f"{k}={x}" for k, x in sorted(v.items()) if k not in CACHE_ENV) or "–"
    if field == "start_s":
        waits = [f"{w:.0f} s {short}" for w, _, short in _long_waits(e)]
        detail = ", ".join(p for p in (START_WORDS.get(e.compile_start or ""),
                                       e.compile_s is not None and f"compile {e.compile_s:.0f} s", *waits) if p)
        head = f"{v:.0f} s" if v is not None else ""
        return (f"{head} ({detail})" if head and detail else head or detail) or "–"
    if isinstance(v, bool):
        return "on" if v else "off"
    return "–" if v is None else str(v)


def kernels_text(kernels: KernelCounts) -> str:
    """``scheme: kernel, kernel; scheme: kernel`` — every kernel vLLM logged for each scheme (×n when more than
    one process logged it)."""
    def one(k: str, n: int | None) -> str:
        return f"{k} (the last one logged: run.json 1 kept no other)" if n is None else f"{k} ×{n}" if n > 1 else k

    return "; ".join(f"{s}: " + ", ".join(one(k, n) for k, n in per.items()) for s, per in kernels.items()) or "–"


def engine_table(r: Summary) -> tuple[list[str], list[list[str]]]:
    """(column titles, one row per variant that recorded settings); empty when none did. The linear kernels
    vLLM chose come last, so two runs that differ only in kernels (one with Machete disabled) differ here."""
    engines = [(v.name, v.engine, v.kernels) for v in r.variants if v.engine is not None]
    if not engines:
        return [], []
    cols = [(f, t) for f, t in COLUMNS
            if any(_cell(e, f) != "–" for _, e, _ in engines)]
    with_kernels = any(k for _, _, k in engines)
    head = ["variant"] + [t for _, t in cols] + (["linear kernels"] if with_kernels else [])
    return head, [[name] + [_cell(e, f) for f, _ in cols] + ([kernels_text(k)] if with_kernels else [])
                  for name, e, k in engines]


def engine_differences(r: Summary) -> list[str]:
    """One note naming each setting that differs between variants, with each variant's value."""
    engines = [(v.name, v.engine) for v in r.variants if v.engine is not None]
    if len(engines) < 2:
        return []
    diffs = []
    for f in COMPARED:
        vals = {name: getattr(e, f) for name, e in engines}
        if len({repr(x) for x in vals.values()}) > 1:
            diffs.append(f"{f} (" + "; ".join(f"{n}: {_value(x)}" for n, x in vals.items()) + ")")
    env_keys = sorted({k for _, e in engines for k in e.env} - CACHE_ENV)
    for k in env_keys:
        vals = {name: e.env.get(k) for name, e in engines}
        if len(set(vals.values())) > 1:
            diffs.append(f"{k} (" + "; ".join(f"{n}: {x if x is not None else 'unset'}" for n, x in vals.items()) + ")")
    if not diffs:
        return []
    return ["The variants ran under different engine settings, so their speed ratios compare settings as well as "
            "formats: " + ", ".join(diffs)]


# A wait this long after vLLM's profiling run is not the format's (the committed starts with FlashInfer's sampling
# module built spent 1-10 s there; the four starts that built it, 122 s: lab/2026-12-03-h200-seven-variant-study/plan.md)
LONG_PROFILE_WAIT_S = 30.0


def start_waits(r: Summary) -> list[str]:
    """One note per variant whose vLLM start waited long around its KV cache (between its profiling run and the
    KV cache, or between the KV cache and the end of its warm-up), so a reader does not take that start time for a
    cost of the format."""
    return [f"{v.name}: vLLM waited {w:.0f} s {where} (on a fresh machine the first sampler call builds FlashInfer's "
            "sampling module there, once per machine: docs/gpu.md); that part of its start is the machine's, not the "
            "format's" for v in r.variants if v.engine is not None for w, where, _ in _long_waits(v.engine)]


def _long_waits(e: EngineSettings) -> list[tuple[float, str, str]]:
    """(seconds, where in the start, the engine table's words) for each long wait of one start."""
    spans = ((e.profile_wait_s, "between its profiling run and its KV cache", "after profiling"),
             (e.warmup_wait_s, "between its KV cache and the end of its warm-up", "warming up"))
    return [(w, where, short) for w, where, short in spans if w is not None and w >= LONG_PROFILE_WAIT_S]


def engine_notes(r: Summary) -> list[str]:
    """The notes under the engine table: settings that differ between variants, then long start waits."""
    return engine_differences(r) + start_waits(r)


def _value(x) -> str:
    if isinstance(x, list):
        return f"{len(x)} sizes" if x else "none"
    return "–" if x is None else str(x)
