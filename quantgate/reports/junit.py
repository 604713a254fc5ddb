"""junit.xml: one test case per variant × metric verdict, for CI systems' test tabs."""

from __future__ import annotations

import xml.etree.ElementTree as ET


def render_junit(r: dict) -> str:
    vs = list(r["verdicts"]) + [{**v, "metric": f"lm-eval/{v['task']}/{v['metric']}"}
                                for v in (r.get("lm_eval") or {}).get("verdicts", [])]
    suite = ET.Element("testsuite", name=f"quantgate.{r['study']['name']}", tests=str(len(vs)),
                       failures=str(sum(v["verdict"] == "regression" for v in vs)),
                       skipped=str(sum(v["verdict"] == "inconclusive" for v in vs)), errors="0")
    for v in vs:
        case = ET.SubElement(suite, "testcase", classname=f"quantgate.{v['variant']}", name=v["metric"])
        msg = (f"delta {v['delta']:+.4f}, 90% CI [{v['ci_low']:+.4f}, {v['ci_high']:+.4f}], margin {v['margin']:.4f}, "
               f"n {v['n']}")
        if v["verdict"] == "regression":
            ET.SubElement(case, "failure", message=f"regression: {msg}", type="regression").text = msg
        elif v["verdict"] == "inconclusive":
            ET.SubElement(case, "skipped", message=f"inconclusive: {msg}; about {v.get('pages_needed')} pages needed")
        else:
            ET.SubElement(case, "system-out").text = f"within noise: {msg}"
    if not r["complete"]:
        case = ET.SubElement(suite, "testcase", classname="quantgate.study", name="complete")
        ET.SubElement(case, "error", message="the study is incomplete", type="incomplete")
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suite, encoding="unicode") + "\n"
