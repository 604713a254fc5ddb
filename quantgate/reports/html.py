"""report.html: one self-contained file (inline SVG plots, no scripts, no network)."""

from __future__ import annotations

import difflib
import html
import io

# Words, not emoji: a headless browser or a mail client without an emoji font shows boxes.
WORD = {"within_noise": "within noise", "regression": "REGRESSION", "inconclusive": "inconclusive"}

CSS = """body{font:14px/1.45 system-ui,sans-serif;margin:24px auto;max-width:1100px;color:#222}
table{border-collapse:collapse;margin:8px 0 18px}td,th{border:1px solid #ccc;padding:4px 8px;text-align:left;vertical-align:top}
th{background:#f3f3f3}.within_noise{background:#e7f6e7}.regression{background:#fbe3e3}.inconclusive{background:#fff4d6}
pre{white-space:pre-wrap;margin:0;font:12px/1.35 ui-monospace,monospace;max-width:330px}del{background:#f8c9c9}ins{background:#c9f0c9;text-decoration:none}
.plots{display:flex;flex-wrap:wrap;gap:12px}.plots figure{margin:0}small{color:#666}"""


def _svg(fig) -> str:
    import matplotlib.pyplot as plt

    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight")
    plt.close(fig)
    s = buf.getvalue()
    s = s[s.index("<svg"):]
    a, b = s.find("<metadata>"), s.find("</metadata>")
    return s[:a] + s[b + len("</metadata>"):] if a >= 0 and b > a else s


def _plots(r: dict) -> list[tuple[str, str]]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = []
    metric = r["study"]["metrics"][0]
    vs = [v for v in r["verdicts"] if v["metric"] == metric]
    if vs:
        fig, ax = plt.subplots(figsize=(5.2, 0.5 + 0.45 * len(vs)))
        m = max(v["margin"] for v in vs)
        sign = 1 if vs[0]["higher_is_better"] else -1
        ax.axvspan(-m if sign > 0 else -m, m, color="#dfe9f7", label="± margin (noise band)")
        ax.axvline(0, color="#888", lw=0.8)
        for i, v in enumerate(vs):
            color = {"within_noise": "tab:green", "regression": "tab:red", "inconclusive": "tab:orange"}[v["verdict"]]
            ax.plot([v["ci_low"], v["ci_high"]], [i, i], color=color, lw=4)
            ax.plot([v["delta"]], [i], "o", color="black", ms=4)
        ax.set_yticks(range(len(vs)), [v["variant"] for v in vs])
        ax.set_xlabel(f"Δ {metric} vs {r['baseline']} ({'higher' if sign > 0 else 'lower'} is better), 90% CI")
        ax.legend(loc="best", fontsize=8)
        out.append(("Verdicts", _svg(fig)))
    c0 = str(r["compare_level"])
    pts = []
    base_mean = vs[0]["baseline_mean"] if vs else None
    for v in r["variants"]:
        lv = next((x for x in v["levels"] if str(x["concurrency"]) == c0), None)
        acc = base_mean if v["name"] == r["baseline"] else next((x["candidate_mean"] for x in vs if x["variant"] == v["name"]), None)
        if lv and acc is not None:
            pts.append((v["name"], lv["pages_per_s"], acc))
    if pts:
        hib = vs[0]["higher_is_better"] if vs else True
        front = [p for p in pts if not any((q[1] >= p[1] and (q[2] >= p[2] if hib else q[2] <= p[2])) and q != p
                                          and (q[1] > p[1] or q[2] != p[2]) for q in pts)]
        fig, ax = plt.subplots(figsize=(5.2, 3.6))
        for name, x, y in pts:
            ax.plot([x], [y], "o", color="tab:blue" if (name, x, y) in front else "tab:gray")
            ax.annotate(name, (x, y), textcoords="offset points", xytext=(4, 4), fontsize=8)
        fr = sorted(front, key=lambda p: p[1])
        ax.plot([p[1] for p in fr], [p[2] for p in fr], "--", color="tab:blue", lw=1, label="Pareto front")
        ax.set_xlabel(f"pages/s at concurrency {c0}")
        ax.set_ylabel(f"{metric} ({'higher' if hib else 'lower'} is better)")
        ax.legend(fontsize=8)
        out.append(("Accuracy versus speed", _svg(fig)))
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(9, 3.2))
    for v in r["variants"]:
        xs = [lv["concurrency"] for lv in v["levels"]]
        a1.plot(xs, [lv["pages_per_s"] for lv in v["levels"]], "o-", label=v["name"])
        a2.plot(xs, [lv["latency_s"]["p90"] or 0 for lv in v["levels"]], "o-", label=v["name"])
    a1.set_xlabel("concurrency"); a1.set_ylabel("pages/s"); a2.set_xlabel("concurrency"); a2.set_ylabel("p90 latency (s)")  # noqa: E702
    a2.axhline(r["study"]["slo_s"], color="tab:red", lw=0.8, ls=":", label="SLO")
    a1.legend(fontsize=7); a2.legend(fontsize=7)  # noqa: E702
    out.append(("Throughput and p90 latency against concurrency", _svg(fig)))
    fig, ax = plt.subplots(figsize=(5.2, 0.5 + 0.4 * len(r["variants"])))
    ax.barh([v["name"] for v in r["variants"]], [v["weights_bytes"] / 1e6 for v in r["variants"]], color="tab:purple")
    ax.set_xlabel("weights (MB)")
    out.append(("Checkpoint sizes", _svg(fig)))
    return out


