"""``quantgate recommend``: one format per group (BF16 allowed) that minimises the summed damage
under a size, bits-per-weight or speed budget (modelled from weight bytes, or predicted from a measured
cost table, ``quantgate.speed``) — an exact 0/1 program solved by
scipy's ``milp`` (HiGHS) — written as an ordinary quantgate recipe with the reasons beside it.

The damage model is additive: the recipe's damage is predicted as the sum of each group's KL
measured alone. Whether that holds on pages is what a study (and ``tune``) checks."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from quantgate.errors import InputError, UsageError
from quantgate.schema.sensitivity import SensitivityFile
from quantgate.sensitivity.budget import human

if TYPE_CHECKING:
    from quantgate.schema.speed import CostTable
    from quantgate.speed.served import PrefillTable

TARGETS = ("hopper", "blackwell", "ampere", "none")


def kernel_notes(fmt: str, target: str) -> tuple[str, str] | None:
    """(level, text) about how vLLM 0.26 serves ``fmt`` on ``target``; "warn" when it cannot."""
    if target == "none":
        return None
    if fmt == "w2a16":
        return ("warn", "w2a16 (INT2 weights, groups of 128): among vLLM 0.26's CUDA mixed-precision kernels only "
                "HummingLinearKernel takes 2-bit weights — Marlin, Machete, Exllama, Conch and Triton-W4A16 list 4- and "
                "8-bit types only (read from the vLLM 0.26 source) — and it needs the humming-kernels package, which "
                "quantgate's H200 install does not carry; serving INT2 in vLLM was not measured")
    if fmt == "nvfp4" and target == "hopper":
        return ("note", "nvfp4 on Hopper: vLLM 0.26 runs it weight-only (MarlinNvFp4LinearKernel, measured on the H200, "
                "docs/gpu.md) while the damage here emulates W4A4 as llmcompressor does; which is larger was not measured")
    if fmt in ("nvfp4", "nvfp4a16") and target == "ampere":
        return ("note", f"{fmt} on Ampere: no FP4 tensor cores; vLLM 0.26's kernel choice there was not measured")
    if fmt in ("fp8", "fp8-static") and target == "ampere":
        return ("note", f"{fmt} on Ampere (compute capability < 8.9): vLLM 0.26 loads compressed-tensors FP8 as "
                "weight-only W8A16 (CompressedTensorsW8A16Fp8, from the source; not measured)")
    return None


@dataclass
class Choice:
    group: str
    kind: str
    format: str
    kl: float
    bytes: int
    bf16_bytes: int
    options: dict[str, tuple[float, int]]  # format -> (kl, bytes), bf16 included
    why: str = ""


@dataclass(frozen=True)
class TableSpeed:
    """The chosen recipe's decode step by a measured cost table (``--speed-table``), at one concurrency."""

    source: str  # the table file
    concurrency: int
    ms_per_step: float
    bf16_ms_per_step: float
    # with a prefill table (``--prefill-table``): the served speed-up, the waves' prefill phase included
    served_speedup: float | None = None
    prefill_source: str | None = None


