"""A page's ParseBench table score (``parsebench_tables``): GTRM = 0.5 · GriTS-Con + 0.5 · TableRecordMatch, or
GriTS-Con alone where the page says TableRecordMatch does not apply to its tables (``trm_unsupported``), as
upstream's evaluator computes its ``grits_trm_composite`` (``evaluation/evaluators/parse.py`` at the pinned
commit), in its order:

1. a predicted heading or paragraph just above a table moves into it as its title row where it reads like a truth
   table's full-width title row (``parse.merge_preceding_titles_into_tables``);
2. no ``<table`` in the truth: the page has no table score; one in the truth but none in the prediction: 0;
3. both sides' tables found and parsed (``parse.extract_table_pairs``; a predicted table that does not parse is
   dropped, so the model pays for it as a missing table);
4. where the page allows it, a predicted table that merged side-by-side truth tables is cut back into parts
   (``split.split_ambiguous_merged_pred``);
5. title rows stripped from both sides (``titles.strip_title_rows``, at most ``max_top_title_rows`` from the top);
6. GriTS-Con and the truth → prediction pairing (``grits.grits_con``);
7. TableRecordMatch on that pairing (``records.table_record_match``);
8. the composite.

A page's table truth travels in ``PageRecord.parsebench`` as one :class:`TableTruth` entry (type
``expected_markdown``, upstream's pointer line), read from the dimension file by ``scoring.parsebench.dataset``."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

from pydantic import BaseModel, ConfigDict

from quantgate.scoring.parsebench.tables.grits import grits_con
from quantgate.scoring.parsebench.tables.parse import (
    extract_table_pairs,
    merge_preceding_titles_into_tables,
    parse_html_tables,
)

TYPE = "expected_markdown"  # upstream's loader's line type for a page's markdown/HTML truth
GRITS_WEIGHT = TRM_WEIGHT = 0.5


class TableTruth(BaseModel):
    """A page's table truth: the truth markdown (its tables in HTML) and upstream's per-case table settings."""
    model_config = ConfigDict(extra="forbid")
    type: Literal["expected_markdown"]
    id: str | None = None
    expected_markdown: str
    # a predicted table that merged side-by-side truth tables may be cut back into parts
    allow_splitting_ambiguous_merged_tables: bool = False
    trm_unsupported: bool = False  # the record match is unreliable on these tables: GriTS-Con alone
    max_top_title_rows: int = 1  # title rows stripped from a table's top at most (0: none)


def has_table(text: str) -> bool:
    """Upstream's test for a side having tables at all (a substring, before any parsing)."""
    return "<table" in text.lower()


@dataclass(frozen=True)
class PageTables:
    """One page's table numbers, upstream's metric names in the comments."""
    composite: float  # grits_trm_composite: the page's score
    grits_con: float  # grits_con
    table_record_match: float | None  # table_record_match (None: upstream emits none)
    n_expected: int = 0  # tables_expected
    n_actual: int = 0  # tables_actual
    unparseable_pred: int = 0  # tables_unparseable_pred


def _composite(grits: float, trm: float | None, trm_unsupported: bool) -> float:
    return grits if trm_unsupported or trm is None else GRITS_WEIGHT * grits + TRM_WEIGHT * trm


def page_tables(truth: TableTruth, markdown: str, *, page: str = "page") -> PageTables | None:
    """The page's table numbers (None: its truth has no table). Raises DataError when a truth table does not
    parse (checked on import, so only a hand-edited pages.jsonl gets here). Kept for the last pages scored: the
    metric and the leaderboard's units ask for the same page in turn, and GriTS on a big table takes seconds."""
    return _page_tables(truth.expected_markdown, truth.allow_splitting_ambiguous_merged_tables,
                        truth.trm_unsupported, truth.max_top_title_rows, markdown, page)


@lru_cache(maxsize=64)
def _page_tables(expected_md: str, allow_splitting: bool, trm_unsupported: bool, max_top_title_rows: int,
                 markdown: str, page: str) -> PageTables | None:
    from quantgate.scoring.parsebench.tables.records import table_record_match
    from quantgate.scoring.parsebench.tables.split import split_ambiguous_merged_pred
    from quantgate.scoring.parsebench.tables.titles import strip_title_rows

    if not has_table(expected_md):
        return None
    actual_md = merge_preceding_titles_into_tables(expected_md, markdown)
    if not has_table(actual_md):
        # upstream scores GriTS 0 and its record match 0 (none where its parser finds no truth table): 0 either way
        trm = 0.0 if parse_html_tables(expected_md) else None
        return PageTables(_composite(0.0, trm, trm_unsupported), 0.0, trm)
    pairs = extract_table_pairs(expected_md, actual_md, page=page)
    actual = pairs.actual
    if allow_splitting:
        actual = split_ambiguous_merged_pred(pairs.expected, actual)
    expected = [strip_title_rows(t, max_top_title_rows=max_top_title_rows) for t in pairs.expected]
    actual = [strip_title_rows(t, max_top_title_rows=max_top_title_rows) for t in actual]
    grits = grits_con(expected, actual)
    value = grits.value if grits.value is not None else 0.0
    trm = table_record_match(expected, actual, grits.pairing)
    return PageTables(_composite(value, trm, trm_unsupported), value, trm,
                      pairs.n_expected, pairs.n_actual, pairs.unparseable_pred)


def page_score(truths: Sequence[TableTruth], markdown: str) -> float | None:
    """The page's GTRM in [0, 1]; None when it has no table truth, or a truth without tables. An empty output
    scores 0 on a page with tables (it has none)."""
    if not truths:
        return None
    result = page_tables(truths[0], markdown, page=truths[0].id or "page")
    return None if result is None else result.composite
