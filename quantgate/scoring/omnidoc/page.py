"""OmniDocBench's end-to-end metrics for one page, and over a set of pages as upstream aggregates them
(the behaviour of upstream's dataset/end2end_dataset.py and metrics/cal_metric.py at 24e6428,
re-implemented).

Per page: the edit distances are Σ edits / Σ longer length over the page's matched pairs (upstream's
per-page value); TEDS is the mean over the page's truth tables. Over a set: edit distances are the mean of
the page values (upstream's ``ALL_page_avg``), TEDS the mean over all tables. A page with nothing of a
category in its truth is not scored on that category's metrics (None)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from quantgate.schema.omnidoc import PageScore, TruthBlock, TruthPage
from quantgate.scoring.omnidoc import categories as cat
from quantgate.scoring.omnidoc.extract import Block, split_blocks
from quantgate.scoring.omnidoc.match import Pair, assignment_match, quick_match
from quantgate.scoring.omnidoc.normalize import formula_key, table_html, text_key
from quantgate.scoring.omnidoc.teds import TableError, teds


@dataclass(frozen=True)
class OmniMetric:
    name: str
    higher_is_better: bool
    per: str  # "page": the set value is the mean of page values; "table": the mean over tables
    doc: str


METRICS: dict[str, OmniMetric] = {m.name: m for m in (
    OmniMetric("omnidoc_text_edit", False, "page",
               "OmniDocBench text-block edit distance: matched text blocks, letters/digits/CJK only"),
    OmniMetric("omnidoc_formula_edit", False, "page",
               "OmniDocBench display-formula edit distance on normalised LaTeX"),
    OmniMetric("omnidoc_table_teds", True, "table", "OmniDocBench table TEDS (structure and cell text)"),
    OmniMetric("omnidoc_table_teds_struct", True, "table", "OmniDocBench table TEDS, structure only"),
    OmniMetric("omnidoc_table_edit", False, "page", "OmniDocBench table edit distance on normalised HTML"),
    OmniMetric("omnidoc_reading_order_edit", False, "page",
               "OmniDocBench reading-order edit distance over the matched text blocks' truth order"),
)}


@dataclass
class _Lines:
    """One category's non-empty blocks: raw content, the normalised form compared, and where they sit."""

    raw: list[str] = field(default_factory=list)
    key: list[str] = field(default_factory=list)
    items: list = field(default_factory=list)  # TruthBlock or Block, aligned with raw/key


def _lines(items, content, normalise) -> _Lines:
    out = _Lines()
    for it in items:
        raw = content(it)
        key = normalise(raw)
        if raw and key:  # upstream drops blocks that are empty before or after normalising
            out.raw.append(raw)
            out.key.append(key)
            out.items.append(it)
    return out


def _truth_in_order(page: TruthPage, categories) -> list[TruthBlock]:
    rank = {c: k for k, c in enumerate(categories)}
    chosen = [(b.order or 0, rank[b.category], k, b) for k, b in enumerate(page.blocks) if b.category in rank]
    return [b for *_, b in sorted(chosen, key=lambda t: t[:3])]


def _edit_sums(pairs: list[Pair], truth: _Lines, pred: _Lines) -> tuple[int, int]:
    from rapidfuzz.distance import Levenshtein

    edits = longest = 0
    for ti, pj in pairs:
        t, p = "".join(truth.key[i] for i in ti), "".join(pred.key[j] for j in pj)
        edits += Levenshtein.distance(p, t)
        longest += max(len(p), len(t))
    return edits, longest


def _ratio(edits: int, longest: int) -> float | None:
    return edits / longest if longest else None


def _scored_category(truth: _Lines, indices: tuple[int, ...]) -> str:
    """The category a pair counts as: the most common among its truth blocks, preferring scored ones."""
    cats = [truth.items[i].category for i in indices]
    scored = [c for c in cats if c not in cat.TEXT_NOT_SCORED]
    return Counter(scored or cats).most_common(1)[0][0] if cats else ""


def _text(page: TruthPage, blocks: list[Block], values: dict) -> None:
    from rapidfuzz.distance import Levenshtein

    truth_blocks = _truth_in_order(page, cat.TEXT_MATCHED)
    if not truth_blocks:
        return
    truth = _lines(truth_blocks, lambda b: b.text, text_key)
    pred = _lines([b for b in blocks if b.kind == "text"], lambda b: b.content, text_key)
    pairs = [p for p in quick_match(truth.key, pred.key) if _scored_category(truth, p[0]) not in cat.TEXT_NOT_SCORED]
    values["omnidoc_text_edit"] = _ratio(*_edit_sums(pairs, truth, pred))

    # Reading order: the truth orders of the matched blocks, read in the prediction's order, against
    # all the scored truth blocks' orders sorted (an unmatched block counted as often as it is listed).
    def truth_orders(ti: tuple[int, ...]) -> list[int]:
        return [o for o in (truth.items[i].order for i in ti) if o]

    listed = sorted(o for ti, _ in pairs for o in truth_orders(ti))
    matched = sorted(((pred.items[pj[0]].start, ti) for ti, pj in pairs if ti and pj), key=lambda t: t[0])
    as_read = [o for _, ti in matched for o in truth_orders(ti)]
    if pairs and (listed or as_read):
        values["omnidoc_reading_order_edit"] = Levenshtein.distance(listed, as_read) / max(len(listed), len(as_read))


