"""report.md: fits a pull-request comment — what was tested, the verdicts with their reasons, then speed."""

from __future__ import annotations

from quantgate.reports.budget import budget_rows, sequential_rows
from quantgate.reports.engine import engine_notes, engine_table
from quantgate.reports.numerics import numerics_rows
from quantgate.reports.outcome import banner_markdown
from quantgate.reports.sizes import formats_text, megabytes, times_smaller
from quantgate.reports.speed import (
    preemption_lines,
    report_notes,
    slo_text,
    speedup_text,
    throughput_lines,
    timed,
    wave_rows,
)
from quantgate.schema.settings import MIN_PAGES
from quantgate.schema.summary import Summary

ICON = {"within_noise": "✅ within noise", "regression": "❌ regression", "inconclusive": "⚠️ inconclusive",
        "not_equivalent": "❌ not equivalent"}
TEST = {"non_inferiority": "non-inferiority", "equivalence": "equivalence (two one-sided tests)",
        "exact": "exact: identical outputs"}


def _f(x, spec=".4f"):
    return "–" if x is None else format(x, spec)


def test_line(r: Summary) -> str:
    """What the verdicts test, at which level, and what the columns mean — one paragraph."""
    st = r.study
    vs = list(r.verdicts) + list(r.lm_eval.verdicts if r.lm_eval else [])
    alpha, conf = (vs[0].alpha, vs[0].confidence) if vs else (0.05, 0.90)
    level = (f"at one-sided {1 - alpha:.0%}: the bounds are the ends of the {conf:.0%} interval" if not st.get("sequential")
             else f"sequentially (overall one-sided {1 - alpha:.0%} per side; each verdict's bounds at the nominal "
                  "level of the look it was decided at, see Sequential verdicts)")
    return (f"Test: **{TEST[st['test']]}** against each metric's declared margin, {level} (seeded bootstrap, "
            f"{st['resamples']} resamples, seed {st.get('bootstrap_seed', st.get('seed'))}). The noise floor is how far the baseline moves against itself when re-run (a one-sided "
            f"{1 - alpha:.0%} bound): shown, never added to the margin; above the margin the verdict is "
            f"inconclusive. Fewer than {st['min_pages']} pages: inconclusive. Regressions are called after Holm's "
            f"adjustment over the study's {len(vs)} verdicts (p Holm); pages needed: at {vs[0].power:.0%} power, "
            f"{vs[0].pages_needed_method}." if vs else "")


def below_minimum(r: Summary) -> str | None:
    mp = r.study["min_pages"]
    if mp >= MIN_PAGES:
        return None
    return (f"min_pages is {mp}, below the calibrated minimum of {MIN_PAGES}: verdicts on fewer than "
            f"{MIN_PAGES} pages are a smoke test, not calibrated (docs/statistics.md)")


def _bounds(v) -> str:
    return f"[{v.ci_low:+.4f}, {v.ci_high:+.4f}] {v.interval}"


def _floor(v) -> str:
    return "–" if v.noise_floor is None else f"{v.noise_floor:.4f} ({_f(v.noise_delta, '+.4f')})"


def _pval(p, resamples: int) -> str:
    # 0 means no resample reached the margin: below the resolution, 1/(2 × resamples)
    return "–" if p is None else f"< {1 / (2 * max(resamples, 1)):.2g}" if p == 0 else f"{p:.3g}"


def _p(v) -> str:
    return f"{_pval(v.p_regression, v.n_resamples)} ({_pval(v.p_regression_holm, v.n_resamples)})"


def _pages(v) -> str:
    return f"{v.n}" + ("" if v.pages_changed is None else f" ({v.pages_changed} of {v.pages_compared} changed)")


def _docs(v) -> str:
    """baseline score, documents and design effect, flips: "–" where a row lacks one (schema 2)."""
    flips = "–" if v.flips is None else f"{v.flips}" + ("" if v.flips_source != "scores" else " (scores)")
    return f"{_f(v.baseline_score)} | {_f(v.documents, 'd')} | {_f(v.design_effect, '.2f')} | {flips}"


