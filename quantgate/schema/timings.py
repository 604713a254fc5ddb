"""Where a study's time went: ``timings.jsonl`` (one :class:`StageTiming` per finished stage) and the
report's :class:`TimeBudget` made from it (``quantgate.study.timings``)."""

from __future__ import annotations

from typing import Literal

from quantgate.schema.base import Record

# speed_waves: a ``speed:`` study's repeated speed levels (speed.jsonl), apart from its scored page runs
# speed_profile: a ``speed.profile`` study's decode profiles, taken on each variant's server after its waves
StageName = Literal["pages", "quantize", "server_start", "pages_run", "speed_waves", "speed_profile", "lmeval", "score",
                    "report"]


class StageTiming(Record):
    """Schema 2 adds ``end``: the stage's end on the same clock as ``start`` and the request records, so the
    requests inside a stage are found on one clock (``wall_s`` is monotonic; a clock step between the two once
    left a stage's last request outside ``start + wall_s``). Schema-1 lines read as before."""

    schema_version: Literal[1, 2] = 2
    session: str  # one run of `quantgate study`
    stage: StageName
    variant: str | None = None
    concurrency: int | None = None
    count: int | None = None  # requests sent, pages synthesized, runs scored
    reused: bool = False  # nothing was left to do: the files on disk were reused
    background: bool = False  # ran beside another stage (a server started during the previous lm-eval)
    start: float  # unix time
    wall_s: float
    end: float | None = None  # unix time (schema 2); None: a schema-1 line, whose end is start + wall_s


BudgetPart = Literal["pages", "quantize", "server_start", "accuracy", "speed", "speed_profile", "lmeval", "score", "report",
                     "other"]


class BudgetRow(Record):
    part: BudgetPart
    variant: str | None = None
    wall_s: float
    generation_s: float | None = None  # accuracy/speed: time with at least one recorded page request in flight
    requests: int | None = None  # accuracy/speed: page requests recorded in the stage
    reused: bool = False
    background: bool = False  # a server start begun beside another stage: only the part that ran alone


class TimeBudget(Record):
    """Where a run of ``quantgate study`` spent its wall time (``quantgate.study.timings.time_budget``). The
    foreground ``rows`` (``other``: what lies between stages) sum to ``wall_s``; server starts that ran beside
    another stage count only for the part that ran alone; the rest is ``background_s``, outside the sum."""

    schema_version: Literal[1] = 1
    session: str
    wall_s: float  # from the start of this `quantgate study` run to when the budget was made (in the report stage)
    rows: list[BudgetRow]
    background_s: float
    engine_start_s: float  # foreground server starts
    generation_s: float  # page requests in flight (accuracy passes and speed levels)
    lmeval_s: float  # lm-eval stages: not split (their requests are not recorded one by one)
    overhead_s: float  # wall − engine starts − generation − lm-eval
    overhead_share: float  # overhead_s / wall_s
