"""The report's "Metric families" section: for each benchmark family among the study's metrics (OmniDocBench v1.5,
ParseBench, olmOCR-bench's checks) its verdict rows together under the family's name, and beside them each
variant's whole-set headline as that benchmark's own leaderboard prints it, so a reviewer who works in the
benchmark's terms reads its numbers next to the paired verdicts.

The headlines are computed here, at report time, from the score files the gate binds (``summary.inputs.files``:
each is re-hashed and a file that no longer matches is named, not read), not recorded in summary.json. Every
headline that is a mean over pages is exact from the score rows; two need per-unit details the rows do not keep,
and say so where they are printed: OmniDocBench's table TEDS (upstream averages over tables, a row holds its page's
mean over its tables: the two agree when each page has one table) and ParseBench's per-rule-type pass rates
(``quantgate score --metrics parsebench`` prints them from the outputs). OmniDocBench v1.5's Overall needs formula
CDM, which quantgate does not compute: it is labelled not computed, never filled in with the edit distance."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from statistics import fmean

from quantgate.errors import InputError
from quantgate.io.fileio import sha256_file
from quantgate.io.scores import read_scores
from quantgate.reports.sections import register_section
from quantgate.schema.metrics import METRICS
from quantgate.schema.scores import ScoreRow
from quantgate.schema.summary import SUMMARY, Summary, load_summary

OVERALL = "Overall: not computed (needs formula CDM, which quantgate does not run)"
TEDS_NOTE = ("mean of the pages' TEDS; upstream averages over tables (equal when each page has one), and a score row "
             "keeps its page's mean")
RULES_NOTE = ("each rule type's pass rate needs each rule's result, which score rows do not keep: `quantgate score "
              "--metrics parsebench` on a variant's outputs prints them")


@dataclass(frozen=True)
class Family:
    """A benchmark family as the report shows it: its title, the registry's family name (``MetricSpec.family``;
    olmOCR-bench's ``checks`` has none, so it is named), and its headline rows in upstream's order and words:
    (metric, the headline's name, a note on how it is computed or None)."""
    title: str
    family: str | None
    headlines: tuple[tuple[str, str, str | None], ...]
    footer: tuple[str, ...] = ()

    def metrics(self, study_metrics: list[str]) -> list[str]:
        return [m for m in study_metrics if m in METRICS and (
            METRICS[m].family == self.family if self.family else m in (h[0] for h in self.headlines))]


# Upstream's names: OmniDocBench v1.5's end-to-end table (text block, display formula, table, reading order; edit
# distances are ALL_page_avg), ParseBench's runner (``avg_<page metric>``, scoring.parsebench.leaderboard's
# DIMENSIONS), olmOCR-bench's pass rate.
FAMILIES = (
    Family("OmniDocBench v1.5", "omnidoc15", (
        ("omnidoc15_text_edit", "text edit distance", None),
        ("omnidoc15_formula_edit", "formula edit distance", "the edit-distance fallback, not CDM"),
        ("omnidoc15_table_teds", "table TEDS", TEDS_NOTE),
        ("omnidoc15_reading_order", "reading order edit distance", None)), (OVERALL,)),
    Family("ParseBench", "parsebench", (
        ("parsebench_content", "content_faithfulness", None),
        ("parsebench_formatting", "semantic_formatting", None),
        ("parsebench_charts", "rule_chart_data_point_pass_rate", None)), (RULES_NOTE,)),
    Family("olmOCR-bench", None, (("checks", "pass rate", "mean of the pages' check pass rates"),)),
)


@dataclass(frozen=True)
class Headline:
    name: str
    metric: str
    note: str | None
    values: dict[str, tuple[float | None, int]]  # variant → (mean over the pages that have a value, those pages)


def headline(rows: dict[str, ScoreRow], metric: str) -> tuple[float | None, int]:
    """The whole-set value: the mean over the pages the metric applies to (an empty or missing output is scored,
    as its worst value, by scoring; a null is a page the metric does not apply to)."""
    values = [v for r in rows.values() if (v := r.value(metric)) is not None]
    return (fmean(values) if values else None), len(values)


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
        heads = [Headline(name, m, note, {v: headline(rows, m) for v, rows in scores.items()})
                 for m, name, note in fam.headlines if m in ms]
        views.append(FamilyView(fam, ms, [v for v in r.verdicts if v.metric in ms], heads, problems))
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
