"""report.html: one self-contained file (inline SVG plots, no scripts, no network), rendered by
Jinja2 with autoescape from ``templates/report.html``: every text from the study, the pages or a
model output is escaped by the template engine, never by hand."""

from __future__ import annotations

import difflib
import io
import math
from pathlib import Path

from quantgate.reports.engine import engine_notes, engine_table, kernels_text
from quantgate.reports.numerics import numerics_rows
from quantgate.reports.sizes import formats_text, megabytes, times_smaller
from quantgate.reports.speed import (
    pareto_variants,
    preemption_lines,
    report_notes,
    slo_text,
    speed_curve,
    speedup_text,
    throughput_lines,
    timed,
    wave_rows,
)
from quantgate.reports.worst import FOLD_CHARS, FULL_PX, diffable, no_worst_lines, page_image
from quantgate.schema.summary import Summary

# Words, not emoji: a headless browser or a mail client without an emoji font shows boxes.
WORD = {"within_noise": "within noise", "regression": "REGRESSION", "inconclusive": "inconclusive",
        "not_equivalent": "NOT EQUIVALENT"}
COLOR = {"within_noise": "tab:green", "regression": "tab:red", "not_equivalent": "tab:red", "inconclusive": "tab:orange"}


def figure_svg(fig) -> str:
    """A matplotlib figure as inline SVG (no metadata)."""
    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight")
    s = buf.getvalue()
    s = s[s.index("<svg"):]
    a, b = s.find("<metadata>"), s.find("</metadata>")
    return s[:a] + s[b + len("</metadata>"):] if a >= 0 and b > a else s


def _font_context():
    """matplotlib's fonts for the plots: DejaVu Sans, then a CJK font (io.fonts) for what DejaVu lacks, so a
    Chinese or Japanese label is drawn, not boxes; without a CJK font, matplotlib's defaults."""
    import matplotlib
    from matplotlib import font_manager

    from quantgate.io.fonts import cjk_font

    path = cjk_font()
    if path is None:
        return matplotlib.rc_context()
    font_manager.fontManager.addfont(str(path))
    name = font_manager.FontProperties(fname=str(path)).get_name()
    return matplotlib.rc_context({"font.family": ["DejaVu Sans", name]})


def _plots(r: Summary) -> list[tuple[str, str]]:
    import logging

    # matplotlib's font manager logs each fallback of a CJK font's weight ("findfont: Failed to find font weight
    # normal for WenQuanYi Zen Hei, now using 500") as a warning, which Python prints on the console when nothing
    # configured logging: the substitution is the intended one, so only its errors are let through while plotting
    log = logging.getLogger("matplotlib.font_manager")
    level = log.level
    log.setLevel(logging.ERROR)
    try:
        with _font_context():
            return _figures(r)
    except (ValueError, OverflowError):
        # numbers no axis can hold (an edited summary.json: a margin of 1e308, whose plot window is infinite):
        # the report's tables say everything the plots do, so it renders without them rather than not at all
        return []
    finally:
        log.setLevel(level)


def _half_width(vs) -> float:
    """The verdict plot's x range, ±this: the margins, noise floors and deltas, and the interval ends the bootstrap
    bounded, with room around them. An end it could not bound (``lower_bound_from: unbounded``, or at the metric's
    whole range) would stretch the axis to ±1 and squash the margin against zero: it is drawn as an arrow instead."""
    xs = [v.margin for v in vs] + [v.noise_floor or 0.0 for v in vs] + [abs(v.delta) for v in vs]
    for v in vs:
        # lower_bound_from names the bound on the oriented shift's lower side: the worse end, in metric units ci_low
        # when higher is better, else ci_high; the better end was bounded and belongs in the window
        worse_end = v.ci_low if v.higher_is_better else v.ci_high
        for end in (v.ci_low, v.ci_high):
            unbounded = end == worse_end and v.lower_bound_from == "unbounded"
            if not unbounded and abs(end) < 1.0:
                xs.append(abs(end))
    return 1.25 * max(xs)


