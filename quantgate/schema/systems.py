"""``comparison.json``: other systems' outputs (folders of files, one per page) judged against one of them
on one metric, what ``quantgate report OUT --predictions BASE CAND…`` writes and renders."""

from __future__ import annotations

from typing import Literal

from quantgate.schema.base import Record
from quantgate.schema.summary import WorstPage
from quantgate.schema.verdict import Verdict


class SystemResult(Record):
    name: str  # the folder's name
    folder: str
    pages_with_output: int
    missing_pages: list[str]  # pages of the split the folder has no output for (scored as empty)
    verdict: Verdict | None  # None for the baseline
    worst: list[WorstPage]


class SystemsComparison(Record):
    schema_version: Literal[1] = 1
    kind: Literal["quantgate.systems"] = "quantgate.systems"
    pages: str
    split: str
    metric: str
    baseline: str
    systems: list[SystemResult]  # the baseline first

    @property
    def outcome(self) -> Literal["PASS", "FAIL", "UNDECIDED"]:
        """FAIL when a system regresses, UNDECIDED when one is not decided, else PASS (the gate's words)."""
        verdicts = [s.verdict.verdict for s in self.systems if s.verdict is not None]
        if any(v in ("regression", "not_equivalent") for v in verdicts):
            return "FAIL"
        return "UNDECIDED" if any(v == "inconclusive" for v in verdicts) else "PASS"
