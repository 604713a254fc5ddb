"""A resumed study verifies what it reuses — page images and truths against pages.jsonl's
sha256 on every start, each run's requests.jsonl as a hash chain anchored to its run (``io.chain``). Whole
studies on the stub server (``tests.support.stub_study``), quantize stood in for."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from quantgate.errors import InputError
from tests.support.stub_study import run, study_yaml

CANDIDATES = {"same": 0.0, "bad": 0.6}


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """A finished stub study (12 pages, bf16 + two candidates) and its summary; each test works on a copy."""
    from quantgate.heldout.synth import synth_pages

    root = tmp_path_factory.mktemp("resume")
    synth_pages(root / "pages", 12, seed=5, profile="simple", calibration_fraction=0.0)
    study = study_yaml(root / "study.yaml", root / "pages", CANDIDATES, min_pages=5)
    summary = run(study, root / "out")
    return root, summary


@pytest.fixture
def copy(finished, tmp_path):
    """The finished study's pages, study file and folder copied to ``tmp_path`` (the study names its pages by
    an absolute path: rewritten to the copy's)."""
    root, summary = finished
    shutil.copytree(root / "pages", tmp_path / "pages")
    shutil.copytree(root / "out", tmp_path / "out")
    text = (root / "study.yaml").read_text().replace(str((root / "pages").resolve()), str(tmp_path / "pages"))
    (tmp_path / "study.yaml").write_text(text)
    return tmp_path, summary


def _verdicts(summary: dict) -> list:
    return [(v["variant"], v["metric"], v["verdict"], v["delta"], v["ci_low"], v["ci_high"])
            for v in summary["verdicts"]]


def _lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines()]


def test_every_record_is_chained_to_its_run_and_the_one_before(copy):
    from quantgate.io.chain import record_digest

    root, _ = copy
    for name in ("bf16", "same", "bad"):
        recs = _lines(root / "out" / "runs" / name / "requests.jsonl")
        assert recs and all(r["schema_version"] == 3 for r in recs)
        assert all(b["prev"] == record_digest(a) for a, b in zip(recs, recs[1:], strict=False))
    firsts = {_lines(root / "out" / "runs" / n / "requests.jsonl")[0]["prev"] for n in ("bf16", "same", "bad")}
    assert len(firsts) == 3  # each run's first record points at its own run


def test_another_runs_records_copied_in_are_refused_naming_the_file(copy):
    """bf16's requests.jsonl over bad's made a resumed study say `within noise` for bad."""
    root, _ = copy
    target = root / "out" / "runs" / "bad" / "requests.jsonl"
    shutil.copy(root / "out" / "runs" / "bf16" / "requests.jsonl", target)
    with pytest.raises(InputError, match=rf"{target}:1: the record chain is broken .*the run this folder holds"):
        run(root / "study.yaml", root / "out")


@pytest.mark.parametrize("edit", ["output", "swap", "delete_middle", "unchained_tail"])
def test_an_edited_run_is_refused_naming_file_and_line(copy, edit):
    root, _ = copy
    path = root / "out" / "runs" / "bad" / "requests.jsonl"
    lines = path.read_text().splitlines()
    if edit == "output":
        rec = json.loads(lines[2])
        rec["output"] = "forged"
        lines[2] = json.dumps(rec, ensure_ascii=False)
    elif edit == "swap":
        lines[1], lines[2] = lines[2], lines[1]
    elif edit == "delete_middle":
        del lines[1]
    else:
        rec = json.loads(lines[-1])
        rec.update(schema_version=2, prev=None, page_id="extra")
        del rec["prev"]
        lines.append(json.dumps(rec))
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(InputError, match=rf"{path}:\d+: .*(chain is broken|unchained record)"):
        run(root / "study.yaml", root / "out")


def test_a_torn_tail_is_cut_and_the_chain_still_verifies(copy):
    """A SIGKILL mid-append leaves half a line: it is cut, the chain before it verifies, that page is re-sent."""
    root, summary = copy
    path = root / "out" / "runs" / "bad" / "requests.jsonl"
    lines = path.read_text().splitlines()
    path.write_text("\n".join(lines[:-1]) + "\n" + lines[-1][: len(lines[-1]) // 2])
    (root / "out" / "summary.json").unlink()
    again = run(root / "study.yaml", root / "out")
    assert _verdicts(again) == _verdicts(summary)
    recs = _lines(path)
    assert len(recs) == len(lines)  # the torn record re-sent once, chained on the cut file


@pytest.mark.parametrize("what", ["truth_edited", "truth_deleted", "image_edited", "image_deleted"])
def test_a_changed_page_file_is_refused_before_anything_is_reused(copy, what):
    """An edited truth was re-scored from the forgery, a deleted image went unnoticed (`pages: reused`)."""
    root, _ = copy
    page = json.loads((root / "pages" / "pages.jsonl").read_text().splitlines()[3])
    path = root / "pages" / (page["truth"] if what.startswith("truth") else page["image"])
    before = {p: p.read_bytes() for p in (root / "out").rglob("*") if p.is_file() and p.name != ".study.lock"}
    if what.endswith("deleted"):
        path.unlink()
    else:
        path.write_bytes(path.read_bytes() + b" forged")
    word = "missing" if what.endswith("deleted") else "changed since"
    with pytest.raises(InputError, match=rf"{path} \(page {page['id']}'s (truth|image)\) (is )?{word}"):
        run(root / "study.yaml", root / "out")
    after = {p: p.read_bytes() for p in (root / "out").rglob("*") if p.is_file() and p.name != ".study.lock"}
    changed = [p for p in after if before.get(p) != after[p] and p.name not in ("study.json", "timings.jsonl")]
    assert not changed, changed


def test_records_written_before_the_chain_are_still_read(copy):
    """Schema-2 lines (no ``prev``): read as before, and a resumed run chains its new records after them."""
    from quantgate.io.chain import record_digest
    from quantgate.serve.run import load_records

    root, summary = copy
    path = root / "out" / "runs" / "bad" / "requests.jsonl"
    old = []
    for rec in _lines(path):
        rec.update(schema_version=2)
        del rec["prev"]
        old.append(rec)
    path.write_text("".join(json.dumps(r) + "\n" for r in old[:-1]))
    assert len(load_records(path.parent)) == len(old) - 1
    (root / "out" / "summary.json").unlink()
    again = run(root / "study.yaml", root / "out")
    assert _verdicts(again) == _verdicts(summary)
    recs = _lines(path)
    assert recs[-1]["schema_version"] == 3 and recs[-1]["prev"] == record_digest(recs[-2])