def _figures(r: Summary) -> list[tuple[str, str]]:
    # Figures made without pyplot: no process-wide backend chosen, no figure registry to close
    from matplotlib.figure import Figure

    out = []
    metric = r.study["metrics"][0]
    vs = [v for v in r.verdicts if v.metric == metric]
    if vs:
        fig = Figure(figsize=(5.2, 0.5 + 0.45 * len(vs)))
        ax = fig.subplots()
        sign = 1 if vs[0].higher_is_better else -1
        # the margin on the bad side of zero (and the other side for equivalence), per row: each verdict's own
        for i, v in enumerate(vs):
            bad = -sign * v.margin
            ax.plot([bad, bad], [i - 0.35, i + 0.35], color="tab:red", lw=1.2, label="declared margin" if i == 0 else None)
            if v.test == "equivalence":
                ax.plot([-bad, -bad], [i - 0.35, i + 0.35], color="tab:red", lw=1.2)
            if v.noise_floor is not None:
                ax.plot([-v.noise_floor, v.noise_floor], [i, i], color="#bbb", lw=9, solid_capstyle="butt",
                        label="noise floor (baseline vs itself)" if i == 0 else None, zorder=1)
        ax.axvline(0, color="#888", lw=0.8)
        w, arrow = _half_width(vs), False
        for i, v in enumerate(vs):
            lo, hi = max(v.ci_low, -w), min(v.ci_high, w)
            ax.plot([lo, hi], [i, i], color=COLOR[v.verdict], lw=4, zorder=2)
            # an end past the window (one the bootstrap could not bound reaches the metric's whole range): an arrow
            for beyond, edge, mark in ((v.ci_low < -w, -w, "<"), (v.ci_high > w, w, ">")):
                if beyond:
                    ax.plot([edge], [i], mark, color=COLOR[v.verdict], ms=8, zorder=3, clip_on=False,
                            label=None if arrow else "bound beyond the plot")
                    arrow = True
            ax.plot([v.delta], [i], "o", color="black", ms=4, zorder=3)
        ax.set_xlim(-w * 1.04, w * 1.04)
        ax.set_yticks(range(len(vs)), [v.label for v in vs])
        bars = (f"one-sided {1 - vs[0].alpha:.0%} bounds ({vs[0].confidence:.0%} interval)" if not r.study.get("sequential")
                else "bounds at the nominal level of the look each was decided at")
        ax.set_xlabel(f"Δ {metric} vs {r.baseline} ({'higher' if sign > 0 else 'lower'} is better); bars: {bars}")
        ax.legend(loc="best", fontsize=8)
        out.append(("Verdicts", figure_svg(fig)))
    c0 = str(r.compare_level)
    pts = []
    base_mean = vs[0].baseline_mean if vs else None
    placed, _ = pareto_variants(r)  # a variant run on BF16 kernels has no quantized speed to place
    for v in placed:
        lv = next((x for x in v.levels if str(x.concurrency) == c0), None)
        acc = base_mean if v.name == r.baseline else next((x.candidate_mean for x in vs if x.variant == v.name and x.tag is None), None)
        if lv and acc is not None:
            pts.append((v.name, lv.pages_per_s, acc))
    if len(pts) >= 2:
        hib = vs[0].higher_is_better if vs else True
        front = [p for p in pts if not any((q[1] >= p[1] and (q[2] >= p[2] if hib else q[2] <= p[2])) and q != p
                                          and (q[1] > p[1] or q[2] != p[2]) for q in pts)]
        fig = Figure(figsize=(5.2, 3.6))
        ax = fig.subplots()
        for name, x, y in pts:
            ax.plot([x], [y], "o", color="tab:blue" if (name, x, y) in front else "tab:gray")
            ax.annotate(name, (x, y), textcoords="offset points", xytext=(4, 4), fontsize=8)
        fr = sorted(front, key=lambda p: p[1])
        ax.plot([p[1] for p in fr], [p[2] for p in fr], "--", color="tab:blue", lw=1, label="Pareto front")
        ax.set_xlabel(f"pages/s at concurrency {c0}")
        ax.set_ylabel(f"{metric} ({'higher' if hib else 'lower'} is better)")
        ax.legend(fontsize=8)
        out.append(("Accuracy versus speed", figure_svg(fig)))
    fig = Figure(figsize=(9, 3.2))
    a1, a2 = fig.subplots(1, 2)
    for v in placed:  # not a variant the speed table calls not a quantized speed (BF16 kernels)
        curve = speed_curve(r, v)  # the timed waves when the study has them, else the accuracy pass
        xs = [c for c, _, _ in curve]
        a1.plot(xs, [p for _, p, _ in curve], "o-", label=v.name)
        a2.plot(xs, [math.nan if p90 is None else p90 for _, _, p90 in curve], "o-", label=v.name)
    a1.set_xlabel("concurrency"); a1.set_ylabel("pages/s"); a2.set_xlabel("concurrency"); a2.set_ylabel("p90 latency (s)")  # noqa: E702
    a2.axhline(r.study["slo_s"], color="tab:red", lw=0.8, ls=":", label="SLO")
    a1.legend(fontsize=7); a2.legend(fontsize=7)  # noqa: E702
    out.append(("Throughput and p90 latency against concurrency" + (" (timed waves, their means)" if timed(r) else ""),
                figure_svg(fig)))
    fig = Figure(figsize=(5.2, 0.5 + 0.4 * len(r.variants)))
    ax = fig.subplots()
    ax.barh([v.name for v in r.variants], [v.weights_bytes / 1e6 for v in r.variants], color="tab:purple")
    ax.set_xlabel("weights (MB)")
    out.append(("Checkpoint sizes", figure_svg(fig)))
    return out


