"""A study's own timing records: ``timings.jsonl`` in the output folder, one line per stage as it
finishes (pages, quantize per variant, each server start, page requests per level, lm-eval, scoring,
compare and report), and the console line that shows the same stage. A resumed study appends its
stages under a new ``session``; ``benchmarks/demo_time.py`` reads them."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from quantgate.io.console import Console, Stage
from quantgate.io.fileio import append_jsonl
from quantgate.schema.timings import BudgetRow, StageName, StageTiming, TimeBudget
from quantgate.study.spec import Study

TIMINGS = "timings.jsonl"


class Clock:
    """Times stages into ``timings.jsonl`` and shows each as one console stage."""

    def __init__(self, out: Path, console: Console, start: float | None = None):
        self.path, self.console = Path(out) / TIMINGS, console
        self.session = uuid.uuid4().hex[:12]
        self.start = time.time() if start is None else start  # unix time this run of the study began
        self.open: dict[object, tuple[str, str | None, float]] = {}  # stages under way: (stage, variant, unix start)

    @contextmanager
    def stage(self, stage: StageName, label: str, total: int | None = None, unit: str | None = "page", *,
              variant: str | None = None, concurrency: int | None = None, background: bool = False) -> Iterator[Stage]:
        t0, m0 = time.time(), time.monotonic()
        key = object()  # held until the stage ends: unique while it is open (an id() of a dropped object is not)
        self.open[key] = (stage, variant, t0)
        try:
            with self.console.stage(label, total, unit) as s:
                yield s
        finally:
            self.open.pop(key, None)
        rec = StageTiming(session=self.session, stage=stage, variant=variant, concurrency=concurrency,
                          count=s.n if s.n else None, reused=s.reused, background=background, start=round(t0, 3),
                          wall_s=round(time.monotonic() - m0, 3), end=round(time.time(), 3))
        append_jsonl(self.path, rec.model_dump(exclude_none=True))


def _union_s(spans: list[tuple[float, float]]) -> float:
    """Length of the union of intervals: time with at least one of them under way."""
    total, end = 0.0, float("-inf")
    for a, b in sorted(spans):
        if b > end:
            total += b - max(a, end)
            end = b
    return total


def time_budget(st: Study, out: Path, clock: Clock, now: float | None = None) -> TimeBudget:
    """This run's wall time split by part and variant, from its ``timings.jsonl`` lines and the stages still
    under way (the report stage, while the report is built); generation from the request records inside each
    page stage's window (``requests.jsonl``: each request from send, after its image was read, to its last
    byte). Overhead: everything that is not a server start, generation or lm-eval."""
    from quantgate.io.fileio import read_jsonl
    from quantgate.schema.run import RequestRecord
    from quantgate.serve.run import REQUESTS, SPEED

    now = time.time() if now is None else now
    out = Path(out)
    stages = [StageTiming.model_validate(o) for _, o in read_jsonl(clock.path, repair_torn_tail=True)
              if o.get("session") == clock.session] if clock.path.is_file() else []
    stages += [StageTiming(session=clock.session, stage=s, variant=v, start=t0, wall_s=now - t0)
               for s, v, t0 in clock.open.values()]
    rows: list[BudgetRow] = []
    background = engine = generation = lmeval = 0.0
    requests: dict[tuple[str, str], list[RequestRecord]] = {}
    fore = [(t.start, t.start + t.wall_s) for t in stages if not t.background]
    for t in stages:
        if t.background:
            # a server started beside another stage: only the part nothing else ran beside is wall time of its own
            span = (t.start, t.start + t.wall_s)
            overlap = _union_s(fore + [span]) - _union_s(fore)
            exposed = round(max(0.0, overlap), 3)
            background += t.wall_s - exposed
            fore.append(span)  # starts that overlap each other (servers: all_at_once) count their union once
            if exposed > 0:
                rows.append(BudgetRow(part="server_start", variant=t.variant, wall_s=exposed, background=True))
                engine += exposed
            continue
        row = BudgetRow(part=_part(st, t), variant=t.variant, wall_s=t.wall_s, reused=t.reused)
        if t.stage in ("pages_run", "speed_waves") and t.variant:
            key = (t.variant, REQUESTS if t.stage == "pages_run" else SPEED)
            if key not in requests:
                path = out / "runs" / key[0] / key[1]
                requests[key] = [RequestRecord.model_validate(o) for _, o in
                                 read_jsonl(path, repair_torn_tail=True)] if path.is_file() else []
            # on the requests' own clock (time.time), from the stage's stamps rounded to the millisecond
            end = t.end if t.end is not None else t.start + t.wall_s
            inside = [(r.start, r.end) for r in requests[key] if r.concurrency == t.concurrency
                      and r.start >= t.start - 1e-3 and r.end <= end + 1e-3]
            row.generation_s, row.requests = round(_union_s(inside), 3), len(inside)
            generation += row.generation_s
        engine += t.wall_s if t.stage == "server_start" else 0.0
        lmeval += t.wall_s if t.stage == "lmeval" else 0.0
        rows.append(row)
    wall = max(now - clock.start, 1e-9)
    rows.append(BudgetRow(part="other", wall_s=round(wall - sum(r.wall_s for r in rows), 3)))
    overhead = wall - engine - generation - lmeval
    return TimeBudget(session=clock.session, wall_s=round(wall, 3), rows=rows, background_s=round(background, 3),
                      engine_start_s=round(engine, 3), generation_s=round(generation, 3), lmeval_s=round(lmeval, 3),
                      overhead_s=round(overhead, 3), overhead_share=overhead / wall)


def _part(st: Study, t: StageTiming) -> str:
    """The budget part of a stage. Page runs are accuracy at the compared level; at another level they are
    speed, unless the study sends its speed in waves (``speed:``), when the only other page run is the
    baseline's noise run (accuracy). Waves are speed at every level, the compared one included."""
    if t.stage == "speed_waves":
        return "speed"
    if t.stage != "pages_run":
        return t.stage
    return "accuracy" if t.concurrency == st.compare_level or st.speed is not None else "speed"
