"""report.md for other systems' outputs judged against a baseline system (``schema.systems``): the outcome
first, one line per system with the reason that decided it, then the verdicts, the pages a system has no
output for, and each system's worst pages beside the baseline's and the truth."""

from __future__ import annotations

from quantgate.schema.systems import SystemsComparison

SNIPPET = 400  # characters of each text shown for a worst page; the files hold the rest


def _cut(text: str | None, absent: str) -> str:
    if text is None:
        return absent
    text = text.strip()
    return text if len(text) <= SNIPPET else text[:SNIPPET] + f" … ({len(text) - SNIPPET} more characters)"


def render_systems_markdown(c: SystemsComparison) -> str:
    L = [f"# {c.outcome}: {len(c.systems) - 1} system(s) judged against {c.baseline} on {c.metric}", ""]
    for s in c.systems[1:]:
        v = s.verdict
        assert v is not None
        L.append(f"- **{s.name}**: {v.verdict.replace('_', ' ')} ({v.reason}) — {v.message}")
    L += ["", f"Pages: `{c.pages}`, split {c.split}. Each system's outputs are scored as written (file names "
          "mapped to pages as docs/study.md, \"Outputs of any system\", says; repeats averaged).", "",
          "| system | verdict | reason | delta | one-sided 95% bounds | margin | n | pages with output | no output |",
          "|---|---|---|---|---|---|---|---|---|"]
    for s in c.systems:
        v = s.verdict
        if v is None:
            L.append(f"| {s.name} (baseline) | | | | | | | {s.pages_with_output} | {len(s.missing_pages)} |")
        else:
            L.append(f"| {s.name} | {v.verdict} | {v.reason} | {v.delta:+.4f} | [{v.ci_low:+.4f}, {v.ci_high:+.4f}] | "
                     f"{v.margin:.4f} | {v.n} | {s.pages_with_output} | {len(s.missing_pages)} |")
    for s in c.systems:
        if s.missing_pages:
            L += ["", f"**{s.name}** has no output for {len(s.missing_pages)} page(s), scored as empty (the metric's "
                  f"worst value): {', '.join(s.missing_pages)}"]
    for s in c.systems[1:]:
        L += ["", f"## {s.name}: worst pages against {c.baseline}"]
        if not s.worst:
            L.append(f"No page is worse than {c.baseline}'s on {c.metric}.")
        for w in s.worst:
            L += ["", f"### {w.page_id}: {c.metric} {w.baseline_value:.4f} → {w.variant_value:.4f}", "",
                  "| truth | " + c.baseline + " | " + s.name + " |", "|---|---|---|",
                  "| " + " | ".join(_cell(t, absent) for t, absent in ((w.truth, "(no truth: judged by checks)"),
                                                                      (w.baseline_output, "(no output)"),
                                                                      (w.variant_output, "(no output)"))) + " |"]
    return "\n".join(L) + "\n"


def _cell(text: str | None, absent: str) -> str:
    return _cut(text, absent).replace("|", "\\|").replace("\n", "<br>")
