"""Page sets from images and PDFs, stable splits, leakage checks, and bad input."""

import json
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from PIL import Image

from quantgate.errors import InputError, UnsafeInputError
from quantgate.heldout.check import check_pageset
from quantgate.heldout.importer import ImportOptions, import_pages
from quantgate.heldout.synth import synth_pages
from quantgate.io.pageset import load_pageset, split_of
from tests.support.paths import OLMOCR_SAMPLE, oracle_missing


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "quantgate", *args], capture_output=True, text=True, timeout=300)


def _no_leftovers(parent: Path, name: str):
    assert not (parent / name).exists()
    assert not [p for p in parent.iterdir() if p.name.startswith(f".{name}.")], "temporary folder left behind"


@pytest.mark.skipif(oracle_missing(OLMOCR_SAMPLE) is not None, reason=oracle_missing(OLMOCR_SAMPLE) or "")
def test_import_olmocr_sample_pdfs(tmp_path):
    out = tmp_path / "olm"
    rep = import_pages([OLMOCR_SAMPLE / "pdfs"], out, ImportOptions(checks_file=OLMOCR_SAMPLE / "dataset.jsonl",
                                                                      megapixels=0.5))
    ps = load_pageset(out)
    ids = {p.id for p in ps.pages}
    assert len(ps.pages) == 23 == rep.n_pages
    assert {"mattsnotes_pg1", "mattsnotes_pg2", "mattsnotes_pg3"} <= ids
    expected = Counter()
    for line in (OLMOCR_SAMPLE / "dataset.jsonl").read_text().splitlines():
        if line.strip():
            d = json.loads(line)
            expected[f"{Path(d['pdf']).stem}_pg{d['page']}"] += 1
    got = {p.id: len(p.checks) for p in ps.pages if p.checks}
    assert got == dict(expected)
    for p in ps.pages:  # every check sits on the page it names
        assert all(f"{Path(c['pdf']).stem}_pg{c['page']}" == p.id for c in p.checks)
        assert 0.4e6 < p.width * p.height < 0.6e6
    assert check_pageset(ps) == []


def test_split_is_stable_and_proportional():
    # Golden values: a change here would silently reshuffle every user's calibration/heldout split.
    assert [split_of(f"page-{i}", 0, 0.2) for i in range(6)] == [split_of(f"page-{i}", 0, 0.2) for i in range(6)]
    assert split_of("earnings_pg1", 0, 0.2) == "heldout"
    assert split_of("mattsnotes_pg2", 7, 0.5) == split_of("mattsnotes_pg2", 7, 0.5)
    share = sum(split_of(f"p{i}", 1, 0.2) == "calibration" for i in range(20000)) / 20000
    assert 0.19 < share < 0.21
    assert all(split_of(f"p{i}", 1, 0.0) == "heldout" for i in range(1000))


def test_split_same_in_a_fresh_interpreter():
    code = "from quantgate.heldout import split_of; print(''.join(split_of(f'x{i}', 5, 0.3)[0] for i in range(40)))"
    a = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env={"PYTHONHASHSEED": "1"}).stdout
    b = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env={"PYTHONHASHSEED": "2"}).stdout
    assert a == b and len(a.strip()) == 40


def test_synth_is_deterministic(tmp_path):
    synth_pages(tmp_path / "a", 4, seed=9)
    synth_pages(tmp_path / "b", 4, seed=9)
    assert (tmp_path / "a/pages.jsonl").read_bytes() == (tmp_path / "b/pages.jsonl").read_bytes()
    synth_pages(tmp_path / "c", 4, seed=10)
    assert (tmp_path / "a/pages.jsonl").read_bytes() != (tmp_path / "c/pages.jsonl").read_bytes()
    ps = load_pageset(tmp_path / "a")
    truth = ps.truth_text(ps.pages[0])
    assert truth.startswith("# ")


def _png(path: Path, size=(64, 48), color="white"):
    Image.new("RGB", size, color).save(path)
    return path


@pytest.mark.parametrize("case", ["zero_pdf", "truncated_pdf", "corrupt_image", "huge_image"])
def test_bad_sources_fail_cleanly(tmp_path, case):
    src = tmp_path / "src"
    src.mkdir()
    _png(src / "good.png")
    if case == "zero_pdf":
        bad = src / "empty.pdf"
        bad.write_bytes(b"")
    elif case == "truncated_pdf":
        bad = src / "cut.pdf"  # a whole one-page PDF made here, cut before its cross-reference table
        Image.new("RGB", (300, 400), "white").save(src / "whole.pdf")
        bad.write_bytes((src / "whole.pdf").read_bytes()[:300])
        (src / "whole.pdf").unlink()
    elif case == "corrupt_image":
        bad = src / "broken.png"
        bad.write_bytes((src / "good.png").read_bytes()[:40])
    else:
        bad = _png(src / "huge.png", size=(3000, 3000))
    r = _cli("pages", "import", str(src), "-o", str(tmp_path / "out"), "--max-pixels", "1000000")
    assert r.returncode == 65, r.stderr  # a file that exists but is malformed
    assert bad.name in r.stderr and "Traceback" not in r.stderr
    _no_leftovers(tmp_path, "out")


