"""Reads a ParseBench dimension file (upstream's public dataset layout: one rule per JSONL line, ``{"pdf": ...,
"page": N, "type": ..., "rule": {...} or its JSON text, "id": ...}``) into each page's content-faithfulness,
semantic-formatting and chart-data-point rules, keyed as ``pages import`` names a PDF's pages
(``<pdf stem>_pg<N>``; a rule without a page is upstream's whole-document rule and goes to page 1, since
ParseBench's documents are single pages).

A rule type quantgate does not score (tables, chart arrays, layout...) is left out and counted, as each
dimension's score leaves the others' rules out. A type upstream does not know at all, or a rule upstream would
refuse to build, is bad input: one DataError naming the file, line and type, before anything is written (a
typo must not silently shrink a page's rules, as a not-applicable record would)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from pydantic import TypeAdapter, ValidationError

from quantgate.errors import DataError, InputError
from quantgate.io.fileio import read_jsonl
from quantgate.schema.load import parse_json
from quantgate.scoring.parsebench import charts, formatting
from quantgate.scoring.parsebench.rules import RULE, TYPES, problem

# every rule type upstream's ``TestType`` names at the pinned commit (test_types.py) beyond this family's TYPES,
# and its loader's pointer-only ``expected_markdown`` line: such a line belongs to another dimension; anything else
# is a typo or a newer upstream (a test holds this list to the reference's enum)
OTHER_DIMENSIONS = frozenset("""
present absent baseline unexpected_sentence too_many_sentence_occurence missing_sentence missing_specific_sentence
unexpected_word too_many_word_occurence missing_word missing_specific_word table tables_values tables_num_rows
tables_num_cols table_colspan table_rowspan table_same_row table_same_column table_header_chain table_adjacent_up
table_adjacent_down table_adjacent_left table_adjacent_right table_top_header table_left_header table_no_left
table_no_right table_no_above table_no_below chart_data_array_labels chart_data_array_data
math rotate_check form_field layout expected_markdown
""".split())
# the scored families: rule type → (family, its validator, upstream's refusals)
FAMILY_OF = {**{t: ("content", RULE, problem) for t in TYPES},
             **{t: ("formatting", formatting.FORMAT_RULE, formatting.problem) for t in formatting.TYPES},
             "chart_data_point": ("charts", TypeAdapter(charts.ChartPoint), charts.problem)}


def _why_invalid(rule: dict) -> tuple[object, str | None]:
    """The typed rule, and why upstream would refuse it (None: it would not)."""
    _, adapter, refusal = FAMILY_OF[rule["type"]]
    try:
        typed = adapter.validate_python(rule)
    except ValidationError as e:
        err = e.errors()[0]
        loc = err["loc"][1:] if err["loc"][:1] == (rule["type"],) else err["loc"]  # a union's tag comes first
        return None, f"{'.'.join(map(str, loc)) or 'rule'}: {err['msg']}"
    return typed, refusal(typed)


def typed_rules(rules: list[dict], family: str) -> list:
    """The page's rules of one family, typed. The rules were checked on import; one edited into pages.jsonl since
    (a type no family knows, a rule upstream would refuse) is refused here, not half-scored."""
    out = []
    for r in rules:
        entry = FAMILY_OF.get(r.get("type"))  # type: ignore[arg-type]
        typed, why = _why_invalid(r) if entry else (None, f"unknown rule type {r.get('type')!r}")
        if why or typed is None:
            raise InputError(f"pages.jsonl: ParseBench rule {r.get('id') or r.get('type')!r} is not valid ({why}); "
                             "import the page set again with `quantgate pages import --parsebench`")
        if entry and entry[0] == family:
            out.append(typed)
    return out


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
    """The file's scored rules (content faithfulness, semantic formatting, chart data points) by page id, each as upstream writes it
    (validated here)."""
    out = ParseBenchRules(by_page={})
    for no, row in read_jsonl(Path(path), final_newline_optional=True):
        where = f"{path}:{no}"
        kind, body = row.get("type"), row.get("rule", {})
        if isinstance(body, str):
            try:  # text from a downloaded file: parsed under the loader's limits (depth, number size)
                body = parse_json(body, where)
            except DataError as e:
                raise DataError(f"{where}: 'rule' is text that is not JSON ({e}); write the rule as an object") \
                    from None
        if not isinstance(body, dict):
            raise DataError(f"{where}: 'rule' must be an object, got {type(body).__name__}")
        if kind in OTHER_DIMENSIONS:
            out.skipped[kind] = out.skipped.get(kind, 0) + 1
            continue
        if kind not in FAMILY_OF:
            raise DataError(f"{where}: unknown ParseBench rule type {kind!r}: the types scored are "
                            f"{', '.join(FAMILY_OF)}; fix the type, or drop the line")
        rule = {**body, "type": kind, **({"id": row["id"]} if row.get("id") else {})}
        _, why = _why_invalid(rule)
        if why:
            raise DataError(f"{where}: {kind} rule: {why}")
        out.by_page.setdefault(_page_id(row.get("pdf"), row.get("page"), where), []).append(rule)
    return out
