"""A report that leads with the outcome: one banner — PASS / FAIL / UNDECIDED / INVALID and the reason that matters
most per variant — first in report.md and report.html, its word the gate's exit on the same folder; sizes by one
rounding rule in both reports; formats as words; the time budget naming the step that ran; speed shown once (the
timed waves when the study has them). Synthetic finished study folders (their provenance asks git, so not the unit tier)."""

import re

import pytest

from quantgate.gate import gate
from quantgate.reports import load_summary, write_reports
from quantgate.reports.budget import budget_rows
from quantgate.reports.outcome import outcome
from quantgate.reports.sizes import formats_text, megabytes, times_smaller
from quantgate.schema.timings import TimeBudget
from tests.support.study_folder import finished_study

GATE_WORD = {0: "PASS", 1: "FAIL", 2: "UNDECIDED"}


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("outcome")
    return {
        "pass": finished_study(root / "pass", {"fp8": 0.0005}),
        "fail": finished_study(root / "fail"),
        "small": finished_study(root / "small", {"fp8": 0.0005}, pages=8),
        "unfit": finished_study(root / "unfit", {"fp8": 0.0005, "bad": 0.2}, baseline_floor={"ned": 0.01}),
    }


@pytest.mark.parametrize("name", ["pass", "fail", "small", "unfit"])
def test_the_banner_word_is_the_gates_exit(folders, name):
    out = folders[name]
    code, _ = gate(out)
    o = outcome(load_summary(out))
    assert o.word == GATE_WORD[code], (name, o)
    assert o.word == {"pass": "PASS", "fail": "FAIL", "small": "UNDECIDED", "unfit": "UNDECIDED"}[name]


def test_each_variant_gets_the_reason_that_matters_most(folders):
    o = outcome(load_summary(folders["fail"]))
    by = {x.name: x for x in o.variants}
    assert by["fp8"].word == "PASS" and by["bad"].word == "FAIL"
    assert "worse than the baseline" in by["bad"].reason and "beyond the margin" in by["bad"].reason
    small = {x.name: x for x in outcome(load_summary(folders["small"])).variants}
    assert small["fp8"].word == "UNDECIDED" and "30" in small["fp8"].reason and "2 more undecided" in small["fp8"].reason


def test_an_unfit_baseline_is_said_once_not_per_verdict(folders):
    r = load_summary(folders["unfit"])
    o = outcome(r)
    assert o.reason.startswith("baseline unfit: bf16 scores ") and "ned (floor 0.01)" in o.reason
    md = (folders["unfit"] / "report.md").read_text()
    banner = md.split("\n\n", 2)[1]
    assert banner.count("baseline unfit") == 1 and banner.count("unfit on ned (above)") == 1  # fp8 points up to it
    assert "**bad: FAIL** — cer: " in banner  # its regression on a metric the baseline reads stays its reason


def test_an_incomplete_study_is_invalid(folders):
    r = load_summary(folders["pass"]).model_copy(update={"complete": False})
    assert outcome(r).word == "INVALID"


def test_both_reports_lead_with_the_banner(folders):
    out = folders["fail"]
    md = (out / "report.md").read_text()
    assert md.splitlines()[2] == "> **FAIL** — 1 of 2 candidate(s) regress"
    assert md.index("> - **bad: FAIL** — ") < md.index("| variant | metric |")
    html = (out / "report.html").read_text()
    assert html.index("<div class='banner FAIL' id='outcome'><p><b>FAIL</b>") < html.index("<table")
    assert "<li><b>fp8: PASS</b> — every verdict within noise (ned, cer, bow_f1)</li>" in html


def test_sizes_and_formats_by_one_rule_in_both_reports(folders):
    assert formats_text({"fp8": 16, "bf16": 26}) == "26 BF16 · 16 FP8"
    assert formats_text(None) == "–" and times_smaller(1.7953) == "1.80×" and megabytes(4_052_000) == "4.1"
    out = folders["pass"]
    r = load_summary(out)
    md, html = (out / "report.md").read_text(), (out / "report.html").read_text()
    for v in r.variants:
        row = next(line for line in md.splitlines() if line.startswith(f"| {v.name} | {v.recipe} |"))
        assert f"| {megabytes(v.weights_bytes)} | {times_smaller(v.compression)} | {formats_text(v.formats)} |" in row
        assert (f"<td>{megabytes(v.weights_bytes)}</td><td>{times_smaller(v.compression)}</td>"
                f"<td>{formats_text(v.formats)}</td>") in html
    assert not re.search(r"\{'\w+': \d+", md + html)  # no Python dict


def test_the_time_budget_names_the_pages_step_that_ran(folders):
    r = load_summary(folders["pass"])
    budget = TimeBudget.model_validate({
        "session": "s", "wall_s": 10.0, "engine_start_s": 1.0, "generation_s": 4.0, "lmeval_s": 0.0,
        "overhead_s": 5.0, "overhead_share": 0.5, "background_s": 0.0,
        "rows": [{"part": "pages", "variant": None, "wall_s": 1.0},
                 {"part": "accuracy", "variant": "fp8", "wall_s": 4.0, "generation_s": 4.0, "requests": 40}]})
    synth = r.model_copy(update={"time_budget": budget, "study": {**r.study, "pages": {"synth": {"n": 40}}}})
    imported = r.model_copy(update={"time_budget": budget, "study": {**r.study, "pages": {"path": "/data/pages"}}})
    assert budget_rows(synth)[0][0]["part"] == "pages (synthesize)"
    assert budget_rows(imported)[0][0]["part"] == "pages (import: copied into the study folder)"
    assert budget_rows(imported)[0][1]["generation_s"] == "4.0 (40 requests, 10.00 pages/s)"


def test_speed_appears_once_the_timed_waves(tmp_path):
    out = finished_study(tmp_path / "waves", {"fp8": 0.0005}, speed={"repeats": 3, "levels": [1]})
    write_reports(load_summary(out), out)
    md = (out / "report.md").read_text()
    speed = md[md.index("## Speed"):md.index("## Variants")]
    assert "Speed levels in repeated waves" in speed and "| variant | concurrency | pages/s |" not in speed
    html = (out / "report.html").read_text()
    speed = html[html.index("<h2>Speed</h2>"):html.index("<h2>Variants</h2>")]
    assert "waves × requests" in speed and "<th>pages/s</th>" not in speed
    assert "Throughput and p90 latency against concurrency (timed waves, their means)" in html
    # without waves, the accuracy pass's levels are the speed
    plain = (tmp_path / "plain")
    plain = finished_study(plain, {"fp8": 0.0005})
    md = (plain / "report.md").read_text()
    assert "| variant | concurrency | pages/s |" in md and "repeated waves" not in md
