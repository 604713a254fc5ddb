"""Verdicts per page tag. A stub study whose pages carry ``language:`` tags and whose
candidate answers only the Chinese pages badly: the ``language:zh`` row is a regression, the English row is
not, a value on one page is an inconclusive row (too few pages) rather than an error; every row is in the
study's Holm family, in summary.json and report.md, and the gate makes each again (an edited tag row is
refused)."""

from __future__ import annotations

import json
import shutil

import pytest

from quantgate.gate.check import INCONCLUSIVE, INVALID, REGRESSION, gate
from tests.support.stub_study import run, study_yaml

N, ZH, FR = 40, range(0, 6), 39  # pages 0-5 Chinese, 39 French, the rest English
SETTINGS = dict(verdicts_by_tag=["language"], metrics=["ned"], margins={"ned": 0.1}, min_pages=5, min_documents=5)


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    from quantgate.heldout.synth import synth_pages

    root = tmp_path_factory.mktemp("tags")
    synth_pages(root / "pages", N, seed=7, profile="simple", calibration_fraction=0.0)
    lines = (root / "pages" / "pages.jsonl").read_text().splitlines()
    tagged = []
    for k, line in enumerate(lines):
        page = json.loads(line)
        lang = "zh" if k in ZH else "fr" if k == FR else "en"
        page["tags"] = [*page["tags"], f"language:{lang}"]
        tagged.append(json.dumps(page))
    (root / "pages" / "pages.jsonl").write_text("\n".join(tagged) + "\n")
    study = study_yaml(root / "study.yaml", root / "pages", {"cand": 0.0}, corrupt_tag={"cand": "language:zh"},
                       **SETTINGS)
    return root, run(study, root / "out")


def _rows(summary: dict) -> dict:
    return {v.get("tag"): v for v in summary["verdicts"]}


def test_each_tag_value_is_judged_on_its_own_pages(finished):
    _, summary = finished
    rows = _rows(summary)
    assert list(rows) == [None, "language:en", "language:fr", "language:zh"]  # overall first, then by value
    assert summary["complete"]
    zh, en, fr, overall = rows["language:zh"], rows["language:en"], rows["language:fr"], rows[None]
    assert (zh["n"], en["n"], fr["n"], overall["n"]) == (6, 33, 1, N)
    assert zh["verdict"] == "regression" and zh["p_regression_holm"] <= zh["alpha"]
    assert en["verdict"] == "within_noise" and en["delta"] == 0
    assert (fr["verdict"], fr["reason"]) == ("inconclusive", "too_few_pages")
    # the damage of the Chinese pages, diluted over all pages: the overall shift is the tag's, weighted by its share,
    # within the margin, so overall is no regression ("within noise overall, regression on Chinese")
    assert overall["delta"] == pytest.approx(zh["delta"] * len(ZH) / N) and overall["verdict"] != "regression"
    # one family: Holm over the 4 rows (the smallest p multiplied by 4, at most)
    ps = sorted(v["p_regression"] for v in summary["verdicts"])
    assert min(v["p_regression_holm"] for v in summary["verdicts"]) == pytest.approx(min(1.0, 4 * ps[0]))


def test_report_shows_tag_rows_labelled(finished):
    root, _ = finished
    md = (root / "out" / "report.md").read_text()
    assert "| cand [language:zh] | ned" in md and "| cand [language:fr] | ned" in md
    assert "**cand [language:zh] × ned** (" in md


def test_gate_remakes_tag_rows_and_refuses_an_edited_one(finished, tmp_path):
    root, _ = finished
    res = gate(root / "out")
    assert res.code == REGRESSION  # the Chinese regression fails the gate, though the overall row does not
    assert any(line.startswith("inconclusive ") and "cand ned" in line for line in res.lines)
    assert any(line.startswith("regression ") and "cand [language:zh] ned" in line for line in res.lines)
    out = tmp_path / "out"
    shutil.copytree(root / "out", out)
    summ = json.loads((out / "summary.json").read_text())
    for v in summ["verdicts"]:
        if v.get("tag") == "language:zh":
            v["verdict"], v["reason"] = "within_noise", "ci_inside_margin"
    (out / "summary.json").write_text(json.dumps(summ))
    res = gate(out)
    assert res.code == INVALID and "language:zh" in res.lines[0], res.lines
    summ["verdicts"] = [v for v in summ["verdicts"] if v.get("tag") != "language:fr"]
    (out / "summary.json").write_text(json.dumps(summ))
    res = gate(out)
    assert res.code == INVALID and "lacks the verdict of cand × ned × language:fr" in res.lines[0], res.lines


def test_small_tag_values_make_the_gate_inconclusive_not_a_pass(finished, tmp_path):
    """Small tag values give inconclusive rows: with no regression anywhere, the gate says 2, not 0."""
    root, _ = finished
    study = study_yaml(tmp_path / "study.yaml", root / "pages", {"cand": 0.0}, **SETTINGS)
    summary = run(study, tmp_path / "out")
    rows = _rows(summary)
    assert rows[None]["verdict"] == "within_noise" and "regression" not in {v["verdict"] for v in rows.values()}
    # 6 pages cannot rule out a rare failure: inconclusive, as a study of 6 pages would be
    assert rows["language:zh"]["reason"] == "rare_failures_not_ruled_out"
    assert rows["language:fr"]["reason"] == "too_few_pages"
    assert gate(tmp_path / "out").code == INCONCLUSIVE


def test_sequential_with_tags_is_refused():
    from quantgate.errors import InputError
    from quantgate.schema.base import parse_record
    from quantgate.study.spec import Study

    body = {"name": "s", "model": "m", "pages": {"path": "p"}, "variants": [{"name": "bf16", "recipe": "bf16"},
            {"name": "c", "recipe": "fp8-dynamic"}], "verdicts_by_tag": ["language"], "sequential": {"looks": 2}}
    with pytest.raises(InputError, match="verdicts_by_tag"):
        parse_record(Study, body, where="study.yaml")
