"""TEDS, tree-edit-distance similarity of two HTML tables (Zhong et al. 2020, PubTabNet), as OmniDocBench's
end-to-end protocol computes it (upstream's metrics/table_metric.py at 24e6428, re-implemented on apted and
lxml): every element under ``<table>`` is a node; a ``<td>`` is a leaf carrying its colspan, rowspan and
its content as a token list (each character, and each inner tag as one token); renaming costs 1 across
tags or spans, else the cells' normalised token edit distance (0 in structure-only mode); inserting or
deleting a node costs 1. TEDS = 1 − distance / (elements under the larger table's ``<table>``)."""

from __future__ import annotations

from dataclasses import dataclass, field


class TableError(ValueError):
    """HTML that is not a scorable table (no ``<table>`` in a body, or a span that is not a whole number)."""


@dataclass
class _Node:
    tag: str
    colspan: int | None = None
    rowspan: int | None = None
    tokens: list[str] = field(default_factory=list)
    children: list[_Node] = field(default_factory=list)


def _cell_tokens(td) -> list[str]:
    out = list(td.text or "")
    for child in td:
        _inner_tokens(child, out)
    return out


def _inner_tokens(el, out: list[str]) -> None:
    out.append(f"<{el.tag}>")
    out += list(el.text or "")
    for child in el:
        _inner_tokens(child, out)
    if el.tag != "unk":
        out.append(f"</{el.tag}>")
    if el.tag != "td":
        out += list(el.tail or "")


def _span(td, name: str) -> int:
    raw = td.get(name, "1")
    try:
        return int(raw)
    except ValueError:
        raise TableError(f"<td {name}={raw!r}>: not a whole number") from None


def _tree(el, structure_only: bool) -> _Node:
    if el.tag == "td":
        return _Node("td", _span(el, "colspan"), _span(el, "rowspan"), [] if structure_only else _cell_tokens(el))
    return _Node(el.tag, children=[_tree(c, structure_only) for c in el])


def parse_table(html: str):
    """The first ``body/table`` element of ``html``; TableError when there is none."""
    from lxml import etree
    from lxml import html as lxml_html

    parser = lxml_html.HTMLParser(remove_comments=True, encoding="utf-8")
    try:
        root = lxml_html.fromstring(html, parser=parser)
    except (etree.ParserError, ValueError) as e:
        raise TableError(f"not parseable as HTML ({e})") from None
    tables = root.xpath("body/table")
    if not tables:
        raise TableError("no <table> in the document body")
    return tables[0]


def check_table(html: str) -> int:
    """Raise TableError if TEDS cannot read ``html``; else the number of elements under its ``<table>``."""
    table = parse_table(html)
    _tree(table, False)
    return len(table.xpath(".//*"))


def teds(pred_html: str, truth_html: str, structure_only: bool = False) -> float:
    """TEDS in [0, 1]. An empty string on either side, or a table with no elements at all, scores 0;
    a prediction TEDS cannot read raises TableError (the caller scores it 0 and says so)."""
    from apted import APTED, Config
    from rapidfuzz.distance import Levenshtein

    if not pred_html or not truth_html:
        return 0.0
    pred, truth = parse_table(pred_html), parse_table(truth_html)
    size = max(len(pred.xpath(".//*")), len(truth.xpath(".//*")))
    if size == 0:
        return 0.0

    class _Costs(Config):
        def rename(self, a: _Node, b: _Node) -> float:
            if (a.tag, a.colspan, a.rowspan) != (b.tag, b.colspan, b.rowspan):
                return 1.0
            if a.tag == "td" and (a.tokens or b.tokens):
                return Levenshtein.distance(a.tokens, b.tokens) / max(len(a.tokens), len(b.tokens))
            return 0.0

        def children(self, node: _Node) -> list[_Node]:
            return node.children

    distance = APTED(_tree(pred, structure_only), _tree(truth, structure_only), _Costs()).compute_edit_distance()
    return 1.0 - float(distance) / size