@dataclass
class Recommendation:
    mode: str
    limit: float
    choices: list[Choice]
    total_bytes: int
    bf16_bytes: int
    min_bytes: int
    predicted_kl: float  # the groups' KL summed, plus the baseline when anything is quantized
    baseline_kl: float
    effective_bits: float
    decode_bytes: int
    bf16_decode_bytes: int
    bandwidth_gbps: float
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    speed: TableSpeed | None = None  # with a measured cost table; None: the weight-bytes model

    @property
    def modelled_speedup(self) -> float:
        if self.speed:
            return self.speed.served_speedup or self.speed.bf16_ms_per_step / self.speed.ms_per_step
        return self.bf16_decode_bytes / self.decode_bytes if self.decode_bytes else float("inf")

    @property
    def modelled_decode_ms(self) -> float:
        """ms per decode step: GPU time by the cost table, or the weights' read time at the bandwidth."""
        if self.speed:
            return self.speed.ms_per_step
        return self.decode_bytes / (self.bandwidth_gbps * 1e9) * 1e3

    @property
    def speed_basis(self) -> str:
        """Where ``modelled_speedup`` comes from, said in the recipe, the terminal and the tune report."""
        if self.speed and self.speed.served_speedup:
            return (f"predicted served speed-up at concurrency {self.speed.concurrency}: the decode step from the "
                    f"measured cost table {self.speed.source} (BF16 {self.speed.bf16_ms_per_step:.3f} ms, this recipe "
                    f"{self.speed.ms_per_step:.3f} ms) and the prefill phase from {self.speed.prefill_source} "
                    "(quantgate.speed.served)")
        if self.speed:
            # decode only: on ~4k-token pages at c=32 the prefill half of a served wave ran 0.59-0.71x BF16's speed
            # in NVFP4 recipes on the H200, which no decode table sees: give a prefill table (--prefill-table)
            return (f"predicted from the measured cost table {self.speed.source} at concurrency {self.speed.concurrency} "
                    f"(GPU time per decode step, prefill not included; BF16 {self.speed.bf16_ms_per_step:.3f} ms)")
        return f"modelled from weight bytes at {self.bandwidth_gbps:g} GB/s, not measured"

    @property
    def assignment(self) -> dict[str, str]:
        return {c.group: c.format for c in self.choices}

    def summary(self) -> dict:
        return {"mode": self.mode, "limit": self.limit, "total_bytes": self.total_bytes, "bf16_bytes": self.bf16_bytes,
                "min_bytes": self.min_bytes, "predicted_kl_sum": self.predicted_kl, "baseline_kl": self.baseline_kl,
                "effective_bits": self.effective_bits,
                "modelled_decode_ms_per_token": self.modelled_decode_ms, "modelled_speedup": self.modelled_speedup,
                "speedup_basis": self.speed_basis,
                "assignment": self.assignment, "warnings": self.warnings,
                "groups": [{"group": c.group, "format": c.format, "kl": c.kl, "bytes": c.bytes, "why": c.why}
                           for c in self.choices]}


def _options(sens: SensitivityFile, formats: list[str],
             exclude: dict[str, set[str]]) -> list[dict[str, tuple[float, int]]]:
    table = sens.table()
    out = []
    for g in sens.groups:
        opts = {"bf16": (0.0, g.bf16_bytes)}
        for f in formats:
            if f in exclude.get(g.name, ()):
                continue
            m = table[(g.name, f)]
            opts[f] = (m.kl_mean, m.bytes)
        out.append(opts)
    return out


def _solve(kl: list[list[float]], cost: list[list[float]], limit: float) -> list[int] | None:
    """Pick one option per group: minimise summed kl with summed cost ≤ limit; among optimal
    picks, the cheapest (a second program with the damage held at its optimum)."""
    import numpy as np
    from scipy.optimize import Bounds, LinearConstraint, milp

    sizes = [len(r) for r in kl]
    n = sum(sizes)
    c_kl = np.concatenate([np.asarray(r, float) for r in kl])
    c_cost = np.concatenate([np.asarray(r, float) for r in cost])
    # KL values of 1e-7 sit at HiGHS's default tolerances: scale both rows to order 1, and ask
    # for a proven optimum (no relative MIP gap)
    k_scale = c_kl.max() if c_kl.max() > 0 else 1.0
    b_scale = max(c_cost.max(), 1.0)
    c_kl, c_cost, limit = c_kl / k_scale, c_cost / b_scale, limit / b_scale
    one = np.zeros((len(kl), n))
    start = 0
    for g, k in enumerate(sizes):
        one[g, start:start + k] = 1
        start += k
    base = [LinearConstraint(one, 1, 1), LinearConstraint(c_cost[None, :], -np.inf, limit)]
    kw = {"integrality": np.ones(n), "bounds": Bounds(0, 1), "options": {"mip_rel_gap": 0.0}}
    r = milp(c_kl, constraints=base, **kw)
    if not r.success:
        return None
    best = float(c_kl @ np.round(r.x))
    r2 = milp(c_cost, constraints=base + [LinearConstraint(c_kl[None, :], -np.inf, best + 1e-9)], **kw)
    x = np.round((r2 if r2.success else r).x)
    picks, start = [], 0
    for k in sizes:
        picks.append(int(np.argmax(x[start:start + k])))
        start += k
    return picks


