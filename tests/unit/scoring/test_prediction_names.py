"""Protects the rules that map another system's output files to page ids (quantgate.scoring.predictions): a
folder scored as it was written, never a page silently dropped or doubled, and a name that matches nothing
refused with the file named."""

from __future__ import annotations

from pathlib import Path

import pytest

from quantgate.errors import InputError
from quantgate.scoring.predictions import page_of, prediction_files

PAGES = {"report_pg1", "report_pg2", "scan-007", "notes.pdf_3", "x_pg1_repeat1"}


def _write(root: Path, *names: str) -> None:
    for n in names:
        (root / n).parent.mkdir(parents=True, exist_ok=True)
        (root / n).write_text(f"text of {n}\n", encoding="utf-8")


@pytest.mark.parametrize(("stem", "page"), [
    ("report_pg1", ("report_pg1", None)),  # quantgate's own <page id>.md
    ("scan-007", ("scan-007", None)),  # OmniDocBench: <image stem>.md
    ("notes.pdf_3", ("notes.pdf_3", None)),  # OmniDocBench's image stems keep a ".pdf_N" inside
    ("report_pg2_repeat3", ("report_pg2", 3)),  # olmOCR-bench: <pdf>_pg<N>_repeat<K>.md
    ("x_pg1_repeat1", ("x_pg1_repeat1", None)),  # a page whose own id looks like a repeat: the exact id wins
    ("report_pg3_repeat1", None),  # the page does not exist
    ("report_repeat1", None),  # no page number: not olmOCR-bench's naming
])
def test_each_naming_rule(stem, page):
    assert page_of(stem, PAGES) == page


def test_repeats_in_sub_folders_are_gathered_in_repeat_order(tmp_path):
    _write(tmp_path, "report_pg1_repeat2.md", "cat/report_pg1_repeat1.md", "cat/report_pg1_repeat10.md",
           "scan-007.md", "notes.pdf_3.txt")
    files = prediction_files(tmp_path, PAGES)
    assert [f.name for f in files["report_pg1"]] == ["report_pg1_repeat1.md", "report_pg1_repeat2.md",
                                                     "report_pg1_repeat10.md"]
    assert [f.name for f in files["scan-007"]] == ["scan-007.md"]
    assert set(files) == {"report_pg1", "scan-007", "notes.pdf_3"}


def test_a_name_that_matches_no_page_is_refused_naming_the_file(tmp_path):
    _write(tmp_path, "report_pg1.md", "README.md")
    with pytest.raises(InputError) as e:
        prediction_files(tmp_path, PAGES)
    msg = str(e.value)
    assert str(tmp_path / "README.md") in msg and "names no page" in msg and "1 of 2" in msg
    assert "\n" not in msg


@pytest.mark.parametrize("names", [
    ("report_pg1.md", "sub/report_pg1.md"),  # the same page in two folders
    ("report_pg1.md", "report_pg1.txt"),  # two formats of one output
    ("report_pg1.md", "report_pg1_repeat1.md"),  # a plain output beside a repeat of the same page
    ("a/report_pg1_repeat1.md", "b/report_pg1_repeat1.md"),  # the same repeat twice
])
def test_two_files_for_one_page_that_are_not_repeats_are_refused(tmp_path, names):
    _write(tmp_path, *names)
    with pytest.raises(InputError) as e:
        prediction_files(tmp_path, PAGES)
    msg = str(e.value)
    assert "a second output for page 'report_pg1'" in msg and "_repeat<K>" in msg
    # both files named: the one refused and the one it clashes with
    assert sum(str(tmp_path / n) in msg for n in names) == 2, msg
