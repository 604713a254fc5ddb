"""OmniDocBench v1.5's end-to-end metrics (upstream's dataset/end2end_dataset.py and metrics/cal_metric.py at
523fd1d, re-implemented) as the ``omnidoc15_*`` family: per page, and over a set as upstream aggregates them.

Per page, as v1.0: edit distances are Σ edits / Σ longer length over the page's matched groups, TEDS the mean over
its truth tables; over a set, edit distances are the mean of the page values (upstream's ``ALL_page_avg``) and TEDS
the mean over all tables. What v1.5 adds: a truth formula matched to a prediction's text is scored as text (the
formula read as Unicode by pylatexenc against the text), a predicted LaTeX table scores TEDS 0 and edit distance 1
(upstream no longer converts it), and a predicted table no truth table took offers its cells to the text match.

Per page, formulas are scored by normalised edit distance (``omnidoc15_formula_edit``, named so, runs anywhere)
and, asked for by name where the LaTeX toolchain is installed, by CDM (``omnidoc15_formula_cdm``: the mean over
the page's formulas; :func:`page_cdm` renders a page once per output and truth, for the metric, the score row's
units and the headline alike). The headline Overall = ((1 − text edit)·100 + table TEDS + formula CDM) / 3 takes
formula CDM over the set's formulas (:func:`overall`); without the toolchain it is not computed
(:data:`OVERALL_WHY`) rather than computed with the edit distance in CDM's place."""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from typing import NamedTuple

from quantgate.schema.omnidoc import PageScore, SetScores, TruthPage
from quantgate.scoring.omnidoc import categories as cat
from quantgate.scoring.omnidoc import hybrid
from quantgate.scoring.omnidoc.extract import Block

TEXT, FORMULA, TEDS, READING = ("omnidoc15_text_edit", "omnidoc15_formula_edit", "omnidoc15_table_teds",
                                "omnidoc15_reading_order")
TEDS_STRUCT, TABLE_EDIT = "omnidoc15_table_teds_struct", "omnidoc15_table_edit"
METRICS = (TEXT, FORMULA, TEDS, READING)  # the registered, per-page ones a family's name expands to
# formula CDM, per page: registered too, asked for by name (schema.metrics.BY_NAME_ONLY: it renders, ~1 s a formula)
CDM = "omnidoc15_formula_cdm"
VALUES = (*METRICS, TEDS_STRUCT, TABLE_EDIT)  # also computed, printed as upstream's whole-set table has them
PER_TABLE = (TEDS, TEDS_STRUCT)
OVERALL_WHY = ("Overall = ((1 - text edit)*100 + table TEDS + formula CDM) / 3 is not computed: formula CDM renders "
               "formulas with XeLaTeX and Ghostscript, not installed here (make setup-cdm); omnidoc15_formula_edit "
               "is the edit-distance fallback, not CDM")
_FORMULA_KINDS = ("equation_inline", "equation_isolated", "")


def _edit(pairs: list[tuple[str, str]]) -> float | None:
    """Σ edits / Σ longer length; a pair with both sides empty counts nothing (upstream's NaN, skipped by the sum)."""
    from rapidfuzz.distance import Levenshtein

    edits = longest = 0
    for gt, pred in pairs:
        if gt or pred:
            edits += Levenshtein.distance(pred, gt)
            longest += max(len(pred), len(gt))
    return edits / longest if longest else None


def _as_text(entry: hybrid.Entry) -> tuple[str, str]:
    """A formula matched to text: its LaTeX read as Unicode, compared by letters, digits and CJK (the raw reading
    where that leaves nothing, as upstream falls back to it)."""
    from quantgate.scoring.omnidoc.normalize import _latex_to_text

    gt = _latex_to_text().latex_to_text(entry.gt)
    return clean_or(hybrid.clean_string(gt), gt), clean_or(entry.norm_pred, entry.pred)


def clean_or(norm: str, raw: str) -> str:
    return norm or raw


def _reading_order(entries: list[hybrid.Entry]) -> float | None:
    """The truth orders of the matched text groups, read in the prediction's order, against all of them sorted. A
    group whose only truth block has no order takes no part; blocks without one are dropped from the lists."""
    from rapidfuzz.distance import Levenshtein

    placed = [e for e in entries if e.orders != (None,)]
    as_read = [o for e in sorted((e for e in placed if e.pred_start is not None), key=lambda e: e.pred_start or 0)
               for o in e.orders if o]
    listed = sorted(o for e in placed for o in e.orders if o)
    if not as_read and not listed:
        return None
    return Levenshtein.distance(listed, as_read) / max(len(listed), len(as_read))


