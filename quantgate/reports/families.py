"""The report's "Metric families" section: for each benchmark family among the study's metrics (OmniDocBench v1.5
and v1.0, ParseBench, olmOCR-bench's checks) its verdict rows together under the family's name, and beside them
each variant's whole-set headline as that benchmark's own leaderboard prints it, so a reviewer who works in the
benchmark's terms reads its numbers next to the paired verdicts.

The headlines are computed here, at report time, from the score files the gate binds (``summary.inputs.files``:
each is re-hashed and a file that no longer matches is named, not read), not recorded in summary.json. A headline
that is a mean over pages is the mean of the rows' values. One that averages over other units takes the per-unit
numbers each row keeps (``ScoreRow.units``, written by ``scoring.units``): OmniDocBench's table TEDS pools the pages'
TEDS sums over their tables, and ParseBench's leaderboard numbers (each dimension, each rule type) are read off the
rows' units whatever dimensions the scorer has, so a dimension added there shows here with no change. A score file
written before rows kept units gives table TEDS as the mean of the pages' values and no rule-type pass rates, and
says so where it is printed. OmniDocBench v1.5's Overall = ((1 − text edit)·100 + table TEDS + formula CDM) / 3
takes formula CDM pooled over formulas from the rows' units (kept where ``omnidoc15_formula_cdm`` was scored: the
rows then carry the metric, null on a page without a formula); where a variant's rows do not carry it, Overall is labelled not computed, with why, never filled in with the edit
distance."""

from __future__ import annotations

from dataclasses import dataclass
from math import fsum
from pathlib import Path
from statistics import fmean

from quantgate.errors import InputError
from quantgate.io.fileio import sha256_file
from quantgate.io.scores import read_scores
from quantgate.reports.sections import register_section
from quantgate.schema.metrics import METRICS, omnidoc15_overall
from quantgate.schema.scores import ScoreRow
from quantgate.schema.summary import SUMMARY, Summary, load_summary

CDM = "omnidoc15_formula_cdm"
OVERALL = "Overall"
OVERALL_HOW = "((1 - text edit)·100 + table TEDS + formula CDM) / 3, as upstream"
OVERALL_MISSING = ("Overall: not computed for {}: the rows carry no formula CDM (scored without "
                   "omnidoc15_formula_cdm: its LaTeX toolchain was not installed when the pages were scored, or the "
                   "files were scored before quantgate computed it; `make setup-cdm`, then score with "
                   "--metrics omnidoc15,omnidoc15_formula_cdm)")
OVERALL_EMPTY = "Overall: not computed for {}: their pages have no matched text, no truth table or no display formula"
POOLED = "mean over all tables, as upstream"
TEDS_NOTE = ("mean of the pages' TEDS; upstream averages over tables (equal when each page has one): {} scored "
             "before score rows kept each page's tables")
RULES_NOTE = ("{}: scored before score rows kept each rule type's result, so no rule-type pass rates; `quantgate "
              "score --metrics parsebench` on the outputs prints them")


@dataclass(frozen=True)
class Head:
    """A headline the family declares: the metric whose values it averages, its name in upstream's words, a note
    on how it is computed (None: as upstream), and whether it averages over units other than pages (``per_unit``:
    pooled from the rows' units under the metric's name)."""
    metric: str
    name: str
    note: str | None = None
    per_unit: bool = False


@dataclass(frozen=True)
class Family:
    """A benchmark family as the report shows it: its title, the registry's family name (``MetricSpec.family``;
    olmOCR-bench's ``checks`` has none, so it is named), its declared headlines in upstream's order and words, and
    notes printed under it. Every other headline the rows' units carry for the family follows the declared ones."""
    title: str
    family: str | None
    headlines: tuple[Head, ...]
    footer: tuple[str, ...] = ()
    # what to say under the family for variants whose score file keeps no units ({} : their names)
    without_units: str | None = None

    def metrics(self, study_metrics: list[str]) -> list[str]:
        return [m for m in study_metrics if m in METRICS and (
            METRICS[m].family == self.family if self.family else m in (h.metric for h in self.headlines))]


