"""OmniDocBench's end-to-end protocol as quantgate's own records (``quantgate.scoring.omnidoc``): a page's truth
(:class:`TruthPage`, read from OmniDocBench's JSON or from markdown, or given as a truth file of its own with
``"kind": "omnidoc_truth_page"``) and one page's values (:class:`PageScore`)."""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import Any, Literal

from pydantic import Field

from quantgate.schema.base import Record


class TruthBlock(Record):
    category: str
    order: int | None = None  # reading order; None for blocks outside it (headers, page numbers, …)
    text: str | None = None  # text categories
    latex: str | None = None  # display formulas; tables (optional)
    html: str | None = None  # tables
    ignore: bool = False  # OmniDocBench's flag, kept as given: the v1.0 protocol does not read it
    anno_ids: list[int] = Field(default_factory=list)  # several: truncated blocks merged into this one


class SkippedBlock(Record):
    anno_id: int | None
    category: str
    reason: str


class TruthPage(Record):
    schema_version: Literal[1] = 1
    kind: Literal["omnidoc_truth_page"] = "omnidoc_truth_page"
    image: str  # the page image's file name, as OmniDocBench names it
    source: str  # the file the truth was read from
    attributes: dict[str, Any] = Field(default_factory=dict)  # page_info.page_attribute, kept as given
    blocks: list[TruthBlock]
    skipped: list[SkippedBlock] = Field(default_factory=list)

    @property
    def page_id(self) -> str:
        return PurePosixPath(self.image).stem


class PageScore(Record):
    """One page's values (None: not scored on that metric), the per-table values TEDS aggregates over,
    and notes on anything scored in a way worth knowing (a table TEDS could not read, …)."""

    values: dict[str, float | None]
    tables: dict[str, list[float]] = Field(default_factory=dict)
    notes: list[str] = Field(default_factory=list)


class SetScores(Record):
    """A page set's values as upstream aggregates them (TEDS per table, edit distances per page; None: no page
    scored), how many pages each metric was scored on of those with truth, and every page's notes."""

    set_values: dict[str, float | None]
    pages_scored: dict[str, int]
    pages_with_truth: int
    notes: list[str] = Field(default_factory=list)
