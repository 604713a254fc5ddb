"""A page set outside the study folder is copied in (``<out>/pages``, verified by
sha256 against pages.jsonl, ``study.pagecopy``), so the gate binds its images and truths as it binds an inside set.
Whole stub studies (``tests.support.stub_study``) on a page set beside the study folder."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from quantgate.errors import InputError
from quantgate.io.fileio import sha256_file
from tests.support.cli import run_cli as _cli
from tests.support.stub_study import run, study_yaml


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    from quantgate.heldout.synth import synth_pages

    root = tmp_path_factory.mktemp("pagecopy")
    synth_pages(root / "pages", 10, seed=4, profile="simple", calibration_fraction=0.0)
    study_yaml(root / "study.yaml", root / "pages", {"same": 0.0}, min_pages=5)
    run(root / "study.yaml", root / "out")
    return root


@pytest.fixture
def copy(finished, tmp_path):
    shutil.copytree(finished / "pages", tmp_path / "pages")
    shutil.copytree(finished / "out", tmp_path / "out")
    text = (finished / "study.yaml").read_text().replace(str((finished / "pages").resolve()), str(tmp_path / "pages"))
    (tmp_path / "study.yaml").write_text(text)
    return tmp_path


def _page(root: Path, n: int = 3) -> dict:
    return json.loads((root / "pages.jsonl").read_text().splitlines()[n])


def _rerun(root: Path) -> tuple[dict, list[str]]:
    lines: list[str] = []
    (root / "out" / "summary.json").unlink()
    return run(root / "study.yaml", root / "out", log=lines.append), lines


def test_an_outside_page_set_is_copied_in_and_bound_by_the_gate(copy):
    out = copy / "out"
    summary = json.loads((out / "summary.json").read_text())
    assert summary["inputs"]["pages"] == "pages/pages.jsonl"
    assert (out / "pages" / "pages.jsonl").read_bytes() == (copy / "pages" / "pages.jsonl").read_bytes()
    record = json.loads((out / "pages-copy.json").read_text())
    assert record["pages_sha256"] == sha256_file(copy / "pages" / "pages.jsonl") and record["source"].endswith("/pages")
    code, text, _ = _cli("gate", out, "--variants", "same")
    assert code in (0, 2) and "INVALID" not in text and "does not vouch for them" not in text, text  # bound
    page = _page(out / "pages")
    image = out / "pages" / page["image"]
    image.write_bytes(image.read_bytes() + b" forged")
    code, text, _ = _cli("gate", out, "--variants", "same")
    assert code == 3 and text.startswith("INVALID: ") and str(image) in text, text


def test_an_unchanged_copy_is_reused_and_an_edited_one_copied_again(copy):
    out = copy / "out"
    before = json.loads((out / "summary.json").read_text())
    again, lines = _rerun(copy)
    assert any(line.startswith("pages:") and "reused" in line for line in lines), lines
    assert again["verdicts"] == before["verdicts"]
    truth = out / "pages" / _page(out / "pages")["truth"]
    truth.write_text("# forged\n")
    again, lines = _rerun(copy)
    assert any(f"pages: {truth} changed since it was copied in" in line for line in lines), lines
    assert truth.read_bytes() == (copy / "pages" / truth.relative_to(out / "pages")).read_bytes()
    assert again["verdicts"] == before["verdicts"]
    assert _cli("gate", out, "--variants", "same")[0] in (0, 2)  # the study's own outcome, not INVALID


def test_a_changed_source_is_noticed_by_the_next_study_run(copy):
    """The source set changed as a re-import changes it (a truth and its sha256 in pages.jsonl): the copy is made
    again, saying what changed, and the runs of the old pages are re-served; edited without its pages.jsonl, the
    source is refused naming the file (tests/integration/test_resume_verifies.py holds that case too)."""
    src, out = copy / "pages", copy / "out"
    lines = (src / "pages.jsonl").read_text().splitlines()
    page = json.loads(lines[3])
    (src / page["truth"]).write_text("# another truth\n\nnew words\n")
    page["truth_sha256"] = sha256_file(src / page["truth"])
    lines[3] = json.dumps(page)
    (src / "pages.jsonl").write_text("\n".join(lines) + "\n")
    again, log = _rerun(copy)
    assert any(f"pages: {src} changed since it was copied into {out / 'pages'}" in line
               and "0 page(s) added, 0 removed, 1 with another image or truth" in line for line in log), log
    assert (out / "pages" / page["truth"]).read_text() == "# another truth\n\nnew words\n"
    assert again["provenance"]["pageset_sha256"] == sha256_file(src / "pages.jsonl")
    assert _cli("gate", out, "--variants", "same")[0] in (0, 2)  # the study's own outcome, not INVALID
    image = src / page["image"]
    image.write_bytes(image.read_bytes() + b" forged")
    with pytest.raises(InputError, match=rf"{image} \(page {page['id']}'s image\) changed since"):
        run(copy / "study.yaml", out)


def test_a_foreign_page_set_in_the_copys_place_is_refused(copy):
    out = copy / "out"
    (out / "pages-copy.json").unlink()
    with pytest.raises(InputError, match=rf"{out / 'pages'}: holds a page set this study did not copy in"):
        run(copy / "study.yaml", out)
