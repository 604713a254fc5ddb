"""junit.xml: one test case per variant × metric verdict, for CI systems' test tabs."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from quantgate.reports.schema import Summary


def render_junit(r: Summary) -> str:
    # (variant, case name, verdict row): the report's verdicts, then lm-eval's
    vs = [(v.variant, v.metric, v) for v in r.verdicts] + [
        (v.variant, f"lm-eval/{v.task}/{v.metric}", v) for v in (r.lm_eval.verdicts if r.lm_eval else [])]
    suite = ET.Element("testsuite", name=f"quantgate.{r.study['name']}", tests=str(len(vs)),
                       failures=str(sum(v.verdict == "regression" for _, _, v in vs)),
                       skipped=str(sum(v.verdict == "inconclusive" for _, _, v in vs)), errors="0")
    for variant, name, v in vs:
        case = ET.SubElement(suite, "testcase", classname=f"quantgate.{variant}", name=name)
        msg = f"delta {v.delta:+.4f}, 90% CI [{v.ci_low:+.4f}, {v.ci_high:+.4f}], margin {v.margin:.4f}, n {v.n}"
        if v.verdict == "regression":
            ET.SubElement(case, "failure", message=f"regression: {msg}", type="regression").text = msg
        elif v.verdict == "inconclusive":
            ET.SubElement(case, "skipped", message=f"inconclusive: {msg}; about {getattr(v, 'pages_needed', None)} "
                          "pages needed")
        else:
            ET.SubElement(case, "system-out").text = f"within noise: {msg}"
    if not r.complete:
        case = ET.SubElement(suite, "testcase", classname="quantgate.study", name="complete")
        ET.SubElement(case, "error", message="the study is incomplete", type="incomplete")
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suite, encoding="unicode") + "\n"