def _tables(page: TruthPage, blocks: list[Block], values: dict, tables: dict, notes: list) -> list[Block]:
    """Table values as v1.0 computes them for HTML; a page predicted mostly in LaTeX tables scores every truth
    table TEDS 0 and edit distance 1. Returns the predicted HTML tables no truth table took (their cells go to
    the text match)."""
    from quantgate.scoring.omnidoc.match import assignment_match
    from quantgate.scoring.omnidoc.normalize import table_html
    from quantgate.scoring.omnidoc.page import _table, _truth_in_order

    truth = [b for b in _truth_in_order(page, (cat.TABLE,)) if b.html]
    if not truth:
        return []
    html = [b for b in blocks if b.kind == "html_table"]
    latex = [b for b in blocks if b.kind == "latex_table"]
    if len(latex) > len(html):
        notes.append(f"{len(latex)} LaTeX table(s) predicted: TEDS 0 and edit distance 1 each, as v1.5 scores them")
        tables[TEDS] = tables[TEDS_STRUCT] = [0.0] * len(truth)
        values[TEDS] = values[TEDS_STRUCT] = 0.0
        values[TABLE_EDIT] = 1.0 if any(table_html(b.html or "") for b in truth) else None
        return []
    v10: dict = {}
    v10_tables: dict = {}
    _table(page, html, v10, v10_tables, notes)
    for ours, theirs in ((TEDS, "omnidoc_table_teds"), (TEDS_STRUCT, "omnidoc_table_teds_struct"),
                         (TABLE_EDIT, "omnidoc_table_edit")):
        values[ours] = v10.get(theirs)
        if theirs in v10_tables:
            tables[ours] = v10_tables[theirs]
    took = {j for _, pj in assignment_match([b.html or "" for b in truth], [b.content for b in html]) for j in pj}
    return [b for j, b in enumerate(html) if j not in took]


def _match(prediction: str, truth: TruthPage) -> tuple[list[hybrid.Entry], dict, dict, list[str]]:
    """The page's matched groups, with its table values and notes."""
    blocks = hybrid.split_blocks(prediction or "")
    values: dict[str, float | None] = dict.fromkeys(VALUES)
    tables: dict[str, list[float]] = {}
    notes = [f"truth block skipped ({s.category}, anno_id {s.anno_id}): {s.reason}" for s in truth.skipped]
    left = _tables(truth, blocks, values, tables, notes)
    cells = [Block("text", b.start, c) for b in left for c in hybrid.table_cells(b.content)]
    return hybrid.match(hybrid.truth_side(truth), hybrid.prediction_side(blocks, cells)), values, tables, notes


def formula_pairs(prediction: str, truth: TruthPage) -> list[tuple[str, str]]:
    """The display formulas scored as formulas (truth, prediction), as written: what upstream's CDM renders."""
    entries = _match(prediction, truth)[0]
    return [(e.gt, e.pred) for e in entries if e.category == cat.FORMULA and e.pred_kind in _FORMULA_KINDS]


def score_page(prediction: str, truth: TruthPage) -> PageScore:
    """OmniDocBench v1.5's values for one predicted page (markdown) against its truth."""
    entries, values, tables, notes = _match(prediction, truth)
    text = [e for e in entries if e.category in cat.TEXT_MATCHED and e.category not in cat.TEXT_NOT_SCORED]
    formulas = [e for e in entries if e.category == cat.FORMULA]
    values[READING] = _reading_order(text) if text else None
    text_pairs = [(clean_or(e.norm_gt, e.gt), clean_or(e.norm_pred, e.pred)) for e in text]
    formula_pairs = []
    for k, e in enumerate(formulas):
        if e.pred_kind in _FORMULA_KINDS:
            formula_pairs.append((clean_or(e.norm_gt, e.gt), clean_or(e.norm_pred, e.pred)))
            continue
        try:
            text_pairs.append(_as_text(e))
        except Exception as err:  # noqa: BLE001 -- pylatexenc's parser raises many kinds; the pair is left out, said so
            notes.append(f"truth formula {k + 1} matched to text could not be read as text by pylatexenc "
                         f"({type(err).__name__}: {err}); left out of {TEXT}")
    values[TEXT] = _edit(text_pairs)
    values[FORMULA] = _edit(formula_pairs)
    return PageScore(values=values, tables=tables, notes=notes)


