"""The tune sections of a study's report: the trials table (report.md, report.html, the terminal),
and in report.html a sensitivity heat map (groups × formats, colour = log10 KL) with the tune's
recipe drawn on it and the predicted (summed KL) damage of each trial against its measured
page-score change — whether the additive model held.

Read from ``OUT/tune/*/tune.json`` and the sensitivity file each tune copied beside it; a study
folder without them gets no section. Registered with ``report.sections``, which imports nothing of the tune."""

from __future__ import annotations

from pathlib import Path

from quantgate.reports.html import COLOR, WORD, figure_svg, template_env
from quantgate.reports.sections import register_section
from quantgate.schema.base import parse_record
from quantgate.schema.sensitivity import SensitivityFile
from quantgate.schema.tune import Measured, TuneFile
from quantgate.sensitivity.budget import human


def load_tunes(out: Path) -> list[tuple[TuneFile, SensitivityFile | None]]:
    from quantgate.schema.load import load_json

    root = Path(out) / "tune"
    found = []
    for path in sorted(root.glob("*/tune.json")) if root.is_dir() else []:
        tf = parse_record(TuneFile, load_json(path, "tune record"), where=str(path))  # under the loader's limits
        sp = Path(out) / tf.sensitivity_copy
        sens = None
        if sp.is_file() and sp.resolve().is_relative_to(root.resolve()):
            sens = parse_record(SensitivityFile, load_json(sp, "sensitivity file"), where=str(sp))
        found.append((tf, sens))
    return sorted(found, key=lambda t: (t[0].inputs.mode, t[0].inputs.limit, t[0].name))


def _measured(m: Measured) -> str:
    return f"{m.metric} {m.delta:+.4f} [{m.ci_low:+.4f}, {m.ci_high:+.4f}]"


def _changed(t) -> str:
    """Pages whose output differs from the baseline's, of the pages compared (the page verdicts)."""
    m = next((x for x in t.verdicts if x.source == "pages"), None)
    if m is None:
        return "–"
    return f"{m.pages_changed} / {m.n}" if m.pages_changed is not None else f"? / {m.n}"


def trial_rows(tf: TuneFile) -> list[dict[str, str]]:
    rows = []
    for t in tf.trials:
        built = f" / {human(t.weights_bytes)} built" if t.weights_bytes else ""
        rows.append({
            "trial": f"{t.trial}" + (" ✓" if t.trial == tf.chosen else ""), "variant": t.variant,
            "recipe": f"{t.recipe} ({t.recipe_sha256[:12]})", "bytes": f"{human(t.bytes)}{built}",
            "bits/weight": f"{t.effective_bits:.2f}", "speed-up": f"{t.modelled_speedup:.2f}×",
            "predicted KL": f"{t.predicted_kl:.2e}", "pages changed": _changed(t),
            "measured Δ [90% CI]": "; ".join(_measured(m) for m in t.verdicts),
            "verdicts": "; ".join(f"{m.metric} {WORD[m.verdict]}" + (f" ({m.reason})" if m.reason else "")
                                  for m in t.verdicts),
            "next": f"{t.action.kind}: {t.action.text}"})
    return rows


def _head(tf: TuneFile) -> str:
    i = tf.inputs
    lim = {"budget": f"--budget {human(i.limit)}", "effective_bits": f"--effective-bits {i.limit:g}",
           "speedup": f"--speedup {i.limit:g}"}[i.mode]
    # a tune recorded before trials carried their basis used the weight-bytes model
    basis = "; ".join(dict.fromkeys(t.speed_basis or "modelled from weight bytes, not measured" for t in tf.trials))
    return (f"`quantgate tune` {tf.name} ({lim}, at most {tf.max_trials} trials): {tf.status} — {tf.message}"
            + (f". Speed-up: {basis}" if basis else ""))


def trials_text(tf: TuneFile) -> str:
    import pandas as pd

    if not tf.trials:
        return f"{tf.name}: no trial recorded"
    df = pd.DataFrame(trial_rows(tf)).drop(columns=["recipe", "next"])
    return df.to_string(index=False)


def markdown_lines(out: Path) -> list[str]:
    lines = []
    for tf, _ in load_tunes(out):
        lines += ["", f"## Tune: {tf.name}", "", _head(tf).replace("|", "\\|"), ""]
        rows = trial_rows(tf)
        if not rows:
            continue
        cols = list(rows[0])
        lines += ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
        lines += ["| " + " | ".join(r[c].replace("|", "\\|") for c in cols) + " |" for r in rows]
    return lines


