"""ParseBench's chart rule (``chart_data_point``): a chart read into a table passes when some table cell holds the
value and every label is associated with that cell — in its row or column, in the headers over or beside it, or
(for a label found nowhere in the table) in the chart's title just before the table. Upstream's
``evaluation/metrics/parse/rules_chart.py`` (``ChartDataPointRule``) decides it; this follows it, number reading
included (currency, thousands separators, k/M/B suffixes, a comma read both as thousands and as decimal mark).

Fuzzy comparisons are rapidfuzz's ``ratio`` / ``partial_ratio``, as upstream's; the tables are
``chart_tables``'. Written by hand because no installable package runs upstream's rules on this Python."""

from __future__ import annotations

import re
from collections.abc import Sequence
from statistics import fmean
from typing import Literal

from pydantic import Field
from rapidfuzz import fuzz

from quantgate.scoring.parsebench import text as T
from quantgate.scoring.parsebench.chart_tables import ChartTable, chart_tables
from quantgate.scoring.parsebench.rules import _Rule

TITLE_SIMILARITY = 0.6  # a label against a bold/heading title: whole-string ratio, so one word of a long title fails


class ChartPoint(_Rule):
    type: Literal["chart_data_point"]
    value: str | int | float | None = None
    labels: list[str] = Field(default_factory=list)
    normalize_numbers: bool = True
    relative_tolerance: float = 0.01


def wanted_value(rule: ChartPoint) -> str:
    return T.normalize(str(rule.value))


def wanted_labels(rule: ChartPoint) -> list[str]:
    return [T.normalize(re.sub(r"<br\s*/?>", " ", str(label))) for label in rule.labels]


# --- numbers ----------------------------------------------------------------------------------------------------

_SCALES = ((r"(?i)\s*(trillion|trill|trn)$", 1e12), (r"(?i)\s*(billion|bill|bln)$", 1e9),
           (r"(?i)\s*(million|mill|mln)$", 1e6), (r"(?i)\s*t$", 1e12), (r"(?i)\s*g$", 1e9), (r"(?i)\s*b$", 1e9),
           (r"(?i)\s*m$", 1e6), (r"(?i)\s*k$", 1e3))


def number(text: str) -> float | None:
    """A written number's value ("$39.2M" → 39200000.0, "45%" → 45.0, "6 888" → 6888.0), or None."""
    if not text:
        return None
    s = re.sub(r"\s*[$€£¥]$", "", re.sub(r"^[$€£¥]\s*", "", text.strip()))
    s = re.sub(r"^[~≈]\s*", "", s).rstrip("%").replace(",", "").replace(" ", "")
    scale = 1.0
    for pattern, factor in _SCALES:
        if re.search(pattern, s):
            s, scale = re.sub(pattern, "", s), factor
            break
    try:
        return float(s) * scale
    except ValueError:
        return None


def readings(text: str) -> list[float]:
    """Every value the text may mean: a comma is a thousands separator, or else a decimal mark."""
    out = [v] if (v := number(text)) is not None else []
    if "," in text and (v := number(text.replace(",", "."))) is not None and v not in out:
        out.append(v)
    return out


def same_number(a: str, b: str, tolerance: float) -> bool:
    """Some reading of each within the relative tolerance (an absolute one when either is 0)."""
    for x in readings(a):
        for y in readings(b):
            if x == 0 and y == 0:
                return True
            if x == 0 or y == 0:
                if abs(x - y) < tolerance:
                    return True
                continue
            if abs(x - y) / max(abs(x), abs(y)) <= tolerance:
                return True
    return False


def numeric_parts(value: str) -> list[str]:
    return re.findall(r"[-+]?\d(?:,\d{3}|\d)*\.?\d*%?", value)


# --- the rule ---------------------------------------------------------------------------------------------------

def _alnum(text: str) -> str:
    return re.sub(r"[^a-z0-9]", "", text)


def _needed(max_diffs: float, text: str) -> float:
    return max(0.5, 1.0 - (max_diffs / max(len(text), 1)))


def _label_in(label: str, cell: str, max_diffs: float) -> bool:
    if fuzz.partial_ratio(label, cell) / 100.0 >= _needed(max_diffs, label):
        return True
    bare_label, bare_cell = _alnum(label), _alnum(cell)
    return bool(bare_label and bare_cell and bare_label in bare_cell)