def aggregate(pages: list[PageScore]) -> dict[str, float | None]:
    """Whole-set values as upstream's v1.5 reports them: page mean for edit distances, table mean for TEDS."""
    out: dict[str, float | None] = {}
    for name in VALUES:
        units = ([v for p in pages for v in p.tables.get(name, [])] if name in PER_TABLE
                 else [v for p in pages if (v := p.values.get(name)) is not None])
        out[name] = sum(units) / len(units) if units else None
    return out


class Overall(NamedTuple):
    value: float | None  # on upstream's 0-100 scale
    formula_cdm: float | None  # the mean over the set's formulas
    formulas: int
    why: str | None  # why value is None
    notes: list[str]


def overall(set_values: dict[str, float | None], preds: dict[str, str | None],
            truths: dict[str, str | None]) -> Overall:
    """OmniDocBench v1.5's headline over the pages with truth: their formula CDM (rendered; the pairs v1.5's match
    scores as formulas) with the set's text edit distance and table TEDS. Not computed, and said why, where the
    toolchain is missing or a part has no value on these pages."""
    from quantgate.scoring.omnidoc import cdm, cdm_render

    missing = cdm_render.missing_packages()
    if missing:
        return Overall(None, None, 0, f"{OVERALL_WHY} (missing: {' '.join(missing)})", [])
    # page by page through the cache the per-page metric fills: a page scored on omnidoc15_formula_cdm too
    # renders once
    pages = {pid: page_cdm(preds.get(pid) or "", t) for pid, t in truths.items() if t is not None}
    values = [v for vs, _ in pages.values() for v in vs]
    whole = sum(values) / len(values) if values else None  # upstream's mean over formulas
    value = cdm.overall(set_values.get(TEXT), set_values.get(TEDS), whole)
    why = None if value is not None else ("Overall is not computed: these pages have no matched text, no truth "
                                          "table or no display formula, and it needs all three")
    return Overall(value, whole, len(values), why, [f"{pid}: {n}" for pid, (_, ns) in pages.items() for n in ns])


@lru_cache(maxsize=4096)
def page_cdm(prediction: str, truth_text: str) -> tuple[tuple[float, ...], tuple[str, ...]]:
    """Each of the page's display formulas' CDM (the pairs v1.5's match scores as formulas) and the notes on those
    that did not render. Cached on (output, truth), as :func:`_scores` is: rendering costs ~1 s a formula, and the
    metric, the row's units and ``score``'s Overall each ask. Raises ``CdmToolchainMissing`` (an InputError)
    without the toolchain (never cached, so installing it mid-process is seen)."""
    from quantgate.scoring.omnidoc import cdm
    from quantgate.scoring.omnidoc.truth import parse_truth

    values, notes = cdm.page_cdm(formula_pairs(prediction, parse_truth(truth_text, image="page",
                                                                      source="page truth")))
    return tuple(values), tuple(notes)


@lru_cache(maxsize=64)
def _scores(prediction: str, truth_text: str) -> PageScore:
    from quantgate.scoring.omnidoc.truth import parse_truth

    return score_page(prediction, parse_truth(truth_text, image="page", source="page truth"))


def metric_fn(name: str) -> Callable[[str, str], float | None]:
    """The metric as the registry calls it, ``fn(prediction, truth_text)``; one page's match serves all four, one
    page's rendering its formula CDM (None on a page with no display formula scored as a formula)."""
    if name not in (*METRICS, CDM):
        raise KeyError(f"{name!r} is not an OmniDocBench v1.5 metric; known: {', '.join((*METRICS, CDM))}")

    def fn(prediction: str, truth_text: str) -> float | None:
        if name == CDM:
            values = page_cdm(prediction or "", truth_text)[0]
            return sum(values) / len(values) if values else None
        return _scores(prediction or "", truth_text).values[name]

    fn.__name__ = name
    return fn


def set_scores(preds: dict[str, str | None], truths: dict[str, str | None]) -> SetScores:
    """Whole-set values over the pages with truth, how many pages each was scored on, and every page's notes."""
    pages = {pid: _scores(preds.get(pid) or "", t) for pid, t in truths.items() if t is not None}
    scored = list(pages.values())
    return SetScores(set_values=aggregate(scored),
                     pages_scored={n: sum(1 for p in scored if p.values.get(n) is not None) for n in VALUES},
                     pages_with_truth=len(pages), notes=[f"{pid}: {n}" for pid, s in pages.items() for n in s.notes])