def _diff(a: str, b: str) -> str:
    """b's text with what differs from a marked."""
    sm = difflib.SequenceMatcher(a=a, b=b, autojunk=False)
    parts = []
    for op, i1, i2, j1, j2 in sm.get_opcodes():
        if op == "equal":
            parts.append(html.escape(b[j1:j2]))
        else:
            if i2 > i1:
                parts.append(f"<del>{html.escape(a[i1:i2])}</del>")
            if j2 > j1:
                parts.append(f"<ins>{html.escape(b[j1:j2])}</ins>")
    return "".join(parts)


def render_html(r: dict) -> str:
    e = html.escape
    st = r["study"]
    h = [f"<!doctype html><html><head><meta charset='utf-8'><title>quantgate: {e(st['name'])}</title><style>{CSS}</style>"
         "</head><body>", f"<h1>quantgate: {e(st['name'])}</h1>",
         f"<p>Baseline <b>{e(r['baseline'])}</b> at concurrency {r['compare_level']}; noise run: "
         f"{'baseline at concurrency ' + str(r['noise_level']) if r['noise_level'] else 'none'}. "
         f"{'' if r['complete'] else '<b>Incomplete study.</b>'}</p>",
         "<h2>Verdicts</h2><table><tr><th>variant</th><th>metric</th><th>verdict</th><th>Δ</th><th>90% CI</th>"
         "<th>margin</th><th>noise floor</th><th>pages</th></tr>"]
    for v in r["verdicts"]:
        nf = "–" if v["noise_floor"] is None else f"{v['noise_floor']:.4f}"
        need = f" (≈{v['pages_needed']} pages)" if v.get("pages_needed") else ""
        h.append(f"<tr class='{v['verdict']}'><td>{e(v['variant'])}</td><td>{e(v['metric'])} "
                 f"{'↑' if v['higher_is_better'] else '↓'}</td><td><b>{WORD[v['verdict']]}</b>{need}</td><td>{v['delta']:+.4f}</td>"
                 f"<td>[{v['ci_low']:+.4f}, {v['ci_high']:+.4f}]</td><td>{v['margin']:.4f}</td><td>{nf}</td><td>{v['n']}</td></tr>")
    h.append("</table>")
    h += _lmeval_html(r)
    h.append("<h2>Plots</h2><div class='plots'>")
    for title, svg in _plots(r):
        h.append(f"<figure><figcaption>{e(title)}</figcaption>{svg}</figure>")
    h.append("</div><h2>Speed</h2><table><tr><th>variant</th><th>concurrency</th><th>pages/s</th><th>speedup</th>"
             "<th>out tok/s</th><th>TTFT p50</th><th>latency p50</th><th>latency p90</th><th>errors</th></tr>")
    for v in r["variants"]:
        for lv in v["levels"]:
            sp = v["speedup"].get(str(lv["concurrency"]))
            fmt = lambda x: "–" if x is None else f"{x:.2f}"  # noqa: E731
            h.append(f"<tr><td>{e(v['name'])}</td><td>{lv['concurrency']}</td><td>{lv['pages_per_s']:.3f}</td>"
                     f"<td>{fmt(sp)}×</td><td>{lv['output_tokens_per_s']:.1f}</td><td>{fmt(lv['ttft_s']['p50'])}</td>"
                     f"<td>{fmt(lv['latency_s']['p50'])}</td><td>{fmt(lv['latency_s']['p90'])}</td><td>{lv['n_errors']}</td></tr>")
    h.append("</table><h2>Variants</h2><table><tr><th>variant</th><th>recipe</th><th>weights MB</th><th>× smaller</th>"
             "<th>formats</th><th>vision BF16</th><th>kernels</th></tr>")
    for v in r["variants"]:
        h.append(f"<tr><td>{e(v['name'])}</td><td>{e(v['recipe'])}</td><td>{v['weights_bytes'] / 1e6:.2f}</td>"
                 f"<td>{v['compression']}</td><td>{e(str(v['formats']))}</td><td>{'yes' if v['vision_bf16'] else 'no'}</td>"
                 f"<td>{e(', '.join(f'{k}: {x}' for k, x in v['kernels'].items()) or '–')}</td></tr>")
    h.append("</table><h2>Worst pages</h2>")
    for name, rows in r["worst_pages"].items():
        if not rows:
            continue
        h.append(f"<h3>{e(name)}</h3><table><tr><th>page</th><th>truth</th><th>{e(r['baseline'])}</th><th>{e(name)} "
                 "(differences from the baseline marked)</th></tr>")
        for w in rows:
            h.append(f"<tr><td>{e(w['page_id'])}<br><small>{e(w['metric'])}: {w['baseline_value']:.3f} → "
                     f"{w['variant_value']:.3f}</small></td><td><pre>{e(w['truth'] or '')}</pre></td>"
                     f"<td><pre>{e(w['baseline_output'] or '')}</pre></td>"
                     f"<td><pre>{_diff(w['baseline_output'] or '', w['variant_output'] or '')}</pre></td></tr>")
        h.append("</table>")
    notes = sorted({n for v in r["variants"] for n in v["notes"]})
    if notes:
        h.append("<h2>Notes</h2><ul>" + "".join(f"<li>{e(n)}</li>" for n in notes) + "</ul>")
    p = r["provenance"]
    h.append("<h2>Provenance</h2><table>" + "".join(f"<tr><th>{e(k)}</th><td>{e(str(x))}</td></tr>" for k, x in [
        ("statistics", p["statistics"]), ("seed / resamples", f"{st['seed']} / {st['resamples']}"),
        ("git commit", p["git_commit"]), ("page set sha256", p["pageset_sha256"]),
        ("packages", ", ".join(f"{k} {x}" for k, x in p["packages"].items())), ("created", r["created"])]))
    for v in r["variants"]:
        h.append("".join(f"<tr><th>{e(v['name'])}/{e(f)}</th><td><code>{s}</code></td></tr>"
                         for f, s in v["files"].items() if f.endswith(".safetensors")))
    h.append("</table></body></html>")
    return "\n".join(h)


