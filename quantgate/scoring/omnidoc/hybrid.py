"""OmniDocBench v1.5's hybrid matching (the behaviour of upstream's utils/match_quick.py, match.py, extract.py and
data_preprocess.py at 523fd1d, re-implemented): text blocks and display formulas of the truth are matched
against one mixed list of the prediction's text blocks, display and inline formulas, and the cells of predicted
tables no truth table took — so a formula written as Unicode text, or a text block written as a formula, is
matched instead of scored as missing.

What v1.5 changes from v1.0 (``quantgate.scoring.omnidoc`` keeps v1.0): the page is not shortened at runs of
one symbol, a display formula keeps its inner spaces and its normalisation also drops ``$$``, ``\\left``,
``\\right`` and ``\\displaystyle``; a single-column ``array`` is split into one formula per line, in truth and
prediction; truth blocks outside the text score (headers, captions, …) first take the predictions within 0.25
of them out of the match; leftovers pair by normalised edit distance; an unmatched truth block counts once.

Upstream's quirks that move its numbers are kept, because the v1.5 values were computed with them: a block's
order and a prediction's kind are looked up by its index among the non-empty blocks in the list that still
holds the empty ones (``Side.items``), and inline formulas sort after every other prediction."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

from quantgate.schema.omnidoc import TruthPage
from quantgate.scoring.omnidoc import categories as cat
from quantgate.scoring.omnidoc.extract import (
    _MATH,
    Block,
    _blank,
    _code,
    _html_tables,
    _latex_tables,
    _paragraphs,
)
from quantgate.scoring.omnidoc.match import ned, quick_match
from quantgate.scoring.omnidoc.normalize import (
    _BRACKETED,
    _FORMULA_DROPPED,
    _FORMULA_WORDS,
    _IMAGE,
    _NOT_WORD,
    _WRITTEN_ESCAPES,
    text_key,
)
from quantgate.scoring.omnidoc.page import _truth_in_order
from quantgate.scoring.omnidoc.pipes import pipe_tables

# --- the page, split as v1.5 splits it ---------------------------------------------------------------

_FENCES_OPEN = re.compile(r"^```(?:markdown|html|latex)\n?", re.M)
_FENCE_CLOSE = re.compile(r"```\n?$", re.M)
_RUNS = ((re.compile(r"_{4,}"), "____"), (re.compile(r" {4,}"), "    "))
_DOLLAR = re.compile(r"\$\$(.*?)\$\$|\$(.*?)\$|\\\((.*?)\\\)", re.S)


def prepare_page(markdown: str) -> str:
    text = _IMAGE.sub("", markdown)
    text = _FENCE_CLOSE.sub("", _FENCES_OPEN.sub("", text))
    for pattern, repl in _RUNS:
        text = pattern.sub(repl, text)
    for tag in ("<html>", "</html>", "<body>", "</body>"):
        text = text.replace(tag, "")
    return text


def _formulas(text: str) -> tuple[str, list[Block]]:
    """As v1.0's, but a formula's lines are joined by spaces instead of losing all whitespace."""
    blocks, taken = [], []
    for m in _MATH.finditer(text):
        line = " ".join(m.group(0).strip().split("\n"))
        inner = _DOLLAR.search(line)
        if inner is None:  # \[…\]
            blocks.append(Block("formula", m.start(), line))
            taken.append(m.span())
        elif inner.group(1):  # $$…$$ (non-empty)
            blocks.append(Block("formula", m.start(), _DOLLAR.sub(lambda d: "\\[" + (d.group(1) or "") + "\\]", line)))
            taken.append(m.span())
        else:
            body = _DOLLAR.sub(lambda d: "\\[" + (d.group(2) or "") + (d.group(3) or "") + "\\]", line)
            blocks.append(Block("formula", m.start(), body, inline=True))
    return _blank(text, taken), blocks


def split_blocks(markdown: str) -> list[Block]:
    text = prepare_page(markdown)
    blocks: list[Block] = []
    for step in (_latex_tables, _html_tables, _formulas, pipe_tables, _code):
        text, found = step(text)
        blocks += found
    blocks += _paragraphs(text)
    return sorted(blocks, key=lambda b: b.start)


# --- normalisation -----------------------------------------------------------------------------------

_FORMULA_WORDS_15 = (*_FORMULA_WORDS, "$$", "\\left", "\\right", "\\displaystyle", "\\text")


def formula_key(latex: str) -> str:
    text = latex.strip().strip("$").strip("\n")
    m = _BRACKETED.search(text)
    text = m.group(1).strip() if m else text
    for pattern in _FORMULA_DROPPED:
        text = pattern.sub("", text)
    text = text.strip(".")
    for word in _FORMULA_WORDS_15:
        text = text.replace(word, "")
    return text.lower()


def clean_string(text: str) -> str:
    """Letters, digits and CJK only, with no reading of inline math (what a formula read as text is scored by)."""
    for s in _WRITTEN_ESCAPES:
        text = text.replace(s, "")
    return _NOT_WORD.sub("", text)


# --- single-column arrays, one formula per line --------------------------------------------------------

_ARRAY = re.compile(r"\\begin\{array\}\{(?P<spec>[^}]*)\}(?P<body>.*?)\\end\{array\}", re.S)


def _one_column(spec: str) -> bool:
    spec = re.sub(r"!{[^}]*}", "", re.sub(r"@{[^}]*}", "", re.sub(r"\s+|\|", "", spec)))
    return spec in ("l", "c", "r")


def _array_lines(latex: str) -> list[tuple[int, str]] | None:
    """(offset in ``latex``, line) of a single-column array's lines; None when it is not one."""
    m = _ARRAY.search(latex) if "\\begin{array" in latex else None
    if m is None or not _one_column(m.group("spec")):
        return None
    body, out, cursor = m.group("body"), [], 0
    for line in (s.strip() for s in re.split(r"\\\\", body)):
        if line:
            at = body.find(line, cursor)
            at = cursor if at < 0 else at
            cursor = at + len(line)
            out.append((m.start("body") + at, line))
    return out


