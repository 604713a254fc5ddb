"""Reads a ParseBench dimension file (upstream's public dataset layout: one rule per JSONL line, ``{"pdf": ...,
"page": N, "type": ..., "rule": {...} or its JSON text, "id": ...}``) into each page's content-faithfulness rules,
keyed as ``pages import`` names a PDF's pages (``<pdf stem>_pg<N>``; a rule without a page is upstream's
whole-document rule and goes to page 1, since ParseBench's documents are single pages).

A rule type of another ParseBench dimension (tables, charts, formatting, layout...) is not this family's: it is
left out and counted, as upstream's content-faithfulness score leaves it out. A type upstream does not know at
all, or a content rule upstream would refuse to build, is bad input: one DataError naming the file, line and
type, before anything is written."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import ValidationError

from quantgate.errors import DataError
from quantgate.io.fileio import read_jsonl
from quantgate.scoring.parsebench.rules import RULE, TYPES, problem

# every rule type upstream's ``TestType`` names at the pinned commit (test_types.py) beyond this family's TYPES,
# and its loader's pointer-only ``expected_markdown`` line: such a line belongs to another dimension; anything else
# is a typo or a newer upstream (a test holds this list to the reference's enum)
OTHER_DIMENSIONS = frozenset("""
present absent baseline unexpected_sentence too_many_sentence_occurence missing_sentence missing_specific_sentence
unexpected_word too_many_word_occurence missing_word missing_specific_word table tables_values tables_num_rows
tables_num_cols table_colspan table_rowspan table_same_row table_same_column table_header_chain table_adjacent_up
table_adjacent_down table_adjacent_left table_adjacent_right table_top_header table_left_header table_no_left
table_no_right table_no_above table_no_below chart_data_point chart_data_array_labels chart_data_array_data
is_bold is_not_bold is_italic is_not_italic is_underline is_not_underline is_strikeout is_not_strikeout is_sup
is_not_sup is_sub is_not_sub is_mark is_not_mark mark_color is_latex is_code_block math is_title
title_hierarchy_percent is_header is_footer rotate_check form_field layout expected_markdown
""".split())


@dataclass
class ParseBenchRules:
    by_page: dict[str, list[dict]]
    skipped: dict[str, int] = field(default_factory=dict)  # other dimensions' rule types → lines left out


def _page_id(pdf: object, page: object, where: str) -> str:
    if not isinstance(pdf, str) or not pdf.strip():
        raise DataError(f"{where}: no 'pdf' (the document the rule is about); every ParseBench line names one")
    if page is not None and (isinstance(page, bool) or not isinstance(page, int) or page < 1):
        raise DataError(f"{where}: 'page' = {page!r} is not a page number (1, 2, ...)")
    return f"{Path(pdf).stem}_pg{page or 1}"


def read_rules(path: str | Path) -> ParseBenchRules:
    """The file's content-faithfulness rules by page id, each as upstream writes it (validated here)."""
    out = ParseBenchRules(by_page={})
    for no, row in read_jsonl(Path(path), final_newline_optional=True):
        where = f"{path}:{no}"
        kind, body = row.get("type"), row.get("rule", {})
        if isinstance(body, str):
            try:
                body = json.loads(body)
            except json.JSONDecodeError as e:
                raise DataError(f"{where}: 'rule' is text that is not JSON ({e.msg}); write the rule as an object") \
                    from None
        if not isinstance(body, dict):
            raise DataError(f"{where}: 'rule' must be an object, got {type(body).__name__}")
        if kind in OTHER_DIMENSIONS:
            out.skipped[kind] = out.skipped.get(kind, 0) + 1
            continue
        if kind not in TYPES:
            raise DataError(f"{where}: unknown ParseBench rule type {kind!r}: content-faithfulness types are "
                            f"{', '.join(TYPES)}; fix the type, or drop the line")
        rule = {**body, "type": kind, **({"id": row["id"]} if row.get("id") else {})}
        try:
            why = problem(RULE.validate_python(rule))
        except ValidationError as e:
            err = e.errors()[0]
            why = f"{'.'.join(map(str, err['loc'][1:])) or 'rule'}: {err['msg']}"
        if why:
            raise DataError(f"{where}: {kind} rule: {why}")
        out.by_page.setdefault(_page_id(row.get("pdf"), row.get("page"), where), []).append(rule)
    return out