# Upstream's names: OmniDocBench's end-to-end table (text block, display formula, table, reading order; edit
# distances are ALL_page_avg), ParseBench's runner (``avg_<page metric>``, scoring.parsebench.leaderboard's
# DIMENSIONS, kept with the rows' units), olmOCR-bench's pass rate.
FAMILIES = (
    Family("OmniDocBench v1.5", "omnidoc15", (
        Head("omnidoc15_text_edit", "text edit distance"),
        Head("omnidoc15_formula_edit", "formula edit distance", "the edit-distance fallback, not CDM"),
        Head("omnidoc15_table_teds", "table TEDS", POOLED, per_unit=True),
        Head(CDM, "formula CDM", "mean over all formulas, as upstream", per_unit=True),
        Head("omnidoc15_reading_order", "reading order edit distance"))),
    Family("OmniDocBench v1.0", "omnidoc", (
        Head("omnidoc_text_edit", "text edit distance"),
        Head("omnidoc_formula_edit", "formula edit distance"),
        Head("omnidoc_table_teds", "table TEDS", POOLED, per_unit=True),
        Head("omnidoc_table_edit", "table edit distance"),
        Head("omnidoc_reading_order_edit", "reading order edit distance"))),
    Family("ParseBench", "parsebench", (
        Head("parsebench_content", "content_faithfulness"),
        Head("parsebench_formatting", "semantic_formatting"),
        Head("parsebench_charts", "rule_chart_data_point_pass_rate")), without_units=RULES_NOTE),
    Family("olmOCR-bench", None, (Head("checks", "pass rate", "mean of the pages' check pass rates"),)),
)


@dataclass(frozen=True)
class Headline:
    name: str
    metric: str | None  # None: a headline only the rows' units name
    note: str | None
    values: dict[str, tuple[float | None, int]]  # variant → (its value, the pages it is over)


def headline(rows: dict[str, ScoreRow], metric: str) -> tuple[float | None, int]:
    """The whole-set value: the mean over the pages the metric applies to (an empty or missing output is scored,
    as its worst value, by scoring; a null is a page the metric does not apply to)."""
    values = [v for r in rows.values() if (v := r.value(metric)) is not None]
    return (fmean(values) if values else None), len(values)


def keeps_units(rows: dict[str, ScoreRow], family: str | None) -> bool:
    """Whether the score file was written by a version that keeps the family's units: the scorer keys the family
    on every page it scores it on, so a file with no row keyed is older (or never scored the family)."""
    return family is not None and any(family in r.units for r in rows.values())


def pooled(rows: dict[str, ScoreRow], family: str, key: str) -> tuple[float | None, int]:
    """A per-unit headline over the set: Σ the pages' sums / Σ their units, over the pages that keep it."""
    pairs = [pair for r in rows.values() if (pair := r.units.get(family, {}).get(key)) is not None]
    units = fsum(n for _, n in pairs)
    # fsum, as statistics.fmean sums: a per-page number (one unit each) gives fmean's value to the last bit
    return (fsum(s for s, _ in pairs) / units if units else None), len(pairs)


def _unit_keys(scores: dict[str, dict[str, ScoreRow]], family: str) -> list[str]:
    """Every headline the rows' units carry for the family, in the order the scorer writes them, except that
    upstream's per-rule numbers (``rule_<type>_pass_rate``) follow every other: a page keys only what it has."""
    seen = list(dict.fromkeys(k for rows in scores.values() for r in rows.values() for k in r.units.get(family, {})))
    return sorted(seen, key=lambda k: k.startswith("rule_"))  # stable: first-seen order within each group


