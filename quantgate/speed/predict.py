"""What a recipe's decode step costs by the measured cost table: for a plan (module → format), or per layer group
and format for ``recommend``'s solver. A step's predicted GPU time is the table's fixed cost plus, for every GEMM,
its cell in the format the plan gives it; the speed-up is the all-BF16 step's time over it. Additive by
construction: whether it holds for a mix of formats is what measuring that recipe tells (benchmarks/speed_table_check.py)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

from quantgate.errors import InputError
from quantgate.schema.speed import CostTable, TableGemm
from quantgate.schema.variant import PlanRow
from quantgate.speed.gemms import decode_gemms


@dataclass(frozen=True)
class Prediction:
    concurrency: int
    ms_per_step: float
    bf16_ms_per_step: float

    @property
    def speedup(self) -> float:
        return self.bf16_ms_per_step / self.ms_per_step


def by_group(table: CostTable) -> dict[str, dict[str, dict[int, float]]]:
    """The table as format -> layer group -> concurrency -> GPU ms per step of the group's GEMMs, where every GEMM
    of the group was measured in that format at that concurrency (a group with a GEMM unmeasured is left out)."""
    members: dict[str, list[TableGemm]] = {}
    for g in table.gemms:
        members.setdefault(g.group, []).append(g)
    out: dict[str, dict[str, dict[int, float]]] = {}
    for fmt in sorted({f for g in table.gemms for f in g.cells}):
        for group, gs in members.items():
            for c in table.concurrency:
                if all(c in g.cells.get(fmt, {}) for g in gs):
                    out.setdefault(fmt, {}).setdefault(group, {})[c] = sum(g.cells[fmt][c].ms_per_step for g in gs)
    return out


def _cell(g: TableGemm, fmt: str, c: int, where: str) -> float:
    cell = g.cells.get(fmt, {}).get(c)
    if cell is None:
        have = ", ".join(f"{f} at c={','.join(map(str, sorted(v)))}" for f, v in g.cells.items()) or "nothing"
        raise InputError(f"{where}: no {fmt} measurement of {g.id} at concurrency {c} (it has {have}); profile a "
                         f"variant that runs it in {fmt} (`quantgate speed-profile`), or leave {fmt} out")
    return cell.ms_per_step


def _check_level(table: CostTable, c: int, where: str) -> None:
    if c not in table.concurrency:
        raise InputError(f"{where}: concurrency {c} was not profiled (the table has "
                         f"{', '.join(map(str, table.concurrency))})")


def predict_plan(table: CostTable, plan: Sequence[PlanRow], *, where: str = "speed table",
                 levels: Iterable[int] | None = None) -> list[Prediction]:
    """The predicted decode step of ``plan`` (a variant's plan rows) at each of ``levels`` (default: every
    profiled concurrency)."""
    gemms = decode_gemms(plan, where=where)
    by_id = {g.id: g for g in table.gemms}
    unknown = [g.id for g in gemms if g.id not in by_id or tuple(by_id[g.id].modules) != g.modules]
    if unknown or len(gemms) != len(table.gemms):
        raise InputError(f"{where}: the plan's decode GEMMs are not the table's ({unknown[0] if unknown else 'count'} "
                         "differs): the table was profiled on another model")
    out = []
    for c in levels or table.concurrency:
        _check_level(table, c, where)
        fixed = table.fixed[c].ms_per_step
        ms = fixed + sum(_cell(by_id[g.id], g.format, c, where) for g in gemms)
        bf16 = fixed + sum(_cell(t, "bf16", c, where) for t in table.gemms)
        out.append(Prediction(concurrency=c, ms_per_step=ms, bf16_ms_per_step=bf16))
    return out


class _Group(Protocol):
    name: str
    modules: list[str]
    decode: bool  # False: vision and projector groups, which run no GEMM in a decode step


@dataclass(frozen=True)
class GroupCosts:
    """Per (group, format): the predicted GPU ms per step of the group's GEMMs; ``fixed_ms``: the rest of the
    step whatever the groups' formats (the fixed cost, and the GEMMs of no group — LM head, kept-BF16
    projections — in BF16); ``bf16_ms``: the all-BF16 step."""

    concurrency: int
    cost: dict[tuple[str, str], float]
    fixed_ms: float
    bf16_ms: float


def group_costs(table: CostTable, groups: Sequence[_Group], formats: Sequence[str], concurrency: int, *,
                where: str = "speed table") -> GroupCosts:
    """Cost rows for the solver: a GEMM belongs to the group holding all its modules; a group module that no
    table GEMM holds means the table is another model's. A vision group costs nothing per decode step."""
    _check_level(table, concurrency, where)
    owner: dict[str, str] = {m: g.name for g in groups if g.decode for m in g.modules}
    cost = {(g.name, f): 0.0 for g in groups for f in {"bf16", *formats}}
    fixed = table.fixed[concurrency].ms_per_step
    covered: set[str] = set()
    for t in table.gemms:
        owners = {owner.get(m) for m in t.modules}
        if len(owners) > 1:
            raise InputError(f"{where}: {t.id} is one GEMM but its modules are in groups "
                             f"{', '.join(sorted(str(o) for o in owners))}")
        (o,) = owners
        covered.update(t.modules)
        if o is None:
            fixed += _cell(t, "bf16", concurrency, where)
            continue
        for f in {"bf16", *formats}:
            cost[(o, f)] += _cell(t, f, concurrency, where)
    lost = sorted(set(owner) - covered)
    if lost:
        raise InputError(f"{where}: no GEMM of the table holds {lost[0]} (group {owner[lost[0]]}): it was profiled "
                         "on another model")
    bf16 = fixed + sum(v for (_, f), v in cost.items() if f == "bf16")
    return GroupCosts(concurrency=concurrency, cost=cost, fixed_ms=fixed, bf16_ms=bf16)
