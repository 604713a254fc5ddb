"""Reads a ParseBench dimension file (upstream's public dataset layout: one rule per JSONL line, ``{"pdf": ...,
"page": N, "type": ..., "rule": {...} or its JSON text, "id": ...}``) into each page's content-faithfulness,
semantic-formatting and chart-data-point rules and its table truth, keyed as ``pages import`` names a PDF's pages
(``<pdf stem>_pg<N>``; a rule without a page is upstream's whole-document rule and goes to page 1, since
ParseBench's documents are single pages).

The table truth is read as upstream's loader reads it: the page's markdown/HTML truth is the first non-empty
``expected_markdown`` field of its lines (the table file's ``type: expected_markdown`` lines carry it; else the
``expected_markdown.json`` beside the file, ``{pdf: markdown}``), and its table settings
(``allow_splitting_ambiguous_merged_tables``, ``trm_unsupported``, ``max_top_title_rows``) come from any of its
lines' rules, a later line's value winning. It is kept as one ``expected_markdown`` entry among the page's rules
(``tables.page.TableTruth``), each truth table checked to parse.

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
from quantgate.scoring.parsebench.tables.page import TYPE as TABLE_TRUTH
from quantgate.scoring.parsebench.tables.page import TableTruth

# every rule type upstream's ``TestType`` names at the pinned commit (test_types.py) beyond this family's TYPES,
# and its loader's pointer-only ``expected_markdown`` line: such a line belongs to another dimension; anything else
# is a typo or a newer upstream (a test holds this list to the reference's enum)
OTHER_DIMENSIONS = frozenset("""
present absent baseline unexpected_sentence too_many_sentence_occurence missing_sentence missing_specific_sentence
unexpected_word too_many_word_occurence missing_word missing_specific_word table tables_values tables_num_rows
tables_num_cols table_colspan table_rowspan table_same_row table_same_column table_header_chain table_adjacent_up
table_adjacent_down table_adjacent_left table_adjacent_right table_top_header table_left_header table_no_left
table_no_right table_no_above table_no_below chart_data_array_labels chart_data_array_data
math rotate_check form_field layout
""".split())
# the scored families: rule type → (family, its validator, upstream's refusals)
FAMILY_OF = {**{t: ("content", RULE, problem) for t in TYPES},
             **{t: ("formatting", formatting.FORMAT_RULE, formatting.problem) for t in formatting.TYPES},
             "chart_data_point": ("charts", TypeAdapter(charts.ChartPoint), charts.problem),
             TABLE_TRUTH: ("tables", TypeAdapter(TableTruth), lambda _: None)}  # its tables are checked on import
# the rule keys upstream's loader takes as the page's table settings
TABLE_SETTINGS = ("allow_splitting_ambiguous_merged_tables", "trm_unsupported", "max_top_title_rows")
SIDECAR = "expected_markdown.json"  # upstream's fallback for the truth markdown, beside the dimension files


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


@dataclass
class _PageTruth:
    """What the file says of one page's tables so far."""
    pdf: str
    markdown: str | None = None
    where: str = ""
    id: str | None = None
    settings: dict = field(default_factory=dict)


def _note_truth(truths: dict[str, _PageTruth], row: dict, body: dict, where: str) -> None:
    """Upstream's loader's reading of a line for its page's table truth: the first non-empty ``expected_markdown``
    field, and any table setting its rule carries (a later line's value winning)."""
    md, kind = row.get("expected_markdown"), row.get("type")
    try:
        pid = _page_id(row.get("pdf"), row.get("page"), where)
    except DataError:
        if md or kind == TABLE_TRUTH:
            raise
        return  # another dimension's line that names no page: left out with its dimension
    t = truths.setdefault(pid, _PageTruth(pdf=row["pdf"]))
    if md and t.markdown is None:
        if not isinstance(md, str):
            raise DataError(f"{where}: 'expected_markdown' must be the page's markdown text, got {type(md).__name__}")
        t.markdown, t.where, t.id = md, where, None if row.get("id") is None else str(row["id"])
    t.settings.update({k: body[k] for k in TABLE_SETTINGS if k in body})


def _sidecar(path: Path) -> dict[str, str]:
    """Upstream's ``expected_markdown.json`` beside the dimension file (``{pdf: markdown}``), or nothing."""
    from quantgate.schema.load import load_json

    side = path.parent / SIDECAR
    if not side.is_file():
        return {}
    data = load_json(side, "ParseBench expected_markdown.json")
    if not isinstance(data, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in data.items()):
        raise DataError(f"{side}: must map each PDF path to its markdown text ({{\"table/x.pdf\": \"<table>...\"}})")
    return data


def _table_truths(path: Path, truths: dict[str, _PageTruth]) -> dict[str, dict]:
    """Each page's table truth entry, for the pages whose truth has a table; each truth table checked to parse
    (a truth table that does not is a dataset bug, refused naming its line)."""
    from quantgate.scoring.parsebench.tables.page import has_table
    from quantgate.scoring.parsebench.tables.parse import extract_table_pairs

    sidecar = _sidecar(path) if any(t.markdown is None for t in truths.values()) else {}
    out = {}
    for pid, t in truths.items():
        md, where = (t.markdown, t.where) if t.markdown is not None else (sidecar.get(t.pdf), f"{path.parent / SIDECAR}")
        if not md or not has_table(md):
            continue
        entry = {"type": TABLE_TRUTH, "expected_markdown": md, **t.settings, **({"id": t.id} if t.id else {})}
        _, why = _why_invalid(entry)
        if why:
            raise DataError(f"{where}: {pid}'s table settings: {why}")
        extract_table_pairs(md, "", page=f"{where} ({pid})")
        out[pid] = entry
    return out


def read_rules(path: str | Path) -> ParseBenchRules:
    """The file's scored rules (content faithfulness, semantic formatting, chart data points) by page id, each as
    upstream writes it (validated here), and each page's table truth (one ``expected_markdown`` entry, last)."""
    out = ParseBenchRules(by_page={})
    truths: dict[str, _PageTruth] = {}
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
        _note_truth(truths, row, body, where)
        if kind == TABLE_TRUTH:
            continue  # upstream's pointer line: its truth is read above
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
    for pid, entry in _table_truths(Path(path), truths).items():
        out.by_page.setdefault(pid, []).append(entry)
    return out
