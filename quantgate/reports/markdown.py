"""report.md: fits a pull-request comment — verdicts first, then speed."""

from __future__ import annotations

from quantgate.reports.engine import engine_differences, engine_table
from quantgate.reports.schema import Summary, numerics_rows

ICON = {"within_noise": "✅ within noise", "regression": "❌ regression", "inconclusive": "⚠️ inconclusive"}


def _f(x, spec=".4f"):
    return "–" if x is None else format(x, spec)


def render_markdown(r: Summary, sections: list[str] | tuple = ()) -> str:
    """``sections``: extra lines placed before the provenance line — the tune's trials table."""
    st = r.study
    lines = [f"# quantgate: {st['name']}", "",
             f"Baseline **{r.baseline}**, compared at concurrency {r.compare_level}"
             + (f", noise run: baseline at concurrency {r.noise_level}" if r.noise_level else ", no noise run")
             + f". Split `{st['split']}`." + ("" if r.complete else " **Incomplete study.**"), "",
             "| variant | metric | verdict | Δ (cand − base) | 90% CI | margin | noise floor | pages |",
             "|---|---|---|---|---|---|---|---|"]
    for v in r.verdicts:
        better = "↑" if v.higher_is_better else "↓"
        need = f" (≈{v.pages_needed} pages to decide)" if v.pages_needed else ""
        lines.append(f"| {v.variant} | {v.metric} {better} | {ICON[v.verdict]}{need} | {v.delta:+.4f} | "
                     f"[{v.ci_low:+.4f}, {v.ci_high:+.4f}] | {v.margin:.4f} | {_f(v.noise_floor)} | {v.n} |")
    lines += _lmeval_lines(r)
    lines += ["", "## Speed", "",
              "| variant | concurrency | pages/s | speedup | out tok/s | TTFT p50 s | latency p90 s | errors |",
              "|---|---|---|---|---|---|---|---|"]
    for v in r.variants:
        for lv in v.levels:
            sp = v.speedup.get(str(lv.concurrency))
            lines.append(f"| {v.name} | {lv.concurrency} | {lv.pages_per_s:.3f} | {_f(sp, '.2f')}× | "
                         f"{lv.output_tokens_per_s:.1f} | {_f(lv.ttft_s['p50'], '.2f')} | "
                         f"{_f(lv.latency_s['p90'], '.2f')} | {lv.n_errors} |")
    lines += _engine_lines(r)
    lines += ["", "## Variants", "", "| variant | recipe | weights MB | × smaller | vision BF16 | max concurrency with p90 ≤ SLO |",
              "|---|---|---|---|---|---|"]
    for v in r.variants:
        lines.append(f"| {v.name} | {v.recipe} | {v.weights_bytes / 1e6:.1f} | {_f(v.compression, '.2f')} | "
                     f"{'yes' if v.vision_bf16 else 'no'} | {v.max_concurrency_within_slo or '–'} |")
    lines += ["", "## Numerics", "", "What each server computed per quantized format: weights-only (activations stay "
              "16-bit) or weights+activations (W8A8, W4A4), and on what evidence.", "",
              "| variant | backend | format | computes | activations | evidence |", "|---|---|---|---|---|---|"]
    lines += [f"| {x['variant']} | {x['backend']} | {x['format']} | {x['computes']} | {x['activations']} | "
              f"{x['evidence']} |" for x in numerics_rows(r)]
    notes = sorted({n for v in r.variants for n in v.notes})
    if notes:
        lines += ["", "## Notes", ""] + [f"- {n}" for n in notes]
    lines += list(sections)
    p = r.provenance
    lines += ["", f"<sub>{p.statistics}; seed {st['seed']}, {st['resamples']} resamples. quantgate "
              f"{p.packages.get('quantgate')}, commit {(p.git_commit or '?')[:10]}, page set "
              f"{p.pageset_sha256[:12]}.</sub>", ""]
    return "\n".join(lines)


def _engine_lines(r: Summary) -> list[str]:
    cols, rows = engine_table(r)
    if not rows:
        return []
    out = ["", "Engine settings (from each run's server log and start):", "", "| " + " | ".join(cols) + " |",
           "|" + "---|" * len(cols)]
    out += ["| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in rows]
    out += [f"\n**Note:** {n}" for n in engine_differences(r)]
    return out


def _lmeval_lines(r: Summary) -> list[str]:
    if not r.lm_eval:
        return []
    out = ["", "## Standard benchmarks (lm-eval)", "",
           "Score ± lm-eval's stderr; recovery = candidate/baseline oriented so 1.0 is parity; the verdict is a "
           "paired bootstrap over the logged samples.", "",
           "| variant | task | metric | baseline | candidate | recovery | verdict | Δ | 90% CI | margin | n |",
           "|---|---|---|---|---|---|---|---|---|---|---|"]
    for v in r.lm_eval.verdicts:
        out.append(f"| {v.variant} | {v.task} | {v.metric} {'↑' if v.higher_is_better else '↓'} | "
                   f"{v.baseline:.4f} ± {_f(v.baseline_stderr)} | {v.candidate:.4f} ± {_f(v.candidate_stderr)} | "
                   f"{_f(v.recovery, '.3f')} | {ICON[v.verdict]} | {v.delta:+.4f} | "
                   f"[{v.ci_low:+.4f}, {v.ci_high:+.4f}] | {v.margin:.4f} | {v.n} |")
    return out
