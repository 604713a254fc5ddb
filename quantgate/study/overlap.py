"""``servers: auto`` (the default): whether a study's servers can start together on the one GPU they inherit,
from what each needs in memory — computed before any work from the checkpoint, each recipe's plan and the
study's levels, and stated in the study's log — and the waves that follow from it.

When every variant's server fits beside the others (and beside the study's own quantize, which holds the source
weights on the GPU while the later variants are built), all start as their variants are written and compile
concurrently, then are measured one at a time with the others idle (``all_at_once``, one wave). When they do not,
the first wave takes the variants that fit in study order and the rest queue for later waves. Without a GPU to
measure, or with a backend that cannot share one (no memory option), the servers go one at a time.

A server's memory: its weights (the recipe's plan estimate, ``quantize.plan``), its KV cache (vLLM's
``--kv-cache-memory-bytes`` when given, else the attention layers' K and V for the highest level's concurrency
at ``max_model_len`` tokens, plus the linear-attention layers' recurrent state per sequence) and a fixed
allowance for what else vLLM holds (CUDA context, activations, CUDA graphs, the vision encoder's cache). Each
server is then started with that share of the GPU as its ``gpu_memory_utilization`` unless the study sets one."""

from __future__ import annotations

import math
import re
from pathlib import Path

from quantgate.schema.base import Record
from quantgate.schema.load import load_json

GIB = 1 << 30
# what a vLLM server holds besides weights and KV cache: CUDA context (~0.5 GiB), the profiling run's
# activations for max_num_batched_tokens, CUDA graphs and the multimodal encoder cache (an allowance, not measured
# per model: the plan says so)
SERVER_ALLOWANCE = 4 * GIB
HEADROOM = 0.95  # of the GPU's memory the plan fills at most (fragmentation, the driver's own reservations)
_KV_ARG = re.compile(r"^--kv-cache-memory-bytes(?:=(\d+))?$")


class ServerMemory(Record):
    variant: str
    weights_bytes: int
    kv_bytes: int
    kv_source: str  # "--kv-cache-memory-bytes", or what the estimate assumed
    allowance_bytes: int
    total_bytes: int
    fraction: float  # of the GPU: what the server is started with (gpu_memory_utilization) unless the study sets one


class OverlapPlan(Record):
    schema_version: int = 1
    gpu_bytes: int | None  # the GPU the servers inherit; None: not known (no GPU visible to the study)
    quantize_reserve_bytes: int  # the study's quantize beside the first wave: the source weights on the GPU
    servers: list[ServerMemory]
    waves: list[list[str]]
    mode: str  # "all_at_once" (the servers overlap, in one wave or more) or "one_at_a_time"
    reason: str

    def lines(self) -> list[str]:
        """The plan as the study's log states it."""
        gb = lambda b: f"{b / GIB:.1f} GiB"  # noqa: E731
        out = [f"servers: {self.mode} — {self.reason}"]
        for s in self.servers:
            out.append(f"servers: {s.variant}: weights {gb(s.weights_bytes)} + KV {gb(s.kv_bytes)} ({s.kv_source}) + "
                       f"{gb(s.allowance_bytes)} allowance = {gb(s.total_bytes)}, {s.fraction:.2f} of the GPU")
        return out


def gpu_memory_bytes() -> int | None:
    """Total memory of the first GPU this process sees (the one the servers inherit), or None without one."""
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    return int(torch.cuda.get_device_properties(0).total_memory)


