"""Documents in page sets: every page's document from its PDF, a pattern, a sub-folder or itself, and
splits made per document, so that no document has pages in both calibration and held-out."""

import json
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from quantgate.errors import InputError
from quantgate.heldout.check import check_pageset, pageset_stats
from quantgate.heldout.importer import ImportOptions, import_pages
from quantgate.heldout.synth import synth_pages
from quantgate.heldout.synth_reuse import ensure_synth_pages
from quantgate.io.pageset import load_pageset, split_of
from quantgate.schema.base import parse_record
from quantgate.schema.study import SynthPages


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "quantgate", *args], capture_output=True, text=True, timeout=300)


def _page(i: int, size=(120, 90)) -> Image.Image:
    # coarse seeded blocks: pages far apart in perceptual hash, so `pages check` sees no near-duplicates
    blocks = np.random.default_rng(i).integers(0, 256, (6, 8), dtype=np.uint8)
    return Image.fromarray(blocks).resize(size, Image.Resampling.NEAREST).convert("RGB")


def _pdf(path: Path, n: int, start: int = 0) -> Path:
    pages = [_page(start + i) for i in range(n)]
    pages[0].save(path, "PDF", save_all=True, append_images=pages[1:])
    return path


def _splits_by_document(pages) -> dict[str, set[str]]:
    out = defaultdict(set)
    for p in pages:
        out[p.document].add(p.split)
    return out


def _would_straddle(pages, seed: int, fraction: float) -> bool:
    """Whether the split made per page id (as before documents) puts some document in both splits."""
    by_doc = defaultdict(set)
    for p in pages:
        by_doc[p.document].add(split_of(p.id, seed, fraction))
    return any(len(s) > 1 for s in by_doc.values())


def test_pdf_pages_never_straddle_the_split(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    _pdf(src / "report.pdf", 12)
    _pdf(src / "memo.pdf", 4, start=20)
    _pdf(src / "letter.pdf", 1, start=40)
    import_pages([src], tmp_path / "ps", ImportOptions(megapixels=0.02, calibration_fraction=0.5, seed=3))
    ps = load_pageset(tmp_path / "ps")
    docs = {p.id: p.document for p in ps.pages}
    assert docs["report_pg1"] == docs["report_pg12"] == "report" and docs["memo_pg3"] == "memo"
    assert docs["letter_pg1"] == "letter" and len(ps.pages) == 17
    assert all(len(s) == 1 for s in _splits_by_document(ps.pages).values())
    assert {p.split for p in ps.pages} == {"calibration", "heldout"}  # both splits are used, by whole documents
    assert all(p.split == split_of(p.document, 3, 0.5) for p in ps.pages)
    assert _would_straddle(ps.pages, 3, 0.5)  # the per-page split this replaces leaked on these very pages
    assert check_pageset(ps) == [] and pageset_stats(ps).documents == 3


def test_synth_pages_per_document_never_straddle(tmp_path):
    synth_pages(tmp_path / "s", 24, seed=5, calibration_fraction=0.5, profile="simple", pages_per_document=5)
    ps = load_pageset(tmp_path / "s")
    by_doc = defaultdict(list)
    for p in ps.pages:
        by_doc[p.document].append(p)
    assert sorted(len(v) for v in by_doc.values()) == [4, 5, 5, 5, 5]  # the last document is shorter
    assert by_doc["synth-5-doc00000"][0].id == "synth-5-00000" and by_doc["synth-5-doc00004"][-1].id == "synth-5-00023"
    assert all(len(s) == 1 for s in _splits_by_document(ps.pages).values())
    assert {p.split for p in ps.pages} == {"calibration", "heldout"}
    assert _would_straddle(ps.pages, 5, 0.5)
    for pages in by_doc.values():  # a document's pages share one look (font, width), as a real one's do
        assert len({p.width for p in pages}) == 1 and len({p.tags[0] for p in pages}) == 1
    assert ps.manifest.synth.pages_per_document == 5 and check_pageset(ps) == []


def test_synth_one_page_per_document_keeps_the_old_splits(tmp_path):
    synth_pages(tmp_path / "s", 12, seed=4, calibration_fraction=0.4, profile="simple")
    ps = load_pageset(tmp_path / "s")
    assert all(p.document == p.id and p.split == split_of(p.id, 4, 0.4) for p in ps.pages)
    assert ps.manifest.synth.pages_per_document == 1


def test_study_synth_spec_carries_pages_per_document(tmp_path):
    spec = parse_record(SynthPages, {"n": 6, "profile": "simple", "pages_per_document": 3}, where="study")
    assert spec.pages_per_document == 3
    with pytest.raises(InputError, match="pages_per_document"):
        parse_record(SynthPages, {"n": 6, "pages_per_document": 0}, where="study")
    logs = []
    assert ensure_synth_pages(tmp_path / "s", **spec.model_dump(), log=logs.append)
    assert not ensure_synth_pages(tmp_path / "s", **spec.model_dump(), log=logs.append)  # reused as it is
    assert ensure_synth_pages(tmp_path / "s", **(spec.model_dump() | {"pages_per_document": 2}), log=logs.append)
    assert "pages_per_document 3 → 2" in logs[-1]
    assert len({p.document for p in load_pageset(tmp_path / "s").pages}) == 3


def _images(folder: Path, names: list[str]) -> None:
    for i, name in enumerate(names):
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        _page(i).save(folder / name)


def test_images_grouped_by_pattern_then_subfolder_then_alone(tmp_path):
    flat = tmp_path / "flat"
    _images(flat, ["inv_p1.png", "inv_p2.png", "memo_p1.png"])
    rep = import_pages([flat], tmp_path / "a", ImportOptions(document_pattern=r"^(.+)_p\d+"))
    assert {p.id: p.document for p in load_pageset(tmp_path / "a").pages} == {
        "inv_p1": "inv", "inv_p2": "inv", "memo_p1": "memo"}
    assert not any("own document" in w for w in rep.warnings)

    nested = tmp_path / "nested"
    _images(nested, ["q1/a.png", "q1/b.png", "q2/deep/c.png", "top.png"])
    rep = import_pages([nested], tmp_path / "b", ImportOptions())
    assert {p.id: p.document for p in load_pageset(tmp_path / "b").pages} == {
        "a": "q1", "b": "q1", "c": "q2/deep", "top": "top"}
    assert not any("own document" in w for w in rep.warnings)  # one image alone is no grouping to miss

    rep = import_pages([flat], tmp_path / "c", ImportOptions())
    assert all(p.document == p.id for p in load_pageset(tmp_path / "c").pages)
    [w] = [w for w in rep.warnings if "own document" in w]
    assert w.startswith("3 images") and "--document-pattern" in w and "sub-folder" in w


def test_a_pattern_that_names_no_document_is_one_error_and_writes_nothing(tmp_path):
    flat = tmp_path / "flat"
    _images(flat, ["inv_p1.png", "cover.png"])
    for pattern, msg in ((r"^(.+)_p\d+", r"names no document for 1 of 2 image.*'cover\.png'"),
                         (r"^(zzz)", r"names no document for 2 of 2"),
                         (r"^(x*)", "non-empty"),  # matches, but names the empty document
                         (r"(unclosed", "not a regular expression")):
        with pytest.raises(InputError, match=msg) as e:
            import_pages([flat], tmp_path / "out", ImportOptions(document_pattern=pattern))
        assert pattern in str(e.value)
        assert not (tmp_path / "out").exists() and not list(tmp_path.glob(".out.*"))
    r = _cli("pages", "import", str(flat), "-o", str(tmp_path / "out"), "--document-pattern", "^(zzz)")
    assert r.returncode == 64 and "--document-pattern '^(zzz)'" in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "out").exists()


