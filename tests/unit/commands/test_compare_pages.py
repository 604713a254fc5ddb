"""``compare --pages``'s inputs (quantgate.commands._compare_pages.pages_inputs): two output folders and a page
set become the outputs, truth, documents and labeling standing ``compare_outputs`` is called with; each kind of
bad input is one error naming the folder or page, and nothing is written."""

from __future__ import annotations

import json
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
    assert got.labeled_at_random == drawn and got.notes == []


def test_truth_beyond_the_draw_keeps_the_draw(made, case):
    """Truth on a page outside the draw is given for the baseline's score; the drawn pages still rectify, as in a
    study (``study.judged``), so the two make the same verdict on the same pages."""
    root, base, cand, drawn, texts = case
    extra = next(p for p in texts if p not in drawn)
    _keep_truth(made, root, drawn | {extra})
    got = pages_inputs(root, base, cand)
    assert set(got.truth) == drawn | {extra} and got.labeled_at_random == drawn and got.notes == []


def test_no_draw_recorded_is_not_a_random_sample(made, tmp_path):
    root = tmp_path / "set"
    shutil.copytree(made, root)
    ps = load_pageset(root)
    held = [p.id for p in ps.split("heldout")]
    base = tmp_path / "base"
    base.mkdir()
    for p in ps.split("heldout"):
        (base / f"{p.id}.md").write_text(ps.truth_text(p) or "")
    _keep_truth(made, root, set(held[:4]))
    got = pages_inputs(root, base, base)
    assert set(got.truth) == set(held[:4]) and got.labeled_at_random == frozenset()
    assert any("no labeling draw recorded" in n for n in got.notes)


def test_a_draw_not_yet_labeled_is_a_note_saying_how_many_lack_truth(made, case):
    root, base, cand, drawn, _ = case
    unlabeled = sorted(drawn)[0]
    _keep_truth(made, root, drawn - {unlabeled})
    got = pages_inputs(root, base, cand)
    assert got.labeled_at_random == frozenset() and set(got.truth) == drawn - {unlabeled}
    assert [n for n in got.notes if f"1 of the {len(drawn)} drawn pages have no truth yet ({unlabeled})" in n]


def _edit_draw(root: Path) -> None:
    man = json.loads((root / "pageset.json").read_text())
    man["label_sample"]["seed"] += 1  # the record no longer the draw its seed makes
    (root / "pageset.json").write_text(json.dumps(man))


def _drop_document(root: Path, document: str) -> None:
    lines = [ln for ln in (root / "pages.jsonl").read_text().splitlines() if json.loads(ln)["document"] != document]
    (root / "pages.jsonl").write_text("\n".join(lines) + "\n")
    man = json.loads((root / "pageset.json").read_text())
    man["pages_sha256"] = sha256_file(root / "pages.jsonl")
    (root / "pageset.json").write_text(json.dumps(man))


@pytest.mark.parametrize("stale", [False, True], ids=["edited", "stale"])
def test_an_edited_or_stale_draw_is_an_error(case, stale):
    """A recorded draw that is not the draw it describes (its seed edited, or a held-out document gone since) is
    refused naming pageset.json and the command that draws again; the study refuses it by the same function."""
    from quantgate.heldout.label import checked_sample_status

    root, base, cand, drawn, texts = case
    ps = load_pageset(root)
    if stale:
        gone = next(p for p in ps.split("heldout") if p.id not in drawn)
        _drop_document(root, gone.document)
        for folder in (base, cand):
            for p in ps.pages:
                if p.document == gone.document:
                    (folder / f"{p.id}.md").unlink(missing_ok=True)
    else:
        _edit_draw(root)
    before = _tree(root, base, cand)
    why = "the held-out documents changed since the draw" if stale else "label_sample is not the draw its seed makes"
    seed = ps.manifest.label_sample.seed + (0 if stale else 1)
    with pytest.raises(DataError, match=rf"{root / 'pageset.json'}: {why}.*label-sample {root} -n 2 --sample-seed "
                                        rf"{seed} --overwrite.*or remove label_sample"):
        pages_inputs(root, base, cand)
    with pytest.raises(DataError, match=why):
        checked_sample_status(load_pageset(root))
    assert _tree(root, base, cand) == before


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


def test_compare_help_gives_the_one_exit_code_table():
    """Bad input is 64 or 65, never 2 (which only an inconclusive verdict gives): the help prints the table every
    verb shares rather than its own line."""
    import io
    from contextlib import redirect_stdout

    from quantgate import cli
    from quantgate.errors import exit_code_table

    out = io.StringIO()
    with redirect_stdout(out), pytest.raises(SystemExit) as done:
        cli.main(["compare", "--help"])
    assert done.value.code == 0
    assert exit_code_table() in out.getvalue() and "inconclusive or bad input" not in out.getvalue()
    assert "ned 0.01, cer 0.01" in out.getvalue()  # the default margins, each pair kept on one line