def _formula(page: TruthPage, blocks: list[Block], values: dict) -> None:
    truth_blocks = _truth_in_order(page, (cat.FORMULA,))
    if not truth_blocks:
        return
    truth = _lines(truth_blocks, lambda b: b.latex, formula_key)
    pred = _lines([b for b in blocks if b.kind == "formula"], lambda b: b.content, formula_key)
    # Predicted formulas without a truth partner are not counted: inline math competes as a candidate.
    pairs = [p for p in quick_match(truth.key, pred.key) if p[0]]
    values["omnidoc_formula_edit"] = _ratio(*_edit_sums(pairs, truth, pred))


def _table(page: TruthPage, blocks: list[Block], values: dict, tables: dict, notes: list) -> None:
    from rapidfuzz.distance import Levenshtein

    truth_blocks = _truth_in_order(page, (cat.TABLE,))
    if not truth_blocks:
        return
    html_tables = [b for b in blocks if b.kind == "html_table"]
    latex_tables = [b for b in blocks if b.kind == "latex_table"]
    # The format the prediction mostly uses is matched; LaTeX is compared as LaTeX (upstream would convert it
    # with LaTeXML, a Perl program quantgate does not run), so its TEDS is 0 as upstream's is when that fails.
    if len(latex_tables) > len(html_tables):
        truth = _lines(truth_blocks, lambda b: b.latex or "", lambda s: s)
        pred = _lines(latex_tables, lambda b: b.content, lambda s: s)
        notes.append(f"{len(latex_tables)} LaTeX table(s) predicted: not converted to HTML, TEDS 0 (docs/metrics.md)")
        pred_norm = [""] * len(pred.raw)
    else:
        truth = _lines(truth_blocks, lambda b: b.html, lambda s: s)
        pred = _lines(html_tables, lambda b: b.content, lambda s: s)
        pred_norm = [table_html(s) for s in pred.raw]
    truth_norm = [table_html(b.html) for b in truth.items]
    pairs = assignment_match(truth.key, pred.key)
    full, struct, edits, longest = [], [], 0, 0
    for (i,), pj in pairs:
        t = truth_norm[i] or truth.raw[i]
        p = (pred_norm[pj[0]] or pred.raw[pj[0]]) if pj else ""
        for out, structure_only in ((full, False), (struct, True)):
            try:
                out.append(teds(p, t, structure_only) if pj and pred_norm[pj[0]] else 0.0)
            except TableError as e:
                out.append(0.0)
                if not structure_only:
                    notes.append(f"predicted table {pj[0] + 1} scored TEDS 0: {e}")
        edits += Levenshtein.distance(p, t)
        longest += max(len(p), len(t))
    if full:
        tables["omnidoc_table_teds"], tables["omnidoc_table_teds_struct"] = full, struct
        values["omnidoc_table_teds"] = sum(full) / len(full)
        values["omnidoc_table_teds_struct"] = sum(struct) / len(struct)
    values["omnidoc_table_edit"] = _ratio(edits, longest)


def score_page(prediction: str, truth: TruthPage) -> PageScore:
    """OmniDocBench's end-to-end values for one predicted page (markdown) against its truth."""
    blocks = split_blocks(prediction or "")
    values: dict[str, float | None] = dict.fromkeys(METRICS)
    tables: dict[str, list[float]] = {}
    notes = [f"truth block skipped ({s.category}, anno_id {s.anno_id}): {s.reason}" for s in truth.skipped]
    _text(truth, blocks, values)
    _formula(truth, blocks, values)
    _table(truth, blocks, values, tables, notes)
    return PageScore(values=values, tables=tables, notes=notes)


def aggregate(pages: list[PageScore]) -> dict[str, float | None]:
    """Whole-set values as upstream reports them: page-mean for edit distances, table-mean for TEDS.
    None for a metric no page was scored on."""
    out: dict[str, float | None] = {}
    for name, m in METRICS.items():
        if m.per == "table":
            units = [v for p in pages for v in p.tables.get(name, [])]
        else:
            units = [p.values[name] for p in pages if p.values.get(name) is not None]
        out[name] = sum(units) / len(units) if units else None
    return out


def scored_counts(pages: list[PageScore]) -> dict[str, int]:
    """Pages scored on each metric (the rest had nothing of its category in their truth)."""
    return {name: sum(1 for p in pages if p.values.get(name) is not None) for name in METRICS}
