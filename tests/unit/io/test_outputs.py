"""A variant's outputs loaded as page id → text (quantgate.io.outputs): run folders and folders of files, and each
kind of bad input refused with one error naming the file."""

from __future__ import annotations

import json
import os

import pytest

from quantgate.errors import DataError, UsageError
from quantgate.io.outputs import MAX_OUTPUT_BYTES, load_outputs


def _req(page, output, *, c=1, error=None, wave=None, t=0.0):
    rec = {"schema_version": 3, "page_id": page, "concurrency": c, "output": output, "start": t, "end": t + 1}
    if error:
        rec |= {"error": error, "error_kind": "infrastructure", "output": None}
    if wave is not None:
        rec["wave"] = wave
    return json.dumps(rec) + "\n"


def test_a_run_folder_gives_the_latest_answer_per_page_at_the_lowest_level(tmp_path):
    (tmp_path / "requests.jsonl").write_text(
        _req("p1", "first") + _req("p2", None, error="timeout") + _req("p3", None) + _req("p1", "at c8", c=8)
        + _req("p2", "re-sent", t=5) + _req("p1", "again", t=6) + _req("p4", "speed", wave=0)
        + _req("p5", "ok") + _req("p5", None, error="later failure", t=9))
    assert load_outputs(tmp_path) == {"p1": "again", "p2": "re-sent", "p3": "", "p5": "ok"}
    assert load_outputs(tmp_path, concurrency=8) == {"p1": "at c8"}
    with pytest.raises(UsageError, match=r"no requests at concurrency 4; recorded levels: \[1, 8\]"):
        load_outputs(tmp_path, concurrency=4)


def test_a_folder_of_files(tmp_path):
    (tmp_path / "p1.md").write_text("# one\n", encoding="utf-8")
    (tmp_path / "p2.txt").write_bytes("\ufefftwo é".encode())  # an editor's byte-order mark is dropped
    (tmp_path / "notes.json").write_text("{}")
    (tmp_path / "sub.md").mkdir()
    assert load_outputs(tmp_path) == {"p1": "# one\n", "p2": "two é"}


@pytest.mark.parametrize("name, data, message", [
    ("p.md", b"ab\x00cd", "p.md: contains a NUL byte at offset 2"),
    ("p.md", b"\x89PNG\r\n\x1a\n\xff", "p.md: not UTF-8 .bad byte 0x89 at offset 0"),
    ("p.md", b"x" * (MAX_OUTPUT_BYTES + 1), "p.md: 1,048,577 bytes, over the 1,048,576-byte cap"),
])
def test_files_that_are_not_text_are_refused_naming_the_file(tmp_path, name, data, message):
    (tmp_path / "ok.md").write_text("fine")
    (tmp_path / name).write_bytes(data)
    with pytest.raises(DataError, match=message):
        load_outputs(tmp_path)


def test_run_records_that_are_not_text_name_the_line(tmp_path):
    (tmp_path / "requests.jsonl").write_text(_req("p1", "fine") + _req("p2", "a\x00b"))
    with pytest.raises(DataError, match=r"requests.jsonl:2 \(page p2\): contains a NUL byte"):
        load_outputs(tmp_path)
    (tmp_path / "requests.jsonl").write_text(_req("p1", "x" * (MAX_OUTPUT_BYTES + 1)))
    with pytest.raises(DataError, match=r"requests.jsonl:1 \(page p1\): output is over 1 MiB"):
        load_outputs(tmp_path)
    (tmp_path / "requests.jsonl").write_text(_req("p1", "fine") + "{not json\n")
    with pytest.raises(DataError, match="requests.jsonl:2: not valid JSON"):
        load_outputs(tmp_path)
    (tmp_path / "requests.jsonl").write_text(_req("p1", "fine") + json.dumps({"page_id": "p2"}) + "\n")
    with pytest.raises(DataError, match="requests.jsonl:2: field"):
        load_outputs(tmp_path)
    (tmp_path / "requests.jsonl").write_text(_req("p1", None, error="timeout"))
    with pytest.raises(DataError, match="every request at concurrency 1 failed"):
        load_outputs(tmp_path)


def test_two_outputs_for_one_page_and_empty_folders(tmp_path):
    (tmp_path / "p1.md").write_text("a")
    (tmp_path / "p1.txt").write_text("b")
    with pytest.raises(DataError, match="a second output for page 'p1'"):
        load_outputs(tmp_path)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(DataError, match="no outputs"):
        load_outputs(empty)


def test_links_out_of_the_folder_and_fifos_are_refused(tmp_path):
    outside = tmp_path / "secret.md"
    outside.write_text("not yours")
    run = tmp_path / "run"
    run.mkdir()
    (run / "p1.md").symlink_to(outside)
    with pytest.raises(DataError, match="p1.md: is a link to .*outside"):
        load_outputs(run)
    (run / "p1.md").unlink()
    os.mkfifo(run / "p1.md")
    with pytest.raises(DataError, match="p1.md: not a regular file"):
        load_outputs(run)


def test_paths_that_are_not_folders_are_usage_errors(tmp_path):
    with pytest.raises(UsageError, match="no such folder"):
        load_outputs(tmp_path / "absent")
    (tmp_path / "f.md").write_text("x")
    with pytest.raises(UsageError, match="not a folder"):
        load_outputs(tmp_path / "f.md")


def test_the_cap_on_a_folder_s_outputs_in_all(tmp_path, monkeypatch):
    import quantgate.io.outputs as outputs

    monkeypatch.setattr(outputs, "MAX_TOTAL_BYTES", 10)
    for i in range(3):
        (tmp_path / f"p{i}.md").write_text("four")
    with pytest.raises(DataError, match=r"outputs over .* in all .*reached at p2.md"):
        load_outputs(tmp_path)
    (tmp_path / "p2.md").unlink()
    assert load_outputs(tmp_path) == {"p0": "four", "p1": "four"}
    big = tmp_path / "run"
    big.mkdir()
    (big / "requests.jsonl").write_text(_req("p1", "a fairly long output"))
    with pytest.raises(DataError, match=r"requests.jsonl: .* bytes, over the 10-byte cap"):
        load_outputs(big)