# --- the two sides of the match --------------------------------------------------------------------


@dataclass(frozen=True)
class Item:
    raw: str
    key: str
    kind: str  # truth: its category; prediction: upstream's kind (text_block, equation_isolated, equation_inline, text_all)
    order: float | None = None  # truth: its reading order
    start: int | None = None  # prediction: its offset in the page


@dataclass(frozen=True)
class Side:
    """The non-empty items (``kept``, what is matched) and the list that still holds the empty ones (``items``):
    upstream reads a kept item's order and kind at its kept index in ``items``."""

    kept: list[Item]
    items: list[Item]

    @classmethod
    def of(cls, items: list[Item]) -> Side:
        return cls([it for it in items if it.raw and it.key], items)

    def looked_up(self, i: int) -> Item:
        return self.items[i]

    def part(self, indices: list[int]) -> Side:
        """The kept items at ``indices``, each with the item upstream looks up for it."""
        return Side([self.kept[i] for i in indices], [self.items[i] for i in indices])


def truth_side(page: TruthPage) -> Side:
    items = []
    for b in _truth_in_order(page, (*cat.TEXT_MATCHED, cat.FORMULA)):
        if b.category != cat.FORMULA:
            items.append(Item(b.text or "", text_key(b.text or ""), b.category, b.order))
            continue
        lines = _array_lines(b.latex or "")
        if lines is None:
            items.append(Item(b.latex or "", formula_key(b.latex or ""), b.category, b.order))
        for k, (_, line) in enumerate(lines or [], start=1):
            latex = f"\\[{line}\\]"
            items.append(Item(latex, formula_key(latex), b.category, round(float(b.order or 0) + k / 10, 1)))
    return Side.of(items)


def table_cells(html: str) -> list[str]:
    """A predicted table no truth table took, as v1.5 offers it to the text match: the text of each ``<td>`` that
    holds only text (``$\\cdot$`` dropped)."""
    from bs4 import BeautifulSoup

    return [re.sub(r"\$\\cdot\$", "", td.string).strip()
            for td in BeautifulSoup(html, "html.parser").find_all("td") if td.string]


