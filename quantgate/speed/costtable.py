"""The measured cost table: decode GPU ms per step for each GEMM of the model (grouped by layer group) in each
format at each profiled concurrency, plus the step's fixed cost — built from one decode profile per variant and
concurrency, never from one server per group.

Two ways in, one table each (``CostTable.attribution``):

- ``launch_order`` (:func:`build_cost_table`, from ``StepProfile``s): in a pure-decode step the GEMMs launch in
  the plan's decode order (``quantgate.speed.gemms``), so the step's k-th GEMM launch is the k-th decode GEMM —
  exact even where two groups have one shape (DeltaNet's out_proj and attention's o_proj are both 2560x4096 in
  the 4B class: their launches are told apart by position, not by shape). A profile whose GEMM launch count
  differs from its plan's is refused. The kernels between a GEMM and the one before it (the norm, activation or
  activation quantization that make its input) count to it, a split-K reduction to the GEMM it finishes, and
  what runs before the step's first GEMM or after its last (embedding, logits, sampling) is the fixed cost.
- ``weight_bytes`` (:func:`table_from_profile_json`, from the 2026-11-30 GPU sessions' profile.json,
  which kept GPU time per kernel name, not per launch): each format's GEMM time (split between formats by
  ``gemm_by_kernel`` when the variant has several) is spread over its GEMMs by parameters, and so is the
  variant's non-GEMM time against the BF16 profile's (the fixed cost). A model inside each measured total,
  stated as such; the LM head is the one GEMM name launched once per step when the list shows it.

A cell measured by several profiles (the BF16 LM head is in every variant's) holds their mean."""

from __future__ import annotations

import bisect
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from quantgate.errors import InputError
from quantgate.schema.speed import Cell, CostTable, FixedCost, StepProfile, TableGemm, TableSource
from quantgate.schema.variant import PlanRow
from quantgate.speed.gemms import DecodeGemm, decode_gemms
from quantgate.speed.trace import finishes_previous, is_gemm


@dataclass
class _Measured:
    """One profile's share for each of its GEMMs, in the format its plan gave that GEMM."""

    source: TableSource
    gemms: list[DecodeGemm]
    ms: list[float]
    gemm_ms: list[float]
    kernels: list[list[str]]
    fixed_ms: float | None  # None: this profile does not measure the fixed cost (weight_bytes, not BF16)
    notes: list[str] = field(default_factory=list)


def _count_error(p: StepProfile, found: list[str], gemms: list[DecodeGemm]) -> InputError:
    per_group: dict[str, int] = {}
    for g in gemms:
        kind = g.group.split(".")[-1]
        per_group[kind] = per_group.get(kind, 0) + 1
    seen: dict[str, int] = {}
    for n in found:
        seen[n] = seen.get(n, 0) + 1
    listed = "; ".join(f"{n[:70]} x{k}" for n, k in sorted(seen.items(), key=lambda kv: -kv[1])[:8])
    return InputError(f"{p.source}: {len(found)} GEMM launches in a decode step of {p.variant} (c={p.concurrency}), "
                      f"but its plan has {len(gemms)} decode GEMMs ({', '.join(f'{k} {v}' for k, v in per_group.items())}); "
                      f"the launches do not map onto the plan one to one. GEMM kernels per step: {listed}")


def launch_order_costs(p: StepProfile) -> _Measured:
    gemms = decode_gemms(p.plan, where=p.source)
    names = [p.names[s.name] for s in p.step]
    main = [k for k, s in enumerate(p.step) if is_gemm(names[k], s.cls)]
    if len(main) != len(gemms):
        raise _count_error(p, [names[k] for k in main], gemms)
    owner: list[int | None] = [None] * len(p.step)
    for j, k in enumerate(main):
        owner[k] = j
    last = None
    for k, s in enumerate(p.step):
        if owner[k] is not None:
            last = owner[k]
        elif finishes_previous(names[k], s.cls) and last is not None:
            owner[k] = last
        else:
            j = bisect.bisect_right(main, k)  # the first GEMM after this kernel
            if 0 < j < len(main):
                owner[k] = j
    ms, gemm_ms = [0.0] * len(gemms), [0.0] * len(gemms)
    fixed = p.outside_ms_per_step
    for k, s in enumerate(p.step):
        j = owner[k]
        if j is None:
            fixed += s.us / 1e3
            continue
        ms[j] += s.us / 1e3
        if s.cls == "gemm":
            gemm_ms[j] += s.us / 1e3
    src = TableSource(variant=p.variant, concurrency=p.concurrency, source=p.source,
                      formats=sorted({g.format for g in gemms}), gpu_ms_per_step=p.gpu_ms_per_step,
                      kernels_per_step=p.kernels_per_step)
    notes = [f"{p.variant}@{p.concurrency}: {p.dropped_steps} decode step(s) with another kernel sequence left out"] \
        if p.dropped_steps else []
    return _Measured(src, gemms, ms, gemm_ms, [[names[k]] for k in main], fixed, notes)