def recommend(sens: SensitivityFile, *, budget_bytes: int | None = None, effective_bits: float | None = None,
              speedup: float | None = None, formats: list[str] | None = None, target: str = "hopper",
              exclude: dict[str, list[str]] | None = None, speed_table: CostTable | None = None,
              speed_table_source: str = "", speed_concurrency: int | None = None,
              prefill_table: PrefillTable | None = None, prefill_table_source: str = "") -> Recommendation:
    """The least summed damage under one budget. ``exclude`` forbids formats per group (BF16 is
    always allowed): how a tuning loop promotes a group that hurt more than predicted. ``speed_table``:
    a measured cost table (``quantgate.speed``): ``--speedup`` is then its predicted GPU time per decode step
    at ``speed_concurrency`` (default its lowest), and the chosen recipe's speed-up is predicted from it;
    ``prefill_table`` (``quantgate.speed.served``): both are then the served speed-up, the waves' prefill included."""
    if sum(x is not None for x in (budget_bytes, effective_bits, speedup)) != 1:
        raise InputError("give exactly one of --budget, --effective-bits, --speedup")
    if target not in TARGETS:
        raise UsageError(f"--target {target!r}: choose from {', '.join(TARGETS)}")
    formats = formats or list(sens.formats)
    unknown = [f for f in formats if f not in sens.formats]
    if unknown:
        raise UsageError(f"--formats: {', '.join(unknown)} not measured in this sensitivity file "
                         f"(it has {', '.join(sens.formats)}); rerun `quantgate sensitivity` with them")
    groups = sens.groups
    exclude = {g: set(fs) - {"bf16"} for g, fs in (exclude or {}).items()}
    unknown_groups = sorted(set(exclude) - {g.name for g in groups})
    if unknown_groups:
        raise InputError(f"exclude: no group {unknown_groups[0]!r} in this sensitivity file")
    opts = _options(sens, formats, exclude)
    names = [list(o) for o in opts]
    kl = [[o[f][0] for f in o] for o in opts]
    nbytes = [[o[f][1] for f in o] for o in opts]
    params = sum(g.params for g in groups)
    fixed, fixed_dec = sens.sizes.fixed_bytes, sens.sizes.fixed_decode_bytes
    bf16_total = fixed + sum(g.bf16_bytes for g in groups)
    min_total = fixed + sum(min(b) for b in nbytes)
    dec = [[b if g.decode else 0 for b in row] for g, row in zip(groups, nbytes, strict=True)]
    bf16_dec = fixed_dec + sum(g.bf16_bytes for g in groups if g.decode)
    min_dec = fixed_dec + sum(min(r) for r in dec)
    smallest = f"every group in its smallest measured format ({', '.join(formats)}), the rest ({human(fixed)}) as it is"
    if budget_bytes is not None:
        mode, limit, cost, budget = "budget", budget_bytes - fixed, nbytes, budget_bytes
        if budget_bytes < min_total:
            raise UsageError(f"--budget {human(budget_bytes)} is below the smallest recipe these formats allow, "
                             f"{human(min_total)} ({smallest}); BF16 is {human(bf16_total)}")
        if budget_bytes >= bf16_total:
            raise UsageError(f"--budget {human(budget_bytes)} is at or above the BF16 size {human(bf16_total)}: "
                             f"nothing needs quantizing (the smallest recipe is {human(min_total)})")
    elif effective_bits is not None:
        mode, budget = "effective_bits", effective_bits
        cost = [[b * 8 for b in row] for row in nbytes]
        limit = effective_bits * params
        lo = sum(min(r) for r in cost) / params
        if effective_bits < lo:
            raise UsageError(f"--effective-bits {effective_bits} is below the smallest these formats allow, {lo:.3f} "
                             f"bits per quantizable weight, scales included (BF16 is 16)")
        if effective_bits >= 16:
            raise UsageError(f"--effective-bits {effective_bits} is at or above BF16's 16: nothing needs quantizing "
                             f"(the smallest is {lo:.3f})")
    elif speed_table is not None:
        mode, budget = "speedup", speedup
        table = _table_costs(speed_table, groups, formats, speed_concurrency, speed_table_source, prefill_table)
        cost = [[table.cost[(g.name, f)] for f in row] for g, row in zip(groups, names, strict=True)]
        fastest = table.fixed_ms + sum(min(r) for r in cost)
        unit = "seconds per served wave" if prefill_table is not None else "GPU ms per decode step"
        top = table.bf16_ms / fastest
        if speedup <= 1 or speedup > top:
            raise UsageError(f"--speedup {speedup}: {'must be above 1 (BF16 is 1.0); ' if speedup <= 1 else ''}"
                             f"at most {top:.2f}x is predicted with these formats by {speed_table_source} at "
                             f"concurrency {table.concurrency} ({unit}: BF16 {table.bf16_ms:.3f}, "
                             f"fastest {fastest:.3f})")
        limit = table.bf16_ms / speedup - table.fixed_ms
    else:
        mode, budget = "speedup", speedup
        if speedup <= 1:
            raise UsageError(f"--speedup {speedup}: must be above 1 (BF16 is 1.0; at most {bf16_dec / min_dec:.2f}× "
                             "is modelled with these formats)")
        if bf16_dec / speedup < min_dec:
            raise UsageError(f"--speedup {speedup}: above the {bf16_dec / min_dec:.2f}× these formats can reach in the "
                             f"decode-time model (weights read per token: BF16 {human(bf16_dec)}, smallest "
                             f"{human(min_dec)}; BF16 is 1.0×)")
        cost, limit = dec, bf16_dec / speedup - fixed_dec
    picks = _solve(kl, cost, limit)
    if picks is None:  # the bounds above make this unreachable unless the solver fails
        raise InputError(f"no recipe meets {mode} {budget}; the solver found no feasible choice")
    choices = []
    for i, (g, o, p) in enumerate(zip(groups, opts, picks, strict=True)):
        f = names[i][p]
        choices.append(Choice(group=g.name, kind=g.kind, format=f, kl=o[f][0], bytes=o[f][1], bf16_bytes=g.bf16_bytes,
                              options=o))
    for c in choices:
        c.why = _why(c)
    total = fixed + sum(c.bytes for c in choices)
    decode = fixed_dec + sum(c.bytes for c, g in zip(choices, groups, strict=True) if g.decode)
    quantized = any(c.format != "bf16" for c in choices)
    base = sens.baseline.kl_mean if sens.baseline and quantized else 0.0
    rec = Recommendation(mode=mode, limit=budget, choices=choices, total_bytes=total, bf16_bytes=bf16_total,
                         min_bytes=min_total, predicted_kl=sum(c.kl for c in choices) + base, baseline_kl=base,
                         effective_bits=sum(c.bytes for c in choices) * 8 / params, decode_bytes=decode,
                         bf16_decode_bytes=bf16_dec, bandwidth_gbps=sens.bandwidth_gbps)
    if speed_table is not None:
        t = _table_costs(speed_table, groups, sorted({c.format for c in choices} - {"bf16"}), speed_concurrency,
                         speed_table_source)
        rec.speed = TableSpeed(source=speed_table_source, concurrency=t.concurrency, bf16_ms_per_step=t.bf16_ms,
                               ms_per_step=t.fixed_ms + sum(t.cost[(c.group, c.format)] for c in choices))
        if prefill_table is not None:
            w = _table_costs(speed_table, groups, sorted({c.format for c in choices} - {"bf16"}), speed_concurrency,
                             speed_table_source, prefill_table)
            rec.speed = dataclasses.replace(rec.speed, prefill_source=prefill_table_source or prefill_table.source,
                                            served_speedup=w.bf16_ms / (w.fixed_ms + sum(w.cost[(c.group, c.format)]
                                                                                         for c in choices)))
    for f in sorted({c.format for c in choices} - {"bf16"}):
        note = kernel_notes(f, target)
        if note:
            (rec.warnings if note[0] == "warn" else rec.notes).append(note[1])
    return rec