def family_headlines(fam: Family, ms: list[str], scores: dict[str, dict[str, ScoreRow]]
                     ) -> tuple[list[Headline], list[str]]:
    """The family's headlines per variant, and notes on the variants whose score file keeps no units."""
    # a file older than units: the family scored on some page (a value of one of its metrics), none keyed
    old = [v for v, rows in scores.items() if fam.family is not None and not keeps_units(rows, fam.family)
           and any(r.value(m) is not None for r in rows.values() for m in ms)]
    heads = []
    for h in fam.headlines:
        if h.metric not in ms:
            continue
        if not h.per_unit or fam.family is None:
            heads.append(Headline(h.name, h.metric, h.note, {v: headline(rows, h.metric) for v, rows in scores.items()}))
            continue
        values = {v: pooled(rows, fam.family, h.metric) if v not in old else headline(rows, h.metric)
                  for v, rows in scores.items()}
        heads.append(Headline(h.name, h.metric, TEDS_NOTE.format(", ".join(old)) if old else h.note, values))
    declared = {h.name for h in fam.headlines} | {h.metric for h in fam.headlines}
    for key in _unit_keys(scores, fam.family) if fam.family else []:
        if key not in declared:
            heads.append(Headline(key, None, None, {v: pooled(rows, fam.family, key) for v, rows in scores.items()
                                                    if v not in old}))
    notes = [fam.without_units.format(", ".join(old))] if old and fam.without_units else []
    if fam.family == "omnidoc15":
        head, why = overall(scores)
        heads += [head] if head else []
        notes += why
    return heads, notes


def overall(scores: dict[str, dict[str, ScoreRow]]) -> tuple[Headline | None, list[str]]:
    """OmniDocBench v1.5's Overall per variant, from the same numbers its headlines print (text edit: the page
    mean; table TEDS and formula CDM: pooled over tables and formulas), when every variant's rows carry formula
    CDM; else none, and why (a variant compared without it would be no comparison)."""
    if not scores:
        return None, []
    # scored on CDM: the rows carry the metric (null on a page without a display formula, which keeps no units)
    keyed = {v: any(CDM in (r.model_extra or {}) for r in rows.values()) for v, rows in scores.items()}
    if not all(keyed.values()):
        return None, [OVERALL_MISSING.format(", ".join(v for v, k in keyed.items() if not k))]
    values = {v: omnidoc15_overall(headline(rows, "omnidoc15_text_edit")[0],
                                   pooled(rows, "omnidoc15", "omnidoc15_table_teds")[0],
                                   pooled(rows, "omnidoc15", CDM)[0]) for v, rows in scores.items()}
    empty = [v for v, x in values.items() if x is None]
    return (Headline(OVERALL, None, OVERALL_HOW, {v: (x, len(scores[v])) for v, x in values.items()}),
            [OVERALL_EMPTY.format(", ".join(empty))] if empty else [])


def score_path(r: Summary, variant: str) -> str:
    """The variant's score file at the compare level, as the study names it (``study.verdicts.score_file``,
    which the report cannot import; a test holds the two to one rule)."""
    return f"scores/{variant}-c{r.compare_level}.jsonl"


def bound_scores(out: Path, r: Summary) -> tuple[dict[str, dict[str, ScoreRow]], list[str]]:
    """Each variant's score rows from its bound score file, and a line per variant whose file is not bound,
    missing, or changed since the study (its headline is left out and said so, never read from an unbound file)."""
    scores, problems = {}, []
    for v in [r.baseline] + [x.name for x in r.variants if x.name != r.baseline]:
        rel = score_path(r, v)
        want, f = r.inputs.files.get(rel), Path(out) / rel
        if want is None or not f.is_file():
            problems.append(f"{v}: {rel} is {'not bound in summary.json' if want is None else 'missing'}")
        elif sha256_file(f) != want:
            problems.append(f"{v}: {rel} changed since the study (its sha256 is not the one summary.json binds)")
        else:
            try:
                scores[v] = read_scores(f)
            except InputError as e:
                problems.append(f"{v}: {e}")
    return scores, problems