def _value_cells(t: ChartTable, value: str, rule: ChartPoint) -> list[tuple[int, int]]:
    norm = [[T.normalize(c) for c in row] for row in t.cells]
    need = _needed(rule.max_diffs, value)
    found = [(r, c) for r, row in enumerate(norm) for c, cell in enumerate(row)
             if fuzz.ratio(value, cell) / 100.0 >= need
             or (rule.normalize_numbers and same_number(value, cell, rule.relative_tolerance))]
    parts = numeric_parts(value)
    if found or not rule.normalize_numbers or len(parts) < 2:
        return found
    # a composite value ("25 (13.0%)") written across adjacent cells of one row
    return [(r, c) for r, row in enumerate(norm) for c in range(len(row))
            if c + len(parts) <= len(row)
            and all(same_number(p, row[c + k], rule.relative_tolerance) for k, p in enumerate(parts))]


def _associated(t: ChartTable, at: tuple[int, int], label: str, max_diffs: float) -> bool:
    r, c = at
    near = [cell for j, cell in enumerate(t.cells[r]) if j != c] + [row[c] for i, row in enumerate(t.cells) if i != r]
    near += t.col_headers.get(c, []) + t.row_headers.get(r, [])
    return any(_label_in(label, T.normalize(x), max_diffs) for x in near)


def _anywhere(t: ChartTable, label: str, max_diffs: float) -> bool:
    every = [cell for row in t.cells for cell in row]
    every += [x for h in (t.col_headers, t.row_headers) for xs in h.values() for x in xs]
    return any(_label_in(label, T.normalize(x), max_diffs) for x in every)


_FORMATTED = (re.compile(r"^#{1,6}\s+(.+?)$", re.MULTILINE), re.compile(r"\*\*(.+?)\*\*"),
              re.compile(r"<h[1-6][^>]*>(.+?)</h[1-6]>", re.IGNORECASE),
              re.compile(r"<(?:strong|b)[^>]*>(.+?)</(?:strong|b)>", re.IGNORECASE))


def _titled(context: str, label: str) -> bool:
    """The label is (most of) a bold or heading text of the context."""
    label = T.normalize(label)
    titles = {T.normalize(m.group(1)) for p in _FORMATTED for m in p.finditer(context)}
    return any(fuzz.ratio(label, f) / 100.0 >= TITLE_SIMILARITY
               or (_alnum(label) and _alnum(f) and fuzz.ratio(_alnum(label), _alnum(f)) / 100.0 >= TITLE_SIMILARITY)
               for f in titles)


def _in_heading_or_caption(context: str, label: str, max_diffs: float) -> bool:
    label = T.normalize(label)
    found = [m.group(1) for m in re.finditer(r"<caption[^>]*>(.+?)</caption>", context, re.IGNORECASE)]
    found += [m.group(1) for m in re.finditer(r"^#{1,6}\s+(.+?)$", context, re.MULTILINE)]
    return any(_label_in(label, T.normalize(x), max_diffs) for x in found)


def point_found(rule: ChartPoint, markdown: str) -> bool:
    value, labels = wanted_value(rule), wanted_labels(rule)
    for t in chart_tables(markdown):
        context = t.context.strip()
        for at in _value_cells(t, value, rule):
            if all(_associated(t, at, label, rule.max_diffs) for label in labels):
                return True
            if context and all(_associated(t, at, label, rule.max_diffs)
                               or (not _anywhere(t, label, rule.max_diffs) and _titled(context, label))
                               or _in_heading_or_caption(context, label, rule.max_diffs) for label in labels):
                return True
    return False


def problem(rule: ChartPoint) -> str | None:
    """Why upstream would refuse to build this rule (it raises), or None."""
    if not wanted_value(rule):
        return "value must keep some text after normalization"
    return None if rule.labels else "labels must name at least one label"


def score(rule: ChartPoint, markdown: str) -> float:
    """1 when the point is found, else 0; a table whose span is not a number fails the rule, as upstream's
    evaluator counts a rule that raised."""
    try:
        return float(point_found(rule, markdown))
    except ValueError:
        return 0.0


def page_score(rules: Sequence[ChartPoint], markdown: str) -> float | None:
    """The page's chart score: its chart rules' pass rate (upstream's ``rule_chart_data_point_pass_rate``; an
    empty output fails every rule); None without chart rules."""
    if not rules:
        return None
    return fmean(score(r, markdown) if markdown else 0.0 for r in rules)
