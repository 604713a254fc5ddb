"""The served speed-up of a recipe, prefill included: the decode table's step (``speed.predict``) for the part of a
wave after every request has its first token, and a prefill term for the part before it.

Why: at concurrency 32 on ~4k-token pages half of a wave is prefill (the vision encoder, then 32 × 4k prompt
tokens through every projection), and a format's prefill speed is not its decode speed — on Hopper NVFP4 runs
weight-only through Marlin, whose dequantizing GEMMs are slower than BF16 cuBLAS at prefill's large batch, while
decode reads fewer bytes. A decode-only table therefore ranks NVFP4 recipes wrongly at the concurrency teams serve.

The prefill term is measured from the speed waves' first-token phase (``wave_phases``: per wave, the time until the
last request has its first token; at c=1, each request's time to first token) of the recipes the table is built
from, per concurrency level: a recipe's prefill time relative to BF16's is ``1 + Σ_f slope_f × share_f``, where
``share_f`` is the fraction of the decoder projections' parameters the recipe runs in format ``f`` (prefill GEMM
time grows with parameters × tokens) and ``slope_f`` is fitted (least squares) on those recipes — an all-FP8 and an
all-NVFP4 recipe give each format's slope exactly. The served speed-up is then BF16's wave time over the recipe's:
``(P_bf16 + D_bf16) / (P_bf16 × prefill_ratio + D_bf16 × step_ratio)``."""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from quantgate.errors import InputError
from quantgate.schema.base import Record
from quantgate.schema.run import RequestRecord
from quantgate.schema.variant import PlanRow
from quantgate.speed.predict import GroupCosts, Prediction, group_costs

if TYPE_CHECKING:
    from quantgate.schema.speed import CostTable

PREFILL_TABLE_VERSION = 1


class WavePhases(Record):
    """Mean seconds per wave before every request has its first token (``prefill_s``: prefill, the vision encoder,
    queueing) and after (``decode_s``); at c=1 (requests one after another) each request split at its first token."""

    concurrency: int
    prefill_s: float
    decode_s: float
    waves: int


class PrefillLevel(Record):
    concurrency: int
    bf16_prefill_s: float
    bf16_decode_s: float
    slope: dict[str, float]  # format -> prefill time added per unit share of the projections' parameters


class PrefillTable(Record):
    schema_version: Literal[1] = PREFILL_TABLE_VERSION
    kind: Literal["quantgate.prefill_table"] = "quantgate.prefill_table"
    built_from: list[str]
    levels: dict[int, PrefillLevel]
    plan_params: int  # parameters of the decode modules the shares are fractions of
    source: str


class ServedPrediction(Record):
    concurrency: int
    speedup: float  # served output tok/s relative to BF16's
    prefill_ratio: float  # the recipe's prefill time over BF16's
    step_ratio: float  # the recipe's decode step over BF16's (the decode table)


def wave_phases(records: Iterable[RequestRecord], concurrency: int) -> WavePhases | None:
    """The split of a level's speed waves (``speed.jsonl`` records) at the first token; None without a whole wave."""
    waves: dict[int, list[RequestRecord]] = {}
    for r in records:
        if r.concurrency == concurrency and r.error is None and r.wave is not None and r.ttft_s is not None \
                and r.latency_s is not None:
            waves.setdefault(r.wave, []).append(r)
    if not waves:
        return None
    pre, dec = [], []
    for rs in waves.values():
        t0 = min(r.start for r in rs)
        if concurrency > 1:  # sent together: the batch decodes alone once the last request has its first token
            first = max(r.start + r.ttft_s for r in rs)  # type: ignore[operator]
            pre.append(first - t0)
            dec.append(max(r.end for r in rs) - first)
        else:
            pre.append(sum(r.ttft_s for r in rs))  # type: ignore[misc]
            dec.append(sum(r.latency_s - r.ttft_s for r in rs))  # type: ignore[operator]
    return WavePhases(concurrency=concurrency, prefill_s=statistics.mean(pre), decode_s=statistics.mean(dec),
                      waves=len(waves))


def format_shares(plan: Sequence[PlanRow]) -> dict[str, float]:
    """Each non-BF16 format's share of the decoder projections' parameters (the LM head and anything kept BF16
    count in the total)."""
    total = sum(r.params for r in plan)
    if not total:
        raise InputError("prefill model: the plan has no decode modules")
    out: dict[str, float] = {}
    for r in plan:
        if r.format != "bf16":
            out[r.format] = out.get(r.format, 0.0) + r.params / total
    return out


