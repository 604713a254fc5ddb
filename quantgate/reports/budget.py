"""The report's sequential stopping points and time budget: rows both renderers print (report.md, report.html)."""

from __future__ import annotations

from quantgate.schema.summary import Summary

PART = {"pages": "pages (synthesize)", "quantize": "quantize", "server_start": "server start", "accuracy": "accuracy pass",
        "speed": "speed level", "speed_profile": "decode profile", "lmeval": "lm-eval", "score": "scoring", "report": "compare and report",
        "other": "between stages"}
SPENDING = {"obrien_fleming": "O'Brien–Fleming", "pocock": "Pocock"}


def sequential_rows(r: Summary) -> list[dict[str, str]]:
    """Per sequential candidate: where its pass stopped, and each metric's verdict with the look it was decided at."""
    out = []
    for v in r.variants:
        d = v.sequential
        if d is None:
            continue
        metrics = [f"{m}: {s.verdict}" + (f" at look {s.decided_at_look} ({d.looks[s.decided_at_look - 1]} pages)"
                                          if s.decided_at_look else " (undecided)") for m, s in d.metrics.items()]
        out.append({"variant": v.name, "stop": d.stop_line(), "metrics": "; ".join(metrics),
                    "plan": f"{SPENDING[d.spending]} spending, looks at "
                            f"{', '.join(map(str, d.looks))} pages, nominal α "
                            + ", ".join(f"{b.nominal_alpha:.2g}" for b in d.plan)})
    return out


def _pace(x) -> str:
    """The accuracy pass's throughput, here only: the report's speed is the timed waves when the study has them."""
    return f", {x.requests / x.generation_s:.2f} pages/s" if x.part == "accuracy" and x.requests and x.generation_s else ""


def _part(part: str, r: Summary) -> str:
    """The step that ran, by name: a study's pages are synthesized, or an imported page set is copied into its folder."""
    if part == "pages" and not (r.study.get("pages") or {}).get("synth"):
        return "pages (import: copied into the study folder)"
    return PART[part]


def budget_rows(r: Summary) -> tuple[list[dict[str, str]], str]:
    """(one row per part and variant: seconds, share of the wall time, generation inside it; the summary
    sentence with the overhead share)."""
    b = r.time_budget
    if b is None:
        return [], ""
    rows = [{"part": _part(x.part, r), "variant": x.variant or "–", "wall_s": f"{x.wall_s:.1f}",
             "share": f"{x.wall_s / b.wall_s:.1%}", "generation_s": "–" if x.generation_s is None else
             f"{x.generation_s:.1f} ({x.requests} requests{_pace(x)})", "reused": "reused" if x.reused else "started in the background, beside other work (the part that ran alone)"
             if x.background else ""} for x in b.rows]
    text = (f"Wall time {b.wall_s:.1f} s (this run of `quantgate study`, until the report was built): server starts "
            f"{b.engine_start_s:.1f} s ({b.engine_start_s / b.wall_s:.1%}), generation {b.generation_s:.1f} s "
            f"({b.generation_s / b.wall_s:.1%}; time with a page request in flight), lm-eval {b.lmeval_s:.1f} s; "
            f"quantgate's own overhead {b.overhead_s:.1f} s = **{b.overhead_share:.1%}** (everything that is not a "
            "server start, generation or lm-eval: quantize, scoring, reporting, sequential looks, warm-up requests, "
            "loading)." + (f" Server starts' time beside another stage (not in the sum): {b.background_s:.1f} s."
                           if b.background_s else ""))
    return rows, text
