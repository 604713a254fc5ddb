"""junit.xml: one test case per verdict (variant × metric, and lm-eval's), for CI systems' test tabs.
A regression or not_equivalent fails its case, an inconclusive one is skipped with its reason and what
would decide it; each message carries the reason and the numbers the verdict rests on."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from quantgate.schema.summary import Summary

FAILS = ("regression", "not_equivalent")


def _numbers(v) -> str:
    shift = "" if v.noise_delta is None else f" (shift {v.noise_delta:+.4f})"
    floor = "none" if v.noise_floor is None else f"{v.noise_floor:.4f}{shift}"
    holm = "" if v.p_regression_holm is None else f", p_regression_holm {v.p_regression_holm:.3g}"
    changed = "" if v.pages_changed is None else f", {v.pages_changed} of {v.pages_compared} pages changed"
    if v.documents is not None:  # issue 27: what the verdict rests on beyond the pages
        base = "–" if v.baseline_score is None else f"{v.baseline_score:.4f}"
        deff = "–" if v.design_effect is None else f"{v.design_effect:.2f}"
        changed += f", baseline score {base}, {v.documents} documents, design effect {deff}, flips {v.flips}"
    return (f"{v.test}, delta {v.delta:+.4f}, one-sided {1 - v.alpha:.0%} bounds [{v.ci_low:+.4f}, {v.ci_high:+.4f}] "
            f"({v.interval}), margin {v.margin:.4f} ({v.margin_source}), noise floor {floor}, n {v.n}{holm}{changed}")


def render_junit(r: Summary) -> str:
    # (variant, case name, verdict row): the report's verdicts, then lm-eval's
    vs = [(v.variant, v.metric + (f" [{v.tag}]" if v.tag else ""), v) for v in r.verdicts] + [
        (v.variant, f"lm-eval/{v.task}/{v.metric}", v) for v in (r.lm_eval.verdicts if r.lm_eval else [])]
    suite = ET.Element("testsuite", name=f"quantgate.{r.study['name']}", tests=str(len(vs) + (not r.complete)),
                       failures=str(sum(v.verdict in FAILS for _, _, v in vs)),
                       skipped=str(sum(v.verdict == "inconclusive" for _, _, v in vs)), errors=str(int(not r.complete)))
    for variant, name, v in vs:
        case = ET.SubElement(suite, "testcase", classname=f"quantgate.{variant}", name=name)
        head = f"{v.verdict} ({v.reason}): {v.message}"
        if v.verdict in FAILS:
            ET.SubElement(case, "failure", message=head, type=v.verdict).text = _numbers(v)
        elif v.verdict == "inconclusive":
            ET.SubElement(case, "skipped", message=head).text = _numbers(v)
        else:
            ET.SubElement(case, "system-out").text = f"{head}; {_numbers(v)}"
    if not r.complete:
        case = ET.SubElement(suite, "testcase", classname="quantgate.study", name="complete")
        ET.SubElement(case, "error", message="the study is incomplete", type="incomplete")
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suite, encoding="unicode") + "\n"
