"""junit.xml: one test case per verdict (variant × metric, and lm-eval's), for CI systems' test tabs.

Only ``within_noise`` passes. A regression or not_equivalent fails its case, and so does an inconclusive one
(``baseline_unfit`` included): a CI widget must never show green tests on a red job, and a skipped case reads as
green. Each failure's message carries the verdict's reason and what would decide it; its text the numbers the
verdict rests on. ``study`` writes the file from the verdicts it made, ``gate`` again from the verdicts it has just
remade (``render_verdicts``), and a folder the gate cannot trust is one error case naming why (``render_invalid``)."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Iterable

from quantgate.schema.summary import Summary
from quantgate.schema.verdict import Verdict

FAILS = ("regression", "not_equivalent", "inconclusive")  # every word but within_noise


def _numbers(v) -> str:
    shift = "" if v.noise_delta is None else f" (shift {v.noise_delta:+.4f})"
    floor = "none" if v.noise_floor is None else f"{v.noise_floor:.4f}{shift}"
    holm = "" if v.p_regression_holm is None else f", p_regression_holm {v.p_regression_holm:.3g}"
    changed = "" if v.pages_changed is None else f", {v.pages_changed} of {v.pages_compared} pages changed"
    if v.documents is not None:  # what the verdict rests on beyond the pages
        base = "–" if v.baseline_score is None else f"{v.baseline_score:.4f}"
        deff = "–" if v.design_effect is None else f"{v.design_effect:.2f}"
        changed += f", baseline score {base}, {v.documents} documents, design effect {deff}, flips {v.flips}"
    return (f"{v.test}, delta {v.delta:+.4f}, one-sided {1 - v.alpha:.0%} bounds [{v.ci_low:+.4f}, {v.ci_high:+.4f}] "
            f"({v.interval}), margin {v.margin:.4f} ({v.margin_source}), noise floor {floor}, n {v.n}{holm}{changed}")


def _case_name(v: Verdict) -> tuple[str, str]:
    """(classname, name): a page verdict by variant and metric (and tag), an lm-eval one by task and metric."""
    task = getattr(v, "task", None)
    if task is not None:
        return f"quantgate.{v.variant}", f"lm-eval/{task}/{v.metric}"
    return f"quantgate.{v.variant}", v.metric + (f" [{v.tag}]" if v.tag else "")


def _suite(name: str, rows: list[Verdict], extra_errors: int = 0) -> ET.Element:
    return ET.Element("testsuite", name=f"quantgate.{name}", tests=str(len(rows) + extra_errors),
                      failures=str(sum(v.verdict in FAILS for v in rows)), skipped="0", errors=str(extra_errors))


def _xml(suite: ET.Element) -> str:
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suite, encoding="unicode") + "\n"


def _error_case(suite: ET.Element, name: str, message: str, kind: str) -> None:
    case = ET.SubElement(suite, "testcase", classname="quantgate.study", name=name)
    ET.SubElement(case, "error", message=message, type=kind)


def render_verdicts(name: str, rows: Iterable[Verdict], incomplete: bool = False) -> str:
    """One suite: a case per verdict row (page verdicts and lm-eval's), and an error case for an unfinished study."""
    rows = list(rows)
    suite = _suite(name, rows, int(incomplete))
    for v in rows:
        classname, case_name = _case_name(v)
        case = ET.SubElement(suite, "testcase", classname=classname, name=case_name)
        head = f"{v.verdict} ({v.reason}): {v.message}"
        if v.verdict in FAILS:
            ET.SubElement(case, "failure", message=head, type=v.verdict).text = _numbers(v)
        else:
            ET.SubElement(case, "system-out").text = f"{head}; {_numbers(v)}"
    if incomplete:
        _error_case(suite, "complete", "the study is incomplete", "incomplete")
    return _xml(suite)


def render_invalid(name: str, reason: str) -> str:
    """A study folder the gate cannot trust: one error case whose message is the gate's one line."""
    suite = ET.Element("testsuite", name=f"quantgate.{name}", tests="1", failures="0", skipped="0", errors="1")
    _error_case(suite, "valid study folder", reason, "invalid")
    return _xml(suite)


def render_junit(r: Summary) -> str:
    """The study's own junit.xml: its verdicts, then lm-eval's."""
    return render_verdicts(r.study["name"], [*r.verdicts, *(r.lm_eval.verdicts if r.lm_eval else [])],
                           incomplete=not r.complete)