def _verdict(v) -> str:
    return ICON[v.verdict] + (f" (≈{v.pages_needed} pages to decide)" if v.pages_needed else "")


def render_markdown(r: Summary, sections: list[str] | tuple = ()) -> str:
    """``sections``: extra lines placed before the provenance line — the tune's trials table."""
    st = r.study
    lines = [f"# quantgate: {st['name']}", "", *banner_markdown(r),
             f"Baseline **{r.baseline}**, compared at concurrency {r.compare_level}"
             + (f", noise run: baseline at concurrency {r.noise_level}" if r.noise_level else ", no noise run")
             + f". Split `{st['split']}`." + ("" if r.complete else " **Incomplete study.**"), "", test_line(r), ""]
    warn = below_minimum(r)
    if warn:
        lines += [f"> ⚠️ **{warn}**", ""]
    lines += ["| variant | metric | verdict | reason | Δ (cand − base) | one-sided 95% bounds | margin | noise floor "
              "(shift) | p regression (Holm) | pages | baseline score | documents | design effect | flips |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for v in r.verdicts:
        better = "↑" if v.higher_is_better else "↓"
        lines.append(f"| {v.label} | {v.metric} {better} | {_verdict(v)} | `{v.reason}` | {v.delta:+.4f} | "
                     f"{_bounds(v)} | {v.margin:.4f} ({v.margin_source}) | {_floor(v)} | {_p(v)} | {_pages(v)} | {_docs(v)} |")
    lines += [""] + [f"- **{v.label} × {v.metric}** ({v.reason}): {v.message}" for v in r.verdicts]
    lines += _sequential_lines(r)
    lines += _lmeval_lines(r)
    lines += ["", "## Speed"]
    if timed(r):  # speed once: the timed waves; the accuracy pass's throughput is in the time budget
        lines += _speed_wave_lines(r)
        measured = preemption_lines(r)
    else:
        lines += ["", "| variant | concurrency | pages/s | speedup | out tok/s | TTFT p50 s | latency p90 s | errors |",
                  "|---|---|---|---|---|---|---|---|"]
        for v in r.variants:
            for lv in v.levels:
                lines.append(f"| {v.name} | {lv.concurrency} | {lv.pages_per_s:.3f} | {speedup_text(v, lv.concurrency)} "
                             f"| {lv.output_tokens_per_s:.1f} | {_f(lv.ttft_s.get('p50'), '.2f')} | "
                             f"{_f(lv.latency_s.get('p90'), '.2f')} | {lv.n_errors} |")
        measured = throughput_lines(r)  # (their preemption lines included)
    if measured:
        lines += ["", *(f"- {t}" for t in measured)]
    lines += _engine_lines(r)
    lines += ["", "## Variants", "", "| variant | recipe | weights MB | × smaller | formats | vision BF16 | max concurrency "
              "with p90 ≤ SLO |", "|---|---|---|---|---|---|---|"]
    for v in r.variants:
        lines.append(f"| {v.name} | {v.recipe} | {megabytes(v.weights_bytes)} | {times_smaller(v.compression)} | "
                     f"{formats_text(v.formats)} | {'yes' if v.vision_bf16 else 'no'} | {slo_text(r, v)} |")
    lines += ["", "## Numerics", "", "What each server computed per quantized format: weights-only (activations stay "
              "16-bit) or weights+activations (W8A8, W4A4), and on what evidence.", "",
              "| variant | backend | format | computes | activations | evidence |", "|---|---|---|---|---|---|"]
    lines += [f"| {x['variant']} | {x['backend']} | {x['format']} | {x['computes']} | {x['activations']} | "
              f"{x['evidence']} |" for x in numerics_rows(r)]
    notes = report_notes(r)
    if notes:
        lines += ["", "## Notes", ""] + [f"- {n}" for n in notes]
    lines += _budget_lines(r)
    lines += list(sections)
    p = r.provenance
    lines += ["", f"<sub>{p.statistics}. quantgate {p.packages.get('quantgate')}, commit {(p.git_commit or '?')[:10]}, "
              f"page set {p.pageset_sha256[:12]}.</sub>", ""]
    return "\n".join(lines)


def _speed_wave_lines(r: Summary) -> list[str]:
    """The speed levels sent in repeated waves, each variant's ratio to the baseline with its interval."""
    rows = wave_rows(r)
    eos = any(x["ignore_eos"] == "yes" for x in rows)
    return ["", f"Speed levels in repeated waves{' (ignore_eos: every request decodes max_tokens)' if eos else ''}; "
            f"ratio of the waves' mean output tok/s to {r.baseline}'s at the same concurrency, with its interval "
            "(judge.speed.speedup_interval; the spread between waves of this session, not between sessions):", "",
            "| variant | concurrency | waves × requests | out tok/s per wave | vs baseline [interval] | ignore_eos |",
            "|---|---|---|---|---|---|"] + [
        f"| {x['variant']} | {x['concurrency']} | {x['waves']} | {x['tok_s']} | {x['ratio']} | {x['ignore_eos']} |"
        for x in rows]


def _sequential_lines(r: Summary) -> list[str]:
    rows = sequential_rows(r)
    if not rows:
        return []
    return ["", "## Sequential verdicts", "", "Each candidate's accuracy pass was served in a seeded random order and "
            "stopped once every verdict was decisive or the page budget ended (docs/statistics.md, \"Sequential "
            "verdicts in a study\"); each verdict above is from the look it was decided at, its bounds at that "
            "look's nominal level, its p regression the repeated p-value over the looks.", "",
            "| variant | stopping point | decisions | plan |", "|---|---|---|---|"] + \
        [f"| {x['variant']} | {x['stop']} | {x['metrics']} | {x['plan']} |" for x in rows]


def _budget_lines(r: Summary) -> list[str]:
    rows, text = budget_rows(r)
    if not rows:
        return []
    return ["", "## Time budget", "", text, "", "| part | variant | seconds | share of wall | generation s | |",
            "|---|---|---|---|---|---|"] + \
        [f"| {x['part']} | {x['variant']} | {x['wall_s']} | {x['share']} | {x['generation_s']} | {x['reused']} |"
         for x in rows]


def _engine_lines(r: Summary) -> list[str]:
    cols, rows = engine_table(r)
    if not rows:
        return []
    out = ["", "Engine settings (from each run's server log and start):", "", "| " + " | ".join(cols) + " |",
           "|" + "---|" * len(cols)]
    out += ["| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in rows]
    out += [f"\n**Note:** {n}" for n in engine_notes(r)]
    return out


def _lmeval_lines(r: Summary) -> list[str]:
    if not r.lm_eval:
        return []
    out = ["", "## Standard benchmarks (lm-eval)", "",
           "Score ± lm-eval's stderr; recovery = candidate/baseline oriented so 1.0 is parity; the verdict is the "
           "same paired test over the logged samples (a sample counts as a page).", "",
           "| variant | task | metric | baseline | candidate | recovery | verdict | reason | Δ | one-sided 95% bounds | "
           "margin | p regression (Holm) | n |", "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for v in r.lm_eval.verdicts:
        out.append(f"| {v.variant} | {v.task} | {v.metric} {'↑' if v.higher_is_better else '↓'} | "
                   f"{v.baseline:.4f} ± {_f(v.baseline_stderr)} | {v.candidate:.4f} ± {_f(v.candidate_stderr)} | "
                   f"{_f(v.recovery, '.3f')} | {_verdict(v)} | `{v.reason}` | {v.delta:+.4f} | {_bounds(v)} | "
                   f"{v.margin:.4f} | {_p(v)} | {v.n} |")
    out += [""] + [f"- **{v.variant} × {v.task} {v.metric}** ({v.reason}): {v.message}" for v in r.lm_eval.verdicts]
    return out
