"""bounds.jsonl read and written (quantgate.io.bounds): a round trip, and each malformed line refused with one
DataError naming the file and line."""

from __future__ import annotations

import json

import pytest

from quantgate.errors import DataError
from quantgate.io.bounds import read_bounds, write_bounds
from quantgate.scoring.bounds import bound_rows


def test_round_trip(tmp_path):
    rows = bound_rows(["ned", "cer", "checks"], {"p1": "a b", "p2": "x"}, {"p1": "a c", "p2": "x"},
                      documents={"p1": "d", "p2": "d"})
    write_bounds(tmp_path / "fp8-c1.bounds.jsonl", rows)
    back = read_bounds(tmp_path / "fp8-c1.bounds.jsonl")
    assert list(back) == ["p1", "p2"] and list(back.values()) == rows
    assert back["p2"].identical and back["p2"].bounds == {"ned": 0.0, "cer": 0.0, "checks": None}


GOOD = {"schema_version": 1, "page_id": "p1", "document": None, "baseline_sha256": "0" * 64,
        "candidate_sha256": "1" * 64, "bounds": {"ned": 0.5}}


@pytest.mark.parametrize("change, message", [
    ({"bounds": {"ned": 1.5}}, "not a damage bound: a number from 0 to 1"),
    ({"bounds": {"ned": -0.1}}, "not a damage bound"),
    ({"bounds": {"nope": 0.1}}, "unknown metric 'nope'"),
    ({"baseline_sha256": "xyz"}, "not a sha256 hex digest"),
    ({"schema_version": 2}, "newer quantgate"),
    ({"extra": 1}, "extra"),
])
def test_malformed_lines_name_the_file_and_line(tmp_path, change, message):
    path = tmp_path / "fp8-c1.bounds.jsonl"
    path.write_text(json.dumps(GOOD) + "\n" + json.dumps(GOOD | {"page_id": "p2"} | change) + "\n")
    with pytest.raises(DataError, match=message) as err:
        read_bounds(path)
    assert f"{path}:2" in str(err.value)


def test_duplicate_pages_and_empty_or_missing_files(tmp_path):
    path = tmp_path / "fp8-c1.bounds.jsonl"
    path.write_text(json.dumps(GOOD) + "\n" + json.dumps(GOOD) + "\n")
    with pytest.raises(DataError, match=f"{path}:2: duplicate page_id 'p1'"):
        read_bounds(path)
    path.write_text("")
    with pytest.raises(DataError, match="no bound rows"):
        read_bounds(path)
    with pytest.raises(DataError, match="no such bounds file"):
        read_bounds(tmp_path / "absent.jsonl")