def build_cost_table(profiles: Sequence[StepProfile]) -> CostTable:
    """The ``launch_order`` table of ``profiles`` (one per variant and concurrency)."""
    return _table("launch_order", [launch_order_costs(p) for p in profiles])


# --- profile.json of the 2026-11-30 GPU sessions (GPU time per kernel name; lab/2026-11-30-h200-serving-options) ---

# vLLM 0.26's linear kernel classes (quantgate.serve.kernels' labels, as profile.json's gemm_by_kernel keys them)
# and the formats each serves; Inductor's fused Triton kernels prepare an activation-quantized GEMM's input.
KERNEL_FORMATS = {
    "cuBLAS (unquantized layers)": {"bf16"},
    "MacheteLinearKernel": {"w4a16", "w2a16"}, "MarlinLinearKernel": {"w4a16", "w2a16"},
    "MarlinNvFp4LinearKernel": {"nvfp4", "nvfp4a16"}, "CutlassNvFp4LinearKernel": {"nvfp4", "nvfp4a16"},
    "CutlassFP8ScaledMMLinearKernel": {"fp8", "fp8-static"}, "MarlinFP8ScaledMMLinearKernel": {"fp8", "fp8-static"},
    "CutlassFp8BlockScaledMMKernel": {"fp8", "fp8-static"},
    "Inductor Triton kernel (fused ops)": {"fp8", "fp8-static", "nvfp4"},
}


def _format_ms(entry: Mapping, gemms: list[DecodeGemm], head: DecodeGemm | None, head_ms: float, gemm_ms: float,
               where: str) -> dict[str, float]:
    """GEMM ms per step of each format, the LM head's (``head``, when the names showed it) left out."""
    fmts = {g.format for g in gemms if g is not head}
    if len(fmts) == 1:
        return {next(iter(fmts)): gemm_ms - head_ms}
    by_kernel = entry.get("gemm_by_kernel")
    if not by_kernel:
        raise InputError(f"{where}: its GEMMs are in {', '.join(sorted(fmts))} and it lists GPU time for "
                         "its heaviest GEMM names only (no gemm_by_kernel): how the GEMM time splits between the "
                         "formats is not in it; profile it again (kernel_classes.py writes gemm_by_kernel) or from "
                         "its trace (launch_order)")
    out = dict.fromkeys(fmts | ({head.format} if head else set()), 0.0)
    for label, t in by_kernel.items():
        fam = KERNEL_FORMATS.get(label, set()) & set(out)
        if len(fam) != 1:
            raise InputError(f"{where}: GEMM time of {label!r} ({t['ms_per_step']:.3f} ms/step) cannot be given to "
                             f"one of its formats ({', '.join(sorted(out))})")
        out[fam.pop()] += float(t["ms_per_step"])
    if head:
        out[head.format] -= head_ms
    return out


def profile_json_costs(entry: Mapping, plan: Sequence[PlanRow], *, variant: str, concurrency: int, source: str,
                       bf16_nongemm_ms: float) -> _Measured:
    where = f"{source} ({variant})"
    gemms = decode_gemms(plan, where=where)
    steps = int(entry["decode_steps"])
    gemm_ms = float(entry["classes"]["gemm"]["ms_per_step"])
    gpu_ms = float(entry["gpu_ms_per_step"])
    ms = dict.fromkeys((g.id for g in gemms), 0.0)
    # the LM head is the only linear layer run once per decode step: the GEMM name launched once per step is it
    rows = entry.get("gemm_names") or entry["top_by_class"]["gemm"]
    heads = [g for g in gemms if g.group == "lm_head"]
    once = [r for r in rows if int(r["count"]) == steps]
    head = heads[0] if len(heads) == 1 and len(once) == 1 else None
    head_ms = float(once[0]["ms_total"]) / steps if head else 0.0
    per_format = _format_ms(entry, gemms, head, head_ms, gemm_ms, where)
    if head:
        ms[head.id] = head_ms
    rest = [g for g in gemms if g is not head]
    for f, total in per_format.items():
        mine = [g for g in rest if g.format == f]
        params = sum(g.params for g in mine)
        if total < -1e-9 or (total > 1e-9 and not params):
            raise InputError(f"{where}: {total:.3f} ms/step of {f} GEMM time and {params} {f} parameters to give it to")
        for g in mine:
            ms[g.id] += total * g.params / params
    gemm_part = dict(ms)
    # the variant's non-GEMM time against BF16's: the change its quantized GEMMs bring (fused activation
    # quantization, fewer or more elementwise kernels), spread over them by parameters
    delta = (gpu_ms - gemm_ms) - bf16_nongemm_ms
    quant = [g for g in gemms if g.format != "bf16"]
    qparams = sum(g.params for g in quant)
    for g in quant:
        ms[g.id] += delta * g.params / qparams
    src = TableSource(variant=variant, concurrency=concurrency, source=source, formats=sorted({g.format for g in gemms}),
                      gpu_ms_per_step=gpu_ms, kernels_per_step=entry.get("kernels_per_step"))
    fixed = bf16_nongemm_ms + (0.0 if quant else delta)
    return _Measured(src, gemms, [ms[g.id] for g in gemms], [gemm_part[g.id] for g in gemms], [[] for _ in gemms],
                     fixed if not quant else None)


