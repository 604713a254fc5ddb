"""Protects the report's "Metric families" section: a study scored on OmniDocBench v1.5, ParseBench and olmOCR-bench
metrics gets each family's verdict rows under its name and each variant's whole-set headline, equal to the mean of
the bound score files' values over the pages each metric applies to (computed here from the files' lines); Overall
is labelled not computed; a score file edited after the study is named and its numbers left out; a study without a
family metric gets no section. Synthetic finished study folders (their provenance asks git, so not the unit tier)."""

import json
import re

import pytest

from quantgate.reports import load_summary, write_reports
from quantgate.reports.families import score_path
from quantgate.study.verdicts import score_file
from tests.support.study_folder import finished_study

FAMILY_METRICS = ["ned", "omnidoc15_text_edit", "omnidoc15_table_teds", "parsebench_content", "checks"]


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("families")
    return {"families": finished_study(root / "families", {"fp8": 0.0005, "bad": 0.2}, metrics=FAMILY_METRICS,
                                       worst_page_damage={m: 0.1 for m in FAMILY_METRICS}),
            "plain": finished_study(root / "plain", {"fp8": 0.0005})}


def _means(out, variant: str) -> dict[str, tuple[float, int]]:
    """Each metric's mean over the score file's non-null values, and how many, read straight off its lines."""
    rows = [json.loads(line) for line in (out / "scores" / f"{variant}-c1.jsonl").read_text().splitlines()]
    values = {m: [r[m] for r in rows if r.get(m) is not None] for m in FAMILY_METRICS}
    return {m: (sum(v) / len(v), len(v)) for m, v in values.items()}


def _section(text: str, title: str) -> str:
    body = text.split("## Metric families", 1)[1].split("\n## ", 1)[0]
    return body.split(f"### {title}", 1)[1].split("\n### ", 1)[0]


# family title → (metric, the headline's name as upstream's leaderboard prints it)
FAMILIES = {"OmniDocBench v1.5": [("omnidoc15_text_edit", "text edit distance"), ("omnidoc15_table_teds", "table TEDS")],
            "ParseBench": [("parsebench_content", "content_faithfulness")],
            "olmOCR-bench": [("checks", "pass rate")]}


def test_each_family_shows_its_verdicts_and_headlines_from_the_score_files(folders):
    out = folders["families"]
    md, html = (out / "report.md").read_text(), (out / "report.html").read_text()
    assert md.count("## Metric families") == 1 and "<h2>Metric families</h2>" in html
    summary = load_summary(out)
    means = {v: _means(out, v) for v in ("bf16", "fp8", "bad")}
    for title, pairs in FAMILIES.items():
        part = _section(md, title)
        rows = [line for line in part.splitlines() if line.startswith("| ") and "|---" not in line]
        # its verdict rows, and only its own: ned (no family) and the other families' metrics are not under it
        verdict_rows = [line for line in rows if line.split(" | ")[0] in ("| fp8", "| bad")]
        assert sorted(r.split(" | ")[1] for r in verdict_rows) == sorted(m for m, _ in pairs for _ in ("fp8", "bad"))
        for v in summary.verdicts:
            if v.metric in dict(pairs):
                assert f"| {v.label} | {v.metric} | {v.verdict.replace('_', ' ')} | {v.delta:+.4f} |" in part
        for metric, name in pairs:
            head = next(line for line in rows if line.startswith(f"| {name} |"))
            for cell, variant in zip(head.split(" | ")[1:4], ("bf16", "fp8", "bad"), strict=True):
                mean, n = means[variant][metric]
                assert cell == f"{mean:.4f} ({n} pages)", (metric, variant, cell)
                assert f"<td>{mean:.4f} ({n} pages)</td>" in html
    # the candidate that reads worse shows it in the headline; a null (not applicable) page is left out of the mean
    assert means["bad"]["omnidoc15_text_edit"][0] > means["bf16"]["omnidoc15_text_edit"][0]
    assert means["bf16"]["omnidoc15_text_edit"][1] < means["bf16"]["ned"][1]
    assert "Overall: not computed" in _section(md, "OmniDocBench v1.5")
    assert "| ned |" not in md.split("## Metric families", 1)[1].split("\n## ", 1)[0]


def test_a_score_file_changed_after_the_study_is_named_and_not_read(folders, tmp_path):
    import shutil

    out = shutil.copytree(folders["families"], tmp_path / "copy")
    f = out / score_file("bad", 1)
    lines = f.read_text().splitlines()
    row = json.loads(lines[0])
    row["omnidoc15_text_edit"] = 0.0 if row["omnidoc15_text_edit"] else 1.0
    f.write_text("\n".join([json.dumps(row), *lines[1:]]) + "\n")
    write_reports(load_summary(out), out)
    part = _section((out / "report.md").read_text(), "OmniDocBench v1.5")
    assert f"bad: {score_file('bad', 1)} changed since the study" in part
    head = next(line for line in part.splitlines() if line.startswith("| text edit distance |"))
    assert re.fullmatch(r"\| text edit distance \| \S+ \(\d+ pages\) \| \S+ \(\d+ pages\) \| – \| .*", head), head


def test_a_study_without_family_metrics_has_no_section(folders):
    out = folders["plain"]
    assert "Metric families" not in (out / "report.md").read_text()
    assert "Metric families" not in (out / "report.html").read_text()


def test_the_report_reads_the_score_file_the_study_writes(folders):
    summary = load_summary(folders["families"])
    for v in ("bf16", "fp8", "bad"):
        assert score_path(summary, v) == score_file(v, summary.compare_level)