def heatmap_svg(sens: SensitivityFile, chosen: dict[str, str] | None, excluded: dict[str, list[str]]) -> str:
    """Groups (rows, layer × kind) × formats (columns, largest first); colour = log10 KL; the recipe's
    format per group boxed; formats the tune ruled out crossed."""
    import numpy as np
    from matplotlib.figure import Figure
    from matplotlib.patches import Rectangle

    t = sens.table()
    cols = ["bf16"] + sorted(sens.formats, key=lambda f: -sum(t[(g.name, f)].bytes for g in sens.groups))
    rows = [g.name for g in sens.groups]
    kl = np.full((len(rows), len(cols)), np.nan)
    for i, g in enumerate(rows):
        for j, f in enumerate(cols[1:], start=1):
            kl[i, j] = t[(g, f)].kl_mean
    pos = kl[np.isfinite(kl) & (kl > 0)]
    floor = float(pos.min()) if pos.size else 1e-12
    logkl = np.log10(np.where(np.isfinite(kl), np.maximum(kl, floor), np.nan))
    fig = Figure(figsize=(1.6 + 1.0 * len(cols), 0.8 + 0.32 * len(rows)))
    ax = fig.subplots()
    im = ax.imshow(np.ma.masked_invalid(logkl), cmap="magma_r", aspect="auto")
    ax.set_xticks(range(len(cols)), cols)
    ax.set_yticks(range(len(rows)), rows, fontsize=8)
    ax.tick_params(axis="x", top=True, labeltop=True, bottom=False, labelbottom=False)
    annotate = len(rows) <= 40
    mid = (np.nanmin(logkl) + np.nanmax(logkl)) / 2 if pos.size else 0
    for i, g in enumerate(rows):
        for j, f in enumerate(cols):
            if annotate:
                txt = "0" if f == "bf16" else f"{kl[i, j]:.0e}"
                ax.text(j, i, txt, ha="center", va="center", fontsize=7,
                        color="white" if j and np.isfinite(logkl[i, j]) and logkl[i, j] > mid else "black")
            if f in excluded.get(g, []):
                for d in (1, -1):
                    ax.plot([j - 0.42, j + 0.42], [i - 0.4 * d, i + 0.4 * d], color="lime", lw=1.2)
        if chosen and g in chosen:
            j = cols.index(chosen[g])
            ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, ec="tab:cyan", lw=2.5))
    cb = fig.colorbar(im, ax=ax, fraction=0.05)
    cb.set_label("log10 KL (nats/token)")
    return figure_svg(fig)


def damage_svg(tunes: list[TuneFile]) -> str | None:
    """Predicted summed KL (x, log) against the measured change of the first page metric (y, oriented
    so that up is worse), one point per trial with its 90% interval; the margin as a line."""
    from matplotlib.figure import Figure

    pts = []
    for k, tf in enumerate(tunes):
        for t in tf.trials:
            m = next((x for x in t.verdicts if x.source == "pages"), None)
            if m is not None and t.predicted_kl > 0:
                pts.append((k, tf.name, t, m))
    if not pts:
        return None
    fig = Figure(figsize=(5.6, 3.8))
    ax = fig.subplots()
    markers = "osD^v<>p*h"
    seen = set()
    for k, name, t, m in pts:
        lo, hi = (-m.ci_high, -m.ci_low) if m.higher_is_better else (m.ci_low, m.ci_high)
        y = m.worse_delta
        ax.errorbar([t.predicted_kl], [y], yerr=[[y - lo], [hi - y]], fmt=markers[k % len(markers)],
                    color=COLOR[m.verdict], ecolor="#999", capsize=2, ms=6,
                    label=name if name not in seen else None, mfc=COLOR[m.verdict])
        seen.add(name)
        ax.annotate(f"t{t.trial}", (t.predicted_kl, y), textcoords="offset points", xytext=(5, 3), fontsize=7)
    margins = {m.margin for *_, m in pts}
    for mg in margins:
        ax.axhline(mg, color="tab:red", lw=0.8, ls=":")
    ax.axhline(0, color="#888", lw=0.6)
    ax.set_xscale("log")
    metric = pts[0][3].metric
    ax.set_xlabel("predicted damage: summed KL (nats/token)")
    ax.set_ylabel(f"measured Δ {metric} (up = worse), 90% CI")
    ax.set_title(f"dotted: margin{'s' if len(margins) > 1 else ''}; colour: the {metric} verdict", fontsize=8)
    if len(seen) > 1:
        ax.legend(fontsize=7)
    return figure_svg(fig)


def html_sections(out: Path) -> list[str]:
    """HTML blocks (already escaped by Jinja2) for report.html; empty without a tune."""
    from markupsafe import Markup

    tunes = load_tunes(out)
    if not tunes:
        return []
    env = template_env("quantgate.tune")
    blocks = []
    for tf, sens in tunes:
        chosen = next((t for t in tf.trials if t.trial == tf.chosen), None)
        shown = chosen or (tf.trials[-1] if tf.trials else None)
        heat, what = None, ""
        if sens is not None:
            what = (f"trial {shown.trial}'s recipe ({'chosen' if chosen else 'the last trial, not within noise'}) "
                    "boxed; formats the tune ruled out crossed" if shown else "no trial yet")
            excluded = (shown.exclude if shown else {})
            if shown and shown.action.kind == "promote":  # what the next trial may no longer use
                excluded = {g: sorted(set(excluded.get(g, [])) | set(shown.action.promote.get(g, [])))
                            for g in set(excluded) | set(shown.action.promote)}
            heat = Markup(heatmap_svg(sens, shown.assignment if shown else None, excluded))
        blocks.append(Markup(env.get_template("tune.html").render(tf=tf, head=_head(tf), rows=trial_rows(tf),
                                                                  heat=heat, what=what)))
    dmg = damage_svg([tf for tf, _ in tunes])
    if dmg:
        blocks.append(Markup("<h3>Predicted against measured damage, per trial</h3>\n<p><small>If the additive model "
                             "held, the measured change would rise with the predicted KL and stay under the margin "
                             "where the prediction is small.</small></p>\n<figure>") + Markup(dmg) + Markup("</figure>\n"))
    return blocks


__all__ = ["html_sections", "load_tunes", "markdown_lines", "trial_rows", "trials_text"]

register_section("tune", markdown_lines, html_sections)  # the report imports no tune: the tune adds itself