def _lmeval_html(r: dict) -> list[str]:
    lm = r.get("lm_eval")
    if not lm:
        return []
    e = html.escape
    f = lambda x, spec=".4f": "–" if x is None else format(x, spec)  # noqa: E731
    h = ["<h2>Standard benchmarks (lm-eval)</h2><p><small>score ± lm-eval's stderr; recovery oriented so 1.0 is "
         "parity; verdict: paired bootstrap over the logged samples</small></p><table><tr><th>variant</th><th>task</th>"
         "<th>metric</th><th>baseline</th><th>candidate</th><th>recovery</th><th>verdict</th><th>Δ</th><th>90% CI</th>"
         "<th>margin</th><th>n</th></tr>"]
    for v in lm["verdicts"]:
        h.append(f"<tr class='{v['verdict']}'><td>{e(v['variant'])}</td><td>{e(v['task'])}</td><td>{e(v['metric'])} "
                 f"{'↑' if v['higher_is_better'] else '↓'}</td><td>{v['baseline']:.4f} ± {f(v['baseline_stderr'])}</td>"
                 f"<td>{v['candidate']:.4f} ± {f(v['candidate_stderr'])}</td><td>{f(v['recovery'], '.3f')}</td>"
                 f"<td><b>{WORD[v['verdict']]}</b></td><td>{v['delta']:+.4f}</td><td>[{v['ci_low']:+.4f}, "
                 f"{v['ci_high']:+.4f}]</td><td>{v['margin']:.4f}</td><td>{v['n']}</td></tr>")
    h.append("</table>")
    return h