def kv_bytes(model_dir: Path, extra_args: list[str], max_model_len: int | None, max_seqs: int) -> tuple[int, str]:
    """A server's KV cache: ``--kv-cache-memory-bytes`` when its arguments give it, else an estimate from the
    model's text config (bf16 K and V of every full-attention layer for ``max_seqs`` sequences of
    ``max_model_len`` tokens, or 8,192 when unset, plus each linear-attention layer's fp32 recurrent state)."""
    for i, a in enumerate(extra_args):
        m = _KV_ARG.match(str(a))
        if m:
            val = m.group(1) or (extra_args[i + 1] if i + 1 < len(extra_args) else "")
            if str(val).isdigit():
                return int(val), "--kv-cache-memory-bytes"
    cfg = load_json(Path(model_dir) / "config.json", "model config")  # a downloaded model's file: the loader's limits
    t = cfg.get("text_config", cfg)
    n = int(t.get("num_hidden_layers", 0))
    types = t.get("layer_types") or ["full_attention"] * n
    full = sum(1 for x in types if x == "full_attention")
    linear = sum(1 for x in types if x == "linear_attention")
    head_dim = int(t.get("head_dim") or t.get("hidden_size", 0) // max(int(t.get("num_attention_heads", 1)), 1))
    kv_heads = int(t.get("num_key_value_heads") or t.get("num_attention_heads", 1))
    tokens = (max_model_len or 8192) * max_seqs
    per_token = 2 * full * kv_heads * head_dim * 2
    state = linear * int(t.get("linear_num_value_heads", 0)) * int(t.get("linear_key_head_dim", 0)) * \
        int(t.get("linear_value_head_dim", 0)) * 4
    return per_token * tokens + state * max_seqs, f"estimate: {max_seqs} sequences x {max_model_len or 8192} tokens"


def plan_overlap(st, model_dir: Path, gpu_bytes: int | None, backends: dict) -> OverlapPlan:
    """The memory plan of a study's servers on one GPU of ``gpu_bytes`` (see the module's docstring);
    ``backends``: each variant's backend options, the study's with its own overrides (``placement.variant_backend``)."""
    from quantgate.quantize.plan import make_plan, model_modules
    from quantgate.recipes import load_recipe

    servers: list[ServerMemory] = []
    modules = model_modules(model_dir)
    source = None
    max_seqs = max([*st.concurrency, *((st.speed.levels or []) if st.speed else [])])
    shareable = True
    for v in st.variants:
        spec = backends[v.name]
        if "gpu_memory_utilization" not in type(spec).model_fields:
            shareable = False
        plan = make_plan(model_dir, load_recipe(v.recipe), modules=modules)
        totals = plan.totals()
        source = totals["bf16_bytes"]
        w = int(totals["estimated_bytes"])
        kv, why = kv_bytes(model_dir, [*getattr(spec, "extra_args", []), *v.server_args],
                           getattr(spec, "max_model_len", None), max_seqs)
        total = w + kv + SERVER_ALLOWANCE
        frac = getattr(spec, "gpu_memory_utilization", None) or \
            (math.ceil(100 * total / gpu_bytes) / 100 if gpu_bytes else 0.0)
        servers.append(ServerMemory(variant=v.name, weights_bytes=w, kv_bytes=kv, kv_source=why,
                                    allowance_bytes=SERVER_ALLOWANCE, total_bytes=total, fraction=min(frac, 1.0)))
    reserve = int(source or 0)
    names = [s.variant for s in servers]
    if not shareable or gpu_bytes is None:
        why = "no GPU visible to measure" if gpu_bytes is None else f"backend {st.backend.name} cannot share a GPU"
        return OverlapPlan(gpu_bytes=gpu_bytes, quantize_reserve_bytes=reserve, servers=servers,
                           waves=[[n] for n in names], mode="one_at_a_time", reason=why)
    budget = HEADROOM * gpu_bytes
    waves: list[list[str]] = []
    used = float(reserve)  # the first wave starts beside the quantizations
    for s in servers:
        need = max(s.total_bytes, s.fraction * gpu_bytes)
        if waves and used + need <= budget:
            waves[-1].append(s.variant)
            used += need
        else:
            waves.append([s.variant])
            used = (reserve if not waves[:-1] else 0.0) + need
    total = sum(max(s.total_bytes, s.fraction * gpu_bytes) for s in servers) + reserve
    gib = f"{total / GIB:.1f} GiB of {gpu_bytes / GIB:.1f} GiB (quantize's {reserve / GIB:.1f} GiB included)"
    if len(waves) == 1:
        reason = f"all {len(names)} servers fit on the GPU together: {gib}"
    elif all(len(w) == 1 for w in waves):
        return OverlapPlan(gpu_bytes=gpu_bytes, quantize_reserve_bytes=reserve, servers=servers, waves=waves,
                           mode="one_at_a_time", reason=f"no two servers fit on the GPU together: {gib}")
    else:
        reason = f"{gib} do not fit at once: {len(waves)} waves ({' | '.join(', '.join(w) for w in waves)})"
    return OverlapPlan(gpu_bytes=gpu_bytes, quantize_reserve_bytes=reserve, servers=servers, waves=waves,
                       mode="all_at_once", reason=reason)