def prediction_side(blocks: list[Block], cell_blocks: list[Block]) -> Side:
    """The prediction's text and formula blocks grouped by kind in the order the kinds first appear on the page
    (upstream's dict of categories), then the cells; sorted by offset, inline formulas last."""
    ordered = sorted(blocks, key=lambda b: b.start)
    kinds = list(dict.fromkeys(b.kind for b in ordered))
    mix = [(b, "text_block" if b.kind == "text" else "equation_inline" if b.inline else "equation_isolated")
           for k in kinds if k in ("text", "formula") for b in ordered if b.kind == k]
    mix += [(b, "text_all") for b in cell_blocks]
    mix.sort(key=lambda t: (t[0].inline, t[0].start))
    items = []
    for b, kind in mix:
        lines = _array_lines(b.content) if b.kind == "formula" else None
        if lines is None:
            key = formula_key(b.content) if b.kind == "formula" else text_key(b.content)
            items.append(Item(b.content, key, kind, start=b.start))
            continue
        for offset, line in lines:
            latex = f"\\[{line}\\]"
            items.append(Item(latex, formula_key(latex), kind, start=b.start + offset))
    return Side.of(items)


# --- the match -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Entry:
    """One matched group: its truth category, the prediction's kind ('' for none), the strings compared and what
    the reading order reads (the truth blocks' orders, the first prediction's offset)."""

    category: str
    pred_kind: str
    gt: str
    pred: str
    norm_gt: str
    norm_pred: str
    orders: tuple[float | None, ...]
    pred_start: int | None


def _as_array(raws: list[str]) -> str:
    return "\\begin{array}{l} " + " \\\\ ".join("{" + r.strip("$").strip("\n") + "}" for r in raws) + " \\end{array}"


def _entry(truth: Side, pred: Side, ti: list[int], pj: list[int]) -> Entry:
    gk, pk = truth.kept, pred.kept
    category = Counter(gk[i].kind for i in ti).most_common(1)[0][0]
    pred_kind = pred.looked_up(pj[0]).kind if pj else ""
    gt = _as_array([gk[i].raw for i in ti]) if category == cat.FORMULA and len(ti) > 1 else "".join(gk[i].raw for i in ti)
    pr = _as_array([pk[j].raw for j in pj]) if "equation" in pred_kind and len(pj) > 1 else "".join(pk[j].raw for j in pj)
    return Entry(category, pred_kind, gt, pr, "".join(gk[i].key for i in ti), "".join(pk[j].key for j in pj),
                 tuple(truth.looked_up(i).order or None for i in ti), pred.looked_up(pj[0]).start if pj else None)


def match(truth: Side, pred: Side) -> list[Entry]:
    """The page's matched truth groups (predictions matched to no truth are left out: nothing scores them)."""
    gk, pk = truth.kept, pred.kept
    if not gk:
        return []
    if not pk:
        return [_entry(truth, pred, [i], []) for i in range(len(gk))]
    if len(gk) == 1 and len(pk) == 1:
        return [_entry(truth, pred, [0], [0])]
    outside = [i for i, g in enumerate(gk) if g.kind in cat.TEXT_NOT_SCORED]
    # a prediction within 0.25 of a truth block outside the score belongs to it and leaves the match
    taken = {j for j, p in enumerate(pk) if any(ned(gk[i].key, p.key) < 0.25 for i in outside)}
    rows = [i for i in range(len(gk)) if i not in outside]
    cols = [j for j in range(len(pk)) if j not in taken]
    if not rows:
        return []
    sub_truth, sub_pred = truth.part(rows), pred.part(cols)
    if not cols:
        return [_entry(sub_truth, sub_pred, [k], []) for k in range(len(rows))]
    pairs = quick_match([g.key for g in sub_truth.kept], [p.key for p in sub_pred.kept], v15=True)
    return [_entry(sub_truth, sub_pred, list(ti), list(pj)) for ti, pj in pairs if ti]
