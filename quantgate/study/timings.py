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
from typing import Literal

from quantgate.console import Console, Stage
from quantgate.fileio import append_jsonl
from quantgate.records import Record

TIMINGS = "timings.jsonl"
StageName = Literal["pages", "quantize", "server_start", "pages_run", "lmeval", "score", "report"]


class StageTiming(Record):
    schema_version: int = 1
    session: str  # one run of `quantgate study`
    stage: StageName
    variant: str | None = None
    concurrency: int | None = None
    count: int | None = None  # requests sent, pages synthesized, runs scored
    reused: bool = False  # nothing was left to do: the files on disk were reused
    background: bool = False  # ran beside another stage (a server started during the previous lm-eval)
    start: float  # unix time
    wall_s: float


class Clock:
    """Times stages into ``timings.jsonl`` and shows each as one console stage."""

    def __init__(self, out: Path, console: Console):
        self.path, self.console = Path(out) / TIMINGS, console
        self.session = uuid.uuid4().hex[:12]

    @contextmanager
    def stage(self, stage: StageName, label: str, total: int | None = None, unit: str | None = "page", *,
              variant: str | None = None, concurrency: int | None = None, background: bool = False) -> Iterator[Stage]:
        t0, m0 = time.time(), time.monotonic()
        with self.console.stage(label, total, unit) as s:
            yield s
        rec = StageTiming(session=self.session, stage=stage, variant=variant, concurrency=concurrency,
                          count=s.n if s.n else None, reused=s.reused, background=background, start=round(t0, 3),
                          wall_s=round(time.monotonic() - m0, 3))
        append_jsonl(self.path, rec.model_dump(exclude_none=True))
