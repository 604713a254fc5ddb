"""The report's "Pages without truth" section: how many judged pages had truth, and what the outputs alone show
whatever the truth — per candidate and metric the pages changed and the mean truth-free bound against the margin,
the baseline's re-run beside it (so "differs from the baseline no more than the baseline differs from itself" is
read off directly), and the pages with the largest bounds as baseline vs candidate beside the page image: the
worst pages need no truth to be seen.

It renders from summary.json (``truth``, ``truth_free``, ``largest_bounds``, made by ``study.truthfree``) and
registers itself with ``reports.sections``; a report without them (a schema-3 study) gets no section."""

from __future__ import annotations

from pathlib import Path

from quantgate.errors import InputError
from quantgate.reports.sections import register_section
from quantgate.schema.summary import SUMMARY, Summary, TruthFreeEvidence, load_summary

MD_CHARS = 300  # an output in report.md's side-by-side table is cut here (report.html folds, and has them whole)
ABOUT = ("A page's bound is the most the candidate's output can score worse than the baseline's there, whatever its "
         "truth is (0 when the metric reads the two outputs alike; docs/statistics.md): its mean over the pages "
         "bounds the mean damage from above with no truth at all. The verdicts above make the test; these are the "
         "numbers it rests on.")


def _summary(out: Path) -> Summary | None:
    if not (Path(out) / SUMMARY).is_file():
        return None
    try:
        r = load_summary(out)
    except InputError:
        return None  # the report proper says what is wrong with summary.json
    return r if r.truth is not None or r.truth_free else None


def table(r: Summary) -> list[tuple[TruthFreeEvidence, TruthFreeEvidence | None]]:
    """Each candidate's row with the baseline re-run's row of the same metric (None: no re-run)."""
    noise = {x.metric: x for x in r.truth_free if x.variant == r.baseline}
    return [(x, noise.get(x.metric)) for x in r.truth_free if x.variant != r.baseline]


def _num(x: float | None) -> str:
    return "–" if x is None else f"{x:.4f}"


def _cell(text: str | None) -> str:
    t = (text or "")[:MD_CHARS] + ("…" if len(text or "") > MD_CHARS else "")
    return t.replace("\\", "\\\\").replace("|", "\\|").replace("\n", "<br>") or "(empty)"


def markdown_lines(out: Path) -> list[str]:
    r = _summary(out)
    if r is None:
        return []
    lines = ["", "## Pages without truth", ""]
    if r.truth is not None:
        lines += [r.truth.line() + ".", ""]
    rows = table(r)
    if rows:
        lines += [ABOUT, "", f"| variant | metric | pages | changed | mean bound | margin | {r.baseline} re-run "
                  "changed | re-run mean bound |", "|---|---|---:|---:|---:|---:|---:|---:|"]
        lines += [f"| {x.variant} | {x.metric} | {x.pages} | {x.changed} | {_num(x.mean_bound)} | {x.margin:g} | "
                  f"{'–' if e is None else e.changed} | {_num(None if e is None else e.mean_bound)} |" for x, e in rows]
    for name, pages in r.largest_bounds.items():
        if not pages:
            continue
        lines += ["", f"### {name}: the largest bounds", "", f"| page | bound | {r.baseline} | {name} |",
                  "|---|---:|---|---|"]
        lines += [f"| {b.page_id}{'' if b.has_truth else ' (no truth)'} | {b.metric} {b.bound:.3f} | "
                  f"{_cell(b.baseline_output)} | {_cell(b.variant_output)} |" for b in pages]
    return lines


def html_blocks(out: Path) -> list:
    from markupsafe import Markup

    from quantgate.reports.html import _diff, template_env
    from quantgate.reports.worst import FOLD_CHARS, FULL_PX, diffable, page_image

    r = _summary(out)
    if r is None:
        return []
    env = template_env()
    env.filters["num"] = lambda x, spec=".4f": "–" if x is None else format(x, spec)
    env.globals.update(diff=_diff, diffable=diffable)
    images = {(name, b.page_id): page_image(b, out) for name, pages in r.largest_bounds.items() for b in pages}
    return [Markup(env.get_template("truthfree.html").render(r=r, rows=table(r), about=ABOUT, images=images,
                                                             fold=FOLD_CHARS, full_px=FULL_PX))]


register_section("truthfree", markdown_lines, html_blocks)  # reports.__init__ imports this module