def test_cli_flags(tmp_path):
    flat = tmp_path / "flat"
    _images(flat, ["a_1.png", "a_2.png", "b_1.png"])
    r = _cli("pages", "import", str(flat), "-o", str(tmp_path / "i"), "--document-pattern", "^([a-z])_")
    assert r.returncode == 0, r.stderr
    assert sorted({p.document for p in load_pageset(tmp_path / "i").pages}) == ["a", "b"]
    r = _cli("pages", "import", str(flat), "-o", str(tmp_path / "j"))
    assert r.returncode == 0 and "warning: 3 images are each their own document" in r.stderr
    r = _cli("pages", "synth", "-o", str(tmp_path / "s"), "--n", "6", "--profile", "simple", "--pages-per-document", "4")
    assert r.returncode == 0, r.stderr
    assert "6 synthetic pages in 2 document(s)" in r.stdout
    r = _cli("pages", "stats", str(tmp_path / "s"), "--json")
    assert json.loads(r.stdout)["documents"] == 2


def _line(**kw) -> str:
    rec = {"schema_version": 1, "id": "p1", "image": "images/p1.png", "sha256": "0" * 64, "width": 8, "height": 8,
           "source": {"file": "p1.png"}, "split": "heldout"} | kw
    return json.dumps({k: v for k, v in rec.items() if v is not None}) + "\n"


def test_old_page_sets_read_each_page_its_own_document(tmp_path):
    (tmp_path / "pages.jsonl").write_text(_line() + _line(id="p2", image="images/p2.png"))
    ps = load_pageset(tmp_path)
    assert [(p.id, p.document, p.schema_version) for p in ps.pages] == [("p1", "p1", 2), ("p2", "p2", 2)]
    (tmp_path / "pages.jsonl").write_text(_line(schema_version=2))  # schema 2 must say its document
    with pytest.raises(InputError, match=r"pages\.jsonl:1: field 'document'"):
        load_pageset(tmp_path)


def test_check_reports_a_document_in_both_splits(tmp_path):
    (tmp_path / "pages.jsonl").write_text(
        _line(schema_version=2, document="doc")
        + _line(schema_version=2, id="p2", document="doc", split="calibration", sha256="1" * 64))
    problems = [p for p in check_pageset(load_pageset(tmp_path)) if p.startswith("leakage")]
    assert problems == ["leakage: document 'doc' has pages in both splits (calibration ['p2'], heldout ['p1']); "
                        "a document's pages must share one split"]
