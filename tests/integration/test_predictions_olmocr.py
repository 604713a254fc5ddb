"""Protects scoring other systems' outputs as they were written: olmOCR-bench's sample outputs
(``<pdf>_pg<N>_repeat<K>.md``, some in a sub-folder) scored against the sample PDFs without renaming, pages
no system produced listed, and several repeats of a page judged as olmOCR-bench aggregates them (each
check's passes averaged over the repeats). Integration tier: the math checks render with KaTeX in node."""

from __future__ import annotations

import json
import shutil

import pytest

from quantgate.io.scores import read_scores
from tests.support.cli import run_cli as _qg
from tests.support.paths import OLMOCR_SAMPLE, oracle_missing

_NEEDED = [OLMOCR_SAMPLE / n for n in ("pdfs", "dataset.jsonl", "marker", "mistral", "chatgpt", "olmocr_pipeline")]
pytestmark = pytest.mark.skipif(oracle_missing(*_NEEDED) is not None, reason=oracle_missing(*_NEEDED) or "")


@pytest.fixture(scope="module")
def pages(tmp_path_factory):
    out = tmp_path_factory.mktemp("olmocr") / "pages"
    rc, _, err = _qg("pages", "import", OLMOCR_SAMPLE / "pdfs", "-o", out, "--checks", OLMOCR_SAMPLE / "dataset.jsonl",
                     "--calibration-fraction", "0", "--megapixels", "0.3")
    assert rc == 0, err
    return out


def _score(pages, predictions, out) -> tuple[dict, str]:
    rc, stdout, err = _qg("score", "--pages", pages, "--predictions", predictions, "-o", out, "--metrics", "checks",
                          "--json")
    assert rc == 0, err
    return json.loads(stdout), err


def test_olmocr_bench_outputs_score_without_renaming(pages, tmp_path):
    summary, err = _score(pages, OLMOCR_SAMPLE / "marker", tmp_path / "marker.jsonl")
    rows = read_scores(tmp_path / "marker.jsonl")
    produced = {f.name.removesuffix("_repeat1.md") for f in (OLMOCR_SAMPLE / "marker").glob("*_repeat1.md")}
    assert produced and {p for p, r in rows.items() if r.error != "missing"} == produced
    # the pages marker's folder has no file for are listed by id, on the console and in the JSON
    missing = sorted(set(rows) - produced)
    assert summary["missing_pages"] == missing and len(missing) == summary["missing"] > 0
    assert all(m in err for m in missing) and "no prediction" in err
    # olmocr_pipeline keeps one category in a sub-folder: found there too
    summary, _ = _score(pages, OLMOCR_SAMPLE / "olmocr_pipeline", tmp_path / "pipeline.jsonl")
    n_files = sum(1 for _ in (OLMOCR_SAMPLE / "olmocr_pipeline").rglob("*.md"))
    assert summary["pages"] - summary["missing"] == n_files


def test_repeats_are_averaged_as_olmocr_bench_does(pages, tmp_path):
    """One folder holding marker's output as repeat 1 and mistral's as repeat 2 of every page both have: each
    page's checks value is the mean of the two systems' values, which is olmOCR-bench's per-check average over
    repeats (every repeat faces the same checks)."""
    both = tmp_path / "both"
    shutil.copytree(OLMOCR_SAMPLE / "marker", both)
    paired = []
    for f in sorted((OLMOCR_SAMPLE / "mistral").glob("*_repeat1.md")):
        if (both / f.name).is_file():
            shutil.copy(f, both / f.name.replace("_repeat1.md", "_repeat2.md"))
            paired.append(f.name.removesuffix("_repeat1.md"))
    _score(pages, OLMOCR_SAMPLE / "marker", tmp_path / "a.jsonl")
    _score(pages, OLMOCR_SAMPLE / "mistral", tmp_path / "b.jsonl")
    _score(pages, both, tmp_path / "both.jsonl")
    a, b, r = (read_scores(tmp_path / n) for n in ("a.jsonl", "b.jsonl", "both.jsonl"))
    assert len(paired) >= 10
    differ = 0
    for pid in paired:
        va, vb = a[pid].value("checks"), b[pid].value("checks")
        if va is None:
            assert r[pid].value("checks") is None
            continue
        assert r[pid].repeats == 2 and r[pid].value("checks") == pytest.approx((va + vb) / 2, abs=1e-12)
        differ += va != vb
    assert differ, "the two systems agree on every page: the average would not be seen"
    # a page with one output keeps one; the hash of two repeats is neither repeat's own
    assert all(r[pid].repeats == 1 for pid in r if pid not in paired and r[pid].error != "missing")
    assert all(r[pid].output_sha256 not in (a[pid].output_sha256, b[pid].output_sha256) for pid in paired)


def test_report_judges_prediction_folders_as_variants(pages, tmp_path):
    """`quantgate report OUT --predictions BASE CAND…`: the same verdicts `compare` makes on the systems' score
    files, the outcome first, pages without output listed, each system's worst pages shown."""
    sample = OLMOCR_SAMPLE
    rc, stdout, err = _qg("report", tmp_path / "cmp", "--pages", pages, "--predictions", sample / "marker",
                          sample / "mistral", sample / "chatgpt", "--metric", "checks", "--min-pages", "2")
    assert rc == 0, err
    cmp = json.loads((tmp_path / "cmp" / "comparison.json").read_text())
    report = (tmp_path / "cmp" / "report.md").read_text()
    assert [s["name"] for s in cmp["systems"]] == ["marker", "mistral", "chatgpt"]
    verdicts = {s["name"]: s["verdict"] for s in cmp["systems"][1:]}
    outcome = ("FAIL" if any(v["verdict"] == "regression" for v in verdicts.values()) else
               "UNDECIDED" if any(v["verdict"] == "inconclusive" for v in verdicts.values()) else "PASS")
    assert report.startswith(f"# {outcome}: 2 system(s) judged against marker on checks")
    assert stdout.strip().splitlines()[-1].startswith(f"{outcome}:")
    for name in ("mistral", "chatgpt"):  # the verdict `compare` makes on the same systems' score files
        _score(pages, sample / "marker", tmp_path / "marker.jsonl")
        _score(pages, sample / name, tmp_path / f"{name}.jsonl")
        rc, out, _ = _qg("compare", tmp_path / "marker.jsonl", tmp_path / f"{name}.jsonl", "--metric", "checks",
                         "--min-pages", "2", "--json")
        alone = json.loads(out)
        assert {k: alone[k] for k in ("verdict", "reason", "delta", "ci_low", "ci_high", "n")} == \
            {k: verdicts[name][k] for k in ("verdict", "reason", "delta", "ci_low", "ci_high", "n")}
        assert f"- **{name}**: {alone['verdict'].replace('_', ' ')} ({alone['reason']})" in report
    assert any(s["worst"] for s in cmp["systems"][1:])
    missing = cmp["systems"][0]["missing_pages"]
    assert missing and all(m in report for m in missing)
    for s in cmp["systems"][1:]:
        for w in s["worst"]:
            assert w["variant_value"] < w["baseline_value"]  # checks: higher is better
            assert f"### {w['page_id']}: checks {w['baseline_value']:.4f} → {w['variant_value']:.4f}" in report