def test_non_utf8_truth_is_refused(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    _png(src / "p1.png")
    truth = tmp_path / "truth"
    truth.mkdir()
    (truth / "p1.md").write_bytes("caf\xe9".encode("latin-1"))
    with pytest.raises(InputError, match=r"p1\.md.*not UTF-8"):
        import_pages([src], tmp_path / "out", ImportOptions(truth_dir=truth))
    _no_leftovers(tmp_path, "out")


def test_duplicate_ids_from_two_sources(tmp_path):
    for d in ("a", "b"):
        (tmp_path / d).mkdir()
        _png(tmp_path / d / "same.png")
    with pytest.raises(InputError, match=r"same.*already given by"):
        import_pages([tmp_path / "a", tmp_path / "b"], tmp_path / "out", ImportOptions())
    _no_leftovers(tmp_path, "out")


def test_unmatched_truth_files_warn(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    _png(src / "p1.png")
    truth = tmp_path / "truth"
    truth.mkdir()
    (truth / "p1.md").write_text("# one")
    (truth / "stray.md").write_text("# nobody")
    r = _cli("pages", "import", str(src), "-o", str(tmp_path / "out"), "--truth", str(truth))
    assert r.returncode == 0
    assert "stray" in r.stderr and "match no page" in r.stderr
    assert load_pageset(tmp_path / "out").pages[0].truth == "truth/p1.md"


def test_existing_output_is_not_replaced(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    _png(src / "p1.png")
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "keep.txt").write_text("mine")
    with pytest.raises(InputError, match="--overwrite"):
        import_pages([src], tmp_path / "out", ImportOptions())
    assert (tmp_path / "out" / "keep.txt").read_text() == "mine"


@pytest.mark.parametrize("bad", ["../../etc/passwd", "/etc/passwd", "link/escape.png"])
def test_manifest_paths_must_stay_inside(synth_pageset, tmp_path, bad):
    ps_dir = tmp_path / "ps"
    shutil.copytree(synth_pageset, ps_dir)
    (ps_dir / "link").symlink_to("/etc")
    lines = (ps_dir / "pages.jsonl").read_text().splitlines()
    rec = json.loads(lines[0])
    rec["image"] = bad
    lines[0] = json.dumps(rec)
    (ps_dir / "pages.jsonl").write_text("\n".join(lines) + "\n")
    with pytest.raises(UnsafeInputError, match=r"pages\.jsonl:1.*image"):
        load_pageset(ps_dir)


def test_leakage_identical_and_near_identical(synth_pageset, tmp_path):
    ps_dir = tmp_path / "ps"
    shutil.copytree(synth_pageset, ps_dir)
    ps = load_pageset(ps_dir)
    held = next(p for p in ps.pages if p.split == "heldout")
    cal = next(p for p in ps.pages if p.split == "calibration")
    assert check_pageset(ps) == []
    # Exact copy: the calibration page's image replaced by the held-out one (hash updated).
    import imagehash

    recs = [json.loads(x) for x in (ps_dir / "pages.jsonl").read_text().splitlines()]
    for r in recs:
        if r["id"] == cal.id:
            r["sha256"], r["phash"] = held.sha256, held.phash
            shutil.copy(ps_dir / held.image, ps_dir / r["image"])
    (ps_dir / "pages.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    problems = check_pageset(load_pageset(ps_dir))
    assert any(held.id in p and cal.id in p and "identical" in p for p in problems)
    # Near copy: the held-out page downscaled and saved as JPEG has another sha256 but the same look.
    img = Image.open(ps_dir / held.image).convert("RGB")
    small = img.resize((img.width * 3 // 4, img.height * 3 // 4))
    for r in recs:
        if r["id"] == cal.id:
            small.save(ps_dir / r["image"], format="PNG")
            from quantgate.io.fileio import sha256_file

            r["sha256"] = sha256_file(ps_dir / r["image"])
            r["phash"] = str(imagehash.phash(small))
    (ps_dir / "pages.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    problems = check_pageset(load_pageset(ps_dir))
    assert any("near-identical" in p and held.id in p and cal.id in p for p in problems), problems
    r = _cli("pages", "check", str(ps_dir))
    assert r.returncode == 65 and "near-identical" in r.stderr


def test_tampered_image_is_reported(synth_pageset, tmp_path):
    ps_dir = tmp_path / "ps"
    shutil.copytree(synth_pageset, ps_dir)
    ps = load_pageset(ps_dir)
    (ps_dir / ps.pages[0].image).write_bytes(b"not the same")
    assert any("changed since import" in p for p in check_pageset(ps))


def test_synth_fixed_page_size_for_speed_runs(tmp_path):
    synth_pages(tmp_path / "p", 4, seed=2, page_size=(600, 500), noise=0)
    ps = load_pageset(tmp_path / "p")
    assert {(p.width, p.height) for p in ps.pages} == {(600, 500)}
    for p in ps.pages:  # pixels match the record, and the text is on the page (not a blank canvas)
        img = Image.open(ps.image_path(p)).convert("L")
        assert img.size == (600, 500) and img.getextrema()[0] < 64
    with pytest.raises(InputError, match="--page-size"):
        synth_pages(tmp_path / "r", 2, profile="reader", page_size=(600, 500))