@dataclass(frozen=True)
class FamilyView:
    family: Family
    metrics: list[str]
    verdicts: list  # the study's verdict rows on the family's metrics, in the summary's order
    headlines: list[Headline]
    problems: list[str]


def family_views(out: Path, r: Summary) -> list[FamilyView]:
    """One view per family with a metric in the study; none when the study has no family metric."""
    study_metrics = list(r.study.get("metrics") or [])
    present = [(f, ms) for f in FAMILIES if (ms := f.metrics(study_metrics))]
    if not present:
        return []
    scores, problems = bound_scores(out, r)
    views = []
    for fam, ms in present:
        heads, notes = family_headlines(fam, ms, scores)
        views.append(FamilyView(fam, ms, [v for v in r.verdicts if v.metric in ms], heads, [*notes, *problems]))
    return views


def _summary(out: Path) -> Summary | None:
    if not (Path(out) / SUMMARY).is_file():
        return None
    try:
        return load_summary(out)
    except InputError:
        return None  # the report proper says what is wrong with summary.json


def _num(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.4f}"


def _cell(value: tuple[float | None, int]) -> str:
    v, n = value
    return f"{_num(v)} ({n} page{'s' * (n != 1)})"


ABOUT = ("Each benchmark family's verdict rows together, and each variant's whole-set headline as the benchmark's "
         "leaderboard prints it, computed from the score files summary.json binds.")


def _tables(view: FamilyView, variants: list[str]) -> list[tuple[list[str], list[list[str]]]]:
    """The family's two tables as (head, rows): its verdict rows, then its headlines per variant."""
    verdicts = (["variant", "metric", "verdict", "Δ (cand − base)", "margin", "pages"],
                [[v.label, v.metric, v.verdict.replace("_", " "), f"{v.delta:+.4f}", f"{v.margin:g}", str(v.n)]
                 for v in view.verdicts])
    heads = (["headline", *variants, "how"],
             [[h.name, *(_cell(h.values[v]) if v in h.values else "–" for v in variants), h.note or "as upstream"]
              for h in view.headlines])
    return [t for t in (verdicts, heads) if t[1]]


def _variants(r: Summary) -> list[str]:
    return [r.baseline] + [x.name for x in r.variants if x.name != r.baseline]


def markdown_lines(out: Path) -> list[str]:
    r = _summary(out)
    views = family_views(out, r) if r is not None else []
    if not views:
        return []
    lines = ["", "## Metric families", "", ABOUT]
    for view in views:
        lines += ["", f"### {view.family.title}", ""]
        for k, (head, rows) in enumerate(_tables(view, _variants(r))):
            lines += ([""] if k else []) + ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
            lines += ["| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in rows]
        notes = (*view.family.footer, *view.problems)
        if notes:
            lines += ["", *(f"- {t}" for t in notes)]
    return lines


def html_blocks(out: Path) -> list:
    from markupsafe import Markup, escape

    r = _summary(out)
    views = family_views(out, r) if r is not None else []
    if not views:
        return []
    parts = [f"<h2>Metric families</h2>\n<p>{escape(ABOUT)}</p>\n"]
    for view in views:
        parts.append(f"<h3>{escape(view.family.title)}</h3>\n")
        for head, rows in _tables(view, _variants(r)):
            parts.append("<table>\n<tr>" + "".join(f"<th>{escape(h)}</th>" for h in head) + "</tr>\n" + "".join(
                "<tr>" + "".join(f"<td>{escape(c)}</td>" for c in row) + "</tr>\n" for row in rows) + "</table>\n")
        notes = (*view.family.footer, *view.problems)
        if notes:
            parts.append("<ul>" + "".join(f"<li>{escape(t)}</li>" for t in notes) + "</ul>\n")
    return [Markup("".join(parts))]


register_section("families", markdown_lines, html_blocks)  # reports.__init__ imports this module
