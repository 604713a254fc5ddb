"""``compare --pages``'s inputs (quantgate.commands._compare_pages.pages_inputs): two output folders and a page
set become the outputs, truth, documents and labeling standing ``compare_outputs`` is called with; each kind of
bad input is one error naming the folder or page, and nothing is written."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from quantgate.commands._compare_pages import pages_inputs
from quantgate.errors import DataError, UsageError
from quantgate.heldout.label import label_sample
from quantgate.heldout.synth import synth_pages
from quantgate.io.fileio import sha256_file
from quantgate.io.pageset import load_pageset
from tests.support.truthless import drop_truth


@pytest.fixture(scope="module")
def made(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("cmp") / "set"
    synth_pages(root, 24, seed=5, profile="simple", pages_per_document=3, calibration_fraction=0.2)
    return root


def _keep_truth(made: Path, root: Path, keep: set[str]) -> None:
    """The pages of ``made`` in ``root``, the truth taken off every page outside ``keep`` (from ``made``'s pages, so
    a page whose truth was taken off before gets it back)."""
    shutil.copyfile(made / "pages.jsonl", root / "pages.jsonl")
    drop_truth(root, keep)


@pytest.fixture
def case(made, tmp_path):
    """A page set whose truth is the recorded labeling draw (two documents), and both variants' outputs for every
    held-out page: the baseline's the truth itself where there is one, the candidate's one character off."""
    root = tmp_path / "set"
    shutil.copytree(made, root)
    draw, _ = label_sample(root, 2, seed=1, out=tmp_path / "to-label")
    ps = load_pageset(root)
    texts = {p.id: ps.truth_text(p) or "" for p in ps.split("heldout")}
    _keep_truth(made, root, set(draw.page_ids))
    base, cand = tmp_path / "base", tmp_path / "cand"
    for folder, edit in ((base, lambda s: s), (cand, lambda s: s[:-1] + "#")):
        folder.mkdir()
        for pid, text in texts.items():
            (folder / f"{pid}.md").write_text(edit(text), "utf-8")
    return root, base, cand, set(draw.page_ids), texts


def test_the_page_set_gives_truth_documents_and_the_draw(case):
    root, base, cand, drawn, texts = case
    got = pages_inputs(root, base, cand)
    ps = load_pageset(root)
    assert set(got.baseline) == set(got.candidate) == set(texts)
    assert set(got.truth) == drawn and got.truth == {p: texts[p] for p in drawn}
    assert got.documents == {p.id: p.document for p in ps.split("heldout")}
    assert got.labeled_at_random and got.notes == []


def test_truth_beyond_the_draw_is_not_a_random_sample(made, case):
    root, base, cand, drawn, texts = case
    extra = next(p for p in texts if p not in drawn)
    _keep_truth(made, root, drawn | {extra})
    got = pages_inputs(root, base, cand)
    assert extra in got.truth and not got.labeled_at_random
    assert any(f"not in the recorded draw ({extra})" in n for n in got.notes)


def test_no_draw_recorded_is_not_a_random_sample(made, tmp_path):
    root = tmp_path / "set"
    shutil.copytree(made, root)
    ps = load_pageset(root)
    base = tmp_path / "base"
    base.mkdir()
    for p in ps.split("heldout"):
        (base / f"{p.id}.md").write_text(ps.truth_text(p) or "")
    got = pages_inputs(root, base, base)
    assert len(got.truth) == len(ps.split("heldout")) and not got.labeled_at_random
    assert any("no labeling draw recorded" in n for n in got.notes)


def _tree(*roots: Path) -> dict[str, str]:
    return {str(f): sha256_file(f) for r in roots for f in sorted(r.rglob("*")) if f.is_file()}


def test_folders_covering_different_pages(case):
    root, base, cand, drawn, texts = case
    gone = sorted(set(texts) - drawn)[0]
    (cand / f"{gone}.md").unlink()
    before = _tree(root, base, cand)
    with pytest.raises(DataError, match=rf"{base} and {cand} cover different pages: 1 only in {base} \({gone}\)"):
        pages_inputs(root, base, cand)
    assert _tree(root, base, cand) == before


def test_a_truth_page_not_compared(case):
    root, base, cand, drawn, _ = case
    gone = sorted(drawn)[0]
    (base / f"{gone}.md").unlink()
    (cand / f"{gone}.md").unlink()
    with pytest.raises(DataError, match=rf"1 held-out page\(s\) of {root} with truth not compared \({gone}\)"):
        pages_inputs(root, base, cand)


def test_outputs_for_pages_the_set_does_not_hold(case):
    root, base, cand, _, _ = case
    for folder in (base, cand):
        (folder / "stranger.md").write_text("who?")
    with pytest.raises(DataError, match=r"1 output\(s\) for pages .* does not hold \(stranger\)"):
        pages_inputs(root, base, cand)


def test_outputs_that_are_not_text(case):
    root, base, cand, _, texts = case
    page = sorted(texts)[0]
    (cand / f"{page}.md").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00")
    with pytest.raises(DataError, match=rf"{cand / (page + '.md')}: contains a NUL byte"):
        pages_inputs(root, base, cand)


def test_a_folder_that_is_not_there(case, tmp_path):
    root, base, _, _, _ = case
    with pytest.raises(UsageError, match="no such folder"):
        pages_inputs(root, base, tmp_path / "absent")