def _diff(a: str, b: str) -> list[tuple[str, str]]:
    """b's text as (op, text) segments against a: ``same``, ``del`` (only in a), ``ins`` (only in b)."""
    sm = difflib.SequenceMatcher(a=a, b=b, autojunk=False)
    parts = []
    for op, i1, i2, j1, j2 in sm.get_opcodes():
        if op == "equal":
            parts.append(("same", b[j1:j2]))
        else:
            if i2 > i1:
                parts.append(("del", a[i1:i2]))
            if j2 > j1:
                parts.append(("ins", b[j1:j2]))
    return parts


def template_env(package: str = "quantgate.reports"):
    """The Jinja2 environment of a package's ``templates/`` folder: autoescaped, strict about undefined names."""
    from jinja2 import Environment, PackageLoader, StrictUndefined

    return Environment(loader=PackageLoader(package, "templates"), autoescape=True, undefined=StrictUndefined,
                       trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True)


def _env():
    env = template_env()
    env.filters["num"] = lambda x, spec=".4f": "–" if x is None else format(x, spec)
    env.filters["kernels"] = kernels_text
    env.globals.update(word=WORD, diff=_diff, speedup_text=speedup_text, slo_text=slo_text, diffable=diffable,
                       megabytes=megabytes, times_smaller=times_smaller, formats_text=formats_text)
    return env


def render_html(r: Summary, sections: list | tuple = (), root: Path | None = None) -> str:
    """``sections``: extra HTML blocks (Markup, already escaped) placed before the provenance — the tune's.
    ``root``: the study folder, which the worst pages' image paths are relative to."""
    from markupsafe import Markup

    # matplotlib writes the SVG (and escapes the labels in it): the one markup passed through as is
    plots = [(title, Markup(svg)) for title, svg in _plots(r)]
    notes = report_notes(r)
    from quantgate.reports.budget import budget_rows, sequential_rows
    from quantgate.reports.markdown import below_minimum, test_line
    from quantgate.reports.outcome import outcome

    engine_cols, engine_rows = engine_table(r)
    budget, budget_text = budget_rows(r)
    return _env().get_template("report.html").render(r=r, st=r.study, plots=plots, notes=notes, engine_cols=engine_cols,
                                                     engine_rows=engine_rows, engine_notes=engine_notes(r),
                                                     numerics=numerics_rows(r), test_line=test_line(r).replace("**", ""),
                                                     warn=below_minimum(r), sections=sections, outcome=outcome(r),
                                                     sequential=sequential_rows(r), budget=budget,
                                                     budget_text=budget_text.replace("**", "").replace("`", ""),
                                                     throughput=preemption_lines(r) if timed(r) else throughput_lines(r),
                                                     off_front=pareto_variants(r)[1],
                                                     waves=wave_rows(r) if timed(r) else [],
                                                     images={(name, w.page_id): page_image(w, root)
                                                             for name, rows in r.worst_pages.items() for w in rows},
                                                     no_worst=no_worst_lines(r), fold_chars=FOLD_CHARS, full_px=FULL_PX)
