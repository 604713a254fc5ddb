"""Malformed olmOCR-style checks used to pass `pages import` and `pages check` ("OK") and stop a study only at
scoring, after every variant was quantized and served, with no file or line. Each is now refused by the scorer's
own validation where it is first read: at import (naming checks.jsonl:LINE and the check's id, nothing written), at
`pages check` (naming pages.jsonl:LINE), and by a study before its first quantize (no output folder made)."""

from __future__ import annotations

import json

import pytest
from PIL import Image

from tests.support.cli import run_cli

GOOD = {"pdf": "a.pdf", "page": 1, "id": "c1", "type": "present", "text": "hello"}


@pytest.fixture
def src(tmp_path):
    d = tmp_path / "src"
    d.mkdir()
    Image.new("RGB", (64, 64), "white").save(d / "a_pg1.png")
    return d


BAD = [
    ({**GOOD, "type": "rm -rf"}, "unknown type 'rm -rf'"),
    ({**GOOD, "text": 5}, "text must be a string"),
    ({**GOOD, "max_diffs": -5}, "max_diffs must be an integer >= 0"),
    ({k: v for k, v in GOOD.items() if k != "text"}, "missing field(s) text"),
]


@pytest.mark.parametrize("check,needle", BAD + [(GOOD, "the id is used again (first at")])
def test_pages_import_refuses_a_bad_check_naming_file_line_and_id(tmp_path, src, check, needle):
    checks = tmp_path / "checks.jsonl"
    checks.write_text(json.dumps({**GOOD, "id": "c0"}) + "\n" + json.dumps({**check, "id": "c0"} if check is GOOD
                                                                            else check) + "\n")
    code, out, err = run_cli("pages", "import", src, "--checks", checks, "-o", tmp_path / "ps")
    assert code == 65 and len(err.splitlines()) == 1 and f"{checks}:2" in err and needle in err, (code, out, err)
    assert "c0" in err or "c1" in err
    assert not (tmp_path / "ps").exists()


def _pageset_with(tmp_path, src, check) -> tuple:
    checks = tmp_path / "checks.jsonl"
    checks.write_text(json.dumps(GOOD) + "\n")
    ps = tmp_path / "ps"
    code, out, err = run_cli("pages", "import", src, "--checks", checks, "-o", ps, "--calibration-fraction", "0")
    assert code == 0, (out, err)
    recs = [json.loads(line) for line in (ps / "pages.jsonl").read_text().splitlines()]
    recs[0]["checks"] = [GOOD, check]  # edited after import: the page set's own records
    (ps / "pages.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    return ps


@pytest.mark.parametrize("check,needle", BAD)
def test_pages_check_refuses_a_bad_check_naming_line_and_id(tmp_path, src, check, needle):
    ps = _pageset_with(tmp_path, src, {**check, "id": "c9"})
    code, out, err = run_cli("pages", "check", ps)
    assert code == 65 and len(err.splitlines()) == 1 and f"{ps / 'pages.jsonl'}:1" in err, (code, out, err)
    assert "check c9" in err and needle in err and "OK" not in out


def test_a_study_refuses_a_bad_check_before_its_first_quantize(tmp_path, src):
    ps = _pageset_with(tmp_path, src, {**GOOD, "id": "c9", "type": "rm -rf"})
    study = tmp_path / "study.yaml"
    study.write_text(json.dumps({"name": "s", "model": "no-such-model", "pages": {"path": str(ps)}, "metrics": ["ned"],
                                 "variants": [{"name": "bf16", "recipe": "bf16"},
                                              {"name": "fp8", "recipe": "fp8-dynamic"}]}))
    code, out, err = run_cli("study", study, "-o", tmp_path / "out")
    assert code == 65 and "unknown type 'rm -rf'" in err and "check c9" in err and len(err.splitlines()) == 1, err
    assert not (tmp_path / "out").exists()