def _table_costs(table: CostTable, groups, formats: list[str], concurrency: int | None, source: str,
                 prefill: PrefillTable | None = None):
    """The solver's rows: GPU ms per decode step, or with ``prefill`` seconds per served wave."""
    from quantgate.speed.predict import group_costs
    from quantgate.speed.served import served_group_costs

    c = concurrency if concurrency is not None else min(table.concurrency)
    if prefill is not None:
        return served_group_costs(table, prefill, groups, formats, c, where=source or "speed table")
    return group_costs(table, groups, formats, c, where=source or "speed table")


def _why(c: Choice) -> str:
    kl, b = c.options[c.format]
    saved = c.bf16_bytes - b
    head = "BF16 (no saving)" if c.format == "bf16" else f"saves {human(saved)} at KL {kl:.2e}"
    smaller = [(f, k, x) for f, (k, x) in c.options.items() if x < b]
    larger = [(f, k, x) for f, (k, x) in c.options.items() if x > b and k < kl]
    parts = [head]
    if smaller:
        f, k, x = min(smaller, key=lambda t: t[1])
        parts.append(f"{f} would save {human(b - x)} more for KL +{k - kl:.2e}")
    else:
        parts.append("smallest format measured")
    if larger:
        f, k, x = min(larger, key=lambda t: t[2])
        parts.append(f"{f} would cut KL by {kl - k:.2e} for {human(x - b)} more")
    return "; ".join(parts)