def table_from_profile_json(profiles: Mapping[str, Mapping], plans: Mapping[str, Sequence[PlanRow]], *,
                            source: str, concurrency: int = 1) -> CostTable:
    """The ``weight_bytes`` table of a profile.json (``{variant: entry}``; those sessions profiled one request:
    concurrency 1) with each variant's plan; one variant must be all-BF16 (its non-GEMM time is the fixed cost)."""
    missing = sorted(set(profiles) - set(plans))
    if missing:
        raise InputError(f"{source}: no plan given for variant(s) {', '.join(missing)}")
    bf16 = [v for v in profiles if {r.format for r in plans[v] if r.kind not in ("vision", "projector")} == {"bf16"}]
    if not bf16:
        raise InputError(f"{source}: no all-BF16 variant among {', '.join(profiles)}: the fixed cost of a step is "
                         "its non-GEMM time, which needs the BF16 profile")
    ref = profiles[bf16[0]]
    nongemm = float(ref["gpu_ms_per_step"]) - float(ref["classes"]["gemm"]["ms_per_step"])
    return _table("weight_bytes", [profile_json_costs(e, plans[v], variant=v, concurrency=concurrency, source=source,
                                                      bf16_nongemm_ms=nongemm) for v, e in profiles.items()])


# --- merging ------------------------------------------------------------------------------------------

def _table(attribution: str, measured: list[_Measured]) -> CostTable:
    if not measured:
        raise InputError("no profile to build a cost table from")
    ref = measured[0]
    order = [(g.id, g.modules) for g in ref.gemms]
    for m in measured[1:]:
        if [(g.id, g.modules) for g in m.gemms] != order:
            raise InputError(f"{m.source.source}: {m.source.variant}'s decode GEMMs are not {ref.source.variant}'s "
                             "(another model?): one cost table holds one model")
    seen = {(m.source.variant, m.source.concurrency) for m in measured}
    if len(seen) != len(measured):
        raise InputError("two profiles of one variant at one concurrency: give one each")
    cells: dict[tuple[str, str, int], list[tuple[float, float, list[str], str]]] = {}
    fixed: dict[int, dict[str, float]] = {}
    for m in measured:
        tag = f"{m.source.variant}@{m.source.concurrency}"
        for g, ms, gms, names in zip(m.gemms, m.ms, m.gemm_ms, m.kernels, strict=True):
            cells.setdefault((g.id, g.format, m.source.concurrency), []).append((ms, gms, names, tag))
        if m.fixed_ms is not None:
            fixed.setdefault(m.source.concurrency, {})[tag] = m.fixed_ms
    levels = sorted({m.source.concurrency for m in measured})
    lacking = [c for c in levels if c not in fixed]
    if lacking:
        raise InputError(f"no profile measures the fixed cost at concurrency {lacking[0]} (a BF16 profile there)")
    gemms = []
    for g in ref.gemms:
        per: dict[str, dict[int, Cell]] = {}
        for (gid, f, c), vals in sorted(cells.items(), key=lambda kv: (kv[0][1], kv[0][2])):
            if gid == g.id:
                per.setdefault(f, {})[c] = Cell(ms_per_step=sum(v[0] for v in vals) / len(vals),
                                                gemm_ms_per_step=sum(v[1] for v in vals) / len(vals),
                                                kernels=list(dict.fromkeys(n for v in vals for n in v[2])),
                                                sources=[v[3] for v in vals])
        gemms.append(TableGemm(id=g.id, group=g.group, modules=list(g.modules), params=g.params, cells=per))
    return CostTable(attribution=attribution, concurrency=levels, gemms=gemms,
                     fixed={c: FixedCost(ms_per_step=sum(v.values()) / len(v), by_source=v) for c, v in fixed.items()},
                     sources=[m.source for m in measured], notes=[n for m in measured for n in m.notes],
                     created_utc=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