def build_prefill_table(phases: dict[str, dict[int, WavePhases]], plans: dict[str, Sequence[PlanRow]],
                        built_from: Sequence[str], *, baseline: str = "bf16", source: str = "") -> PrefillTable:
    """Per level, the slopes fitted on the recipes ``built_from`` (BF16 and at least one per format), from their
    wave phases and plans (see the module's docstring)."""
    import numpy as np

    if baseline not in built_from:
        raise InputError(f"prefill model: the table needs the baseline {baseline!r} among the recipes it is built from")
    levels: dict[int, PrefillLevel] = {}
    for c in sorted(set.intersection(*(set(phases.get(v, {})) for v in built_from))):
        base = phases[baseline][c]
        others = [v for v in built_from if v != baseline]
        shares = {v: format_shares(plans[v]) for v in others}
        fmts = sorted({f for s in shares.values() for f in s})
        if not fmts:
            raise InputError("prefill model: no recipe it is built from quantizes anything")
        x = np.array([[shares[v].get(f, 0.0) for f in fmts] for v in others])
        y = np.array([phases[v][c].prefill_s / base.prefill_s - 1 for v in others])
        if np.linalg.matrix_rank(x) < len(fmts):
            raise InputError(f"prefill model at c={c}: the recipes {', '.join(others)} do not tell the formats "
                             f"{', '.join(fmts)} apart; build it from one recipe per format as well")
        slope = np.linalg.lstsq(x, y, rcond=None)[0]
        levels[c] = PrefillLevel(concurrency=c, bf16_prefill_s=base.prefill_s, bf16_decode_s=base.decode_s,
                                 slope={f: float(s) for f, s in zip(fmts, slope, strict=True)})
    if not levels:
        raise InputError(f"prefill model: no level has speed waves of every recipe of {', '.join(built_from)}")
    return PrefillTable(built_from=list(built_from), levels=levels, source=source,
                        plan_params=sum(r.params for r in plans[baseline]))


def predict_served(table: PrefillTable, decode: Prediction, plan: Sequence[PlanRow]) -> ServedPrediction:
    """The served speed-up of ``plan`` at ``decode``'s level: its predicted decode step and its prefill term."""
    lv = table.levels.get(decode.concurrency)
    if lv is None:
        raise InputError(f"prefill model: no waves at concurrency {decode.concurrency} (it has "
                         f"{', '.join(map(str, sorted(table.levels)))})")
    shares = format_shares(plan)
    missing = sorted(set(shares) - set(lv.slope))
    if missing:
        raise InputError(f"prefill model: no recipe it was built from runs {missing[0]}; measure one that does")
    prefill_ratio = 1 + sum(lv.slope[f] * s for f, s in shares.items())
    step_ratio = decode.ms_per_step / decode.bf16_ms_per_step
    served = lv.bf16_prefill_s * prefill_ratio + lv.bf16_decode_s * step_ratio
    return ServedPrediction(concurrency=decode.concurrency, speedup=(lv.bf16_prefill_s + lv.bf16_decode_s) / served,
                            prefill_ratio=prefill_ratio, step_ratio=step_ratio)


def load_prefill_table(path: Path) -> PrefillTable:
    from quantgate.schema.base import read_record_file

    return read_record_file(PrefillTable, Path(path))


def served_group_costs(table: CostTable, prefill: PrefillTable, groups: Sequence, formats: Sequence[str],
                       concurrency: int, *, where: str = "speed table") -> GroupCosts:
    """``recommend``'s solver rows in seconds of a served wave instead of GPU ms per decode step: each (group,
    format) costs its decode GEMMs scaled to the wave's decode phase plus its share of the prefill phase (the
    format's slope times the group's parameters over the plan's), so a speed budget is a served speed-up."""
    dec = group_costs(table, groups, formats, concurrency, where=where)
    lv = prefill.levels.get(concurrency)
    if lv is None:
        raise InputError(f"prefill model: no waves at concurrency {concurrency} (it has "
                         f"{', '.join(map(str, sorted(prefill.levels)))})")
    missing = sorted(set(formats) - {"bf16"} - set(lv.slope))
    if missing:
        raise InputError(f"prefill model: no recipe it was built from runs {missing[0]}; measure one that does, or "
                         f"leave {missing[0]} out")
    scale = lv.bf16_decode_s / dec.bf16_ms
    params = {g.name: (g.params if g.decode else 0) for g in groups}
    cost = {(g, f): ms * scale + (lv.bf16_prefill_s * lv.slope[f] * params[g] / prefill.plan_params
                                  if f != "bf16" else 0.0) for (g, f), ms in dec.cost.items()}
    return GroupCosts(concurrency=concurrency, cost=cost, fixed_ms=dec.fixed_ms * scale + lv.bf16_prefill_s,
                      bf16_ms=lv.bf16_prefill_s + lv.bf16_decode_s)
