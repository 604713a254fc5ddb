"""The labeling draw (``quantgate pages label-sample``): whole held-out documents, seeded, uniform, recorded in
pageset.json so a verdict can check that the labeled pages are that draw; bad input refused with nothing written."""

from __future__ import annotations

import csv
import io
import json
import random
from collections import Counter
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest

from quantgate import cli
from quantgate.errors import DataError, InputError, UsageError
from quantgate.heldout.label import draw, label_sample, sample_status
from quantgate.heldout.synth import synth_pages
from quantgate.io.fileio import sha256_file
from quantgate.io.pageset import load_pageset
from tests.support.truthless import drop_truth


@pytest.fixture(scope="module")
def made(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("label") / "set"
    synth_pages(root, 36, seed=3, profile="simple", pages_per_document=3, calibration_fraction=0.2)
    return root


@pytest.fixture
def pageset(made, tmp_path) -> Path:
    import shutil

    root = tmp_path / "set"
    shutil.copytree(made, root)
    return root


def _heldout_docs(ps) -> dict[str, set[str]]:
    docs: dict[str, set[str]] = {}
    for p in ps.pages:
        if p.split == "heldout":
            docs.setdefault(p.document, set()).add(p.id)
    return docs


def test_whole_heldout_documents_seeded(pageset):
    ps = load_pageset(pageset)
    docs = _heldout_docs(ps)
    assert len(docs) >= 6 and any(p.split == "calibration" for p in ps.pages)
    s = draw(ps, 4, seed=11)
    assert len(s.documents) == 4 and set(s.documents) <= set(docs)  # never a calibration document
    assert set(s.page_ids) == set().union(*(docs[d] for d in s.documents))  # every page of a drawn document
    assert draw(ps, 4, seed=11) == s
    assert {tuple(draw(ps, 4, seed=k).documents) for k in range(20)} != {tuple(s.documents)}  # the seed matters
    # the order pages.jsonl lists them in does not change the draw (a hash of the document, not a shuffle)
    lines = (pageset / "pages.jsonl").read_text().splitlines()
    random.Random(0).shuffle(lines)
    (pageset / "pages.jsonl").write_text("\n".join(lines) + "\n")
    assert draw(load_pageset(pageset), 4, seed=11).page_ids == s.page_ids


def test_every_document_equally_likely(pageset):
    """Over 3,000 seeds each held-out document is drawn in n/N of them (5 standard errors either side)."""
    ps = load_pageset(pageset)
    n_docs, n, seeds = len(_heldout_docs(ps)), 3, 3000
    counts = Counter(d for k in range(seeds) for d in draw(ps, n, seed=k).documents)
    p = n / n_docs
    se = (p * (1 - p) / seeds) ** 0.5
    assert len(counts) == n_docs
    assert all(abs(c / seeds - p) < 5 * se for c in counts.values()), (p, counts)


def test_writes_the_list_and_records_the_draw(pageset):
    before = json.loads((pageset / "pageset.json").read_text())
    s, wrote = label_sample(pageset, 3, seed=7)
    assert wrote
    rows = list(csv.DictReader((pageset / "label-sample" / "pages.csv").open()))
    assert [r["page_id"] for r in rows] == s.page_ids
    ps = load_pageset(pageset)
    by_id = ps.by_id()
    for r in rows:
        assert r["document"] == by_id[r["page_id"]].document and r["truth_file"] == f"{r['page_id']}.md"
        assert sha256_file(pageset / "label-sample" / r["image"]) == by_id[r["page_id"]].sha256
    readme = (pageset / "label-sample" / "README.md").read_text()
    assert "Do not draft the truth from a model's output" in readme
    assert ps.manifest.schema_version == max(2, before["schema_version"]) and ps.manifest.label_sample == s
    assert s.list_file == "label-sample/pages.csv"
    # the rest of the manifest is as it was
    after = json.loads((pageset / "pageset.json").read_text())
    assert {k: v for k, v in after.items() if k not in ("label_sample", "schema_version")} == \
        {k: v for k, v in before.items() if k not in ("label_sample", "schema_version")}


def test_a_schema_1_manifest_reads_and_takes_a_draw(pageset):
    man = json.loads((pageset / "pageset.json").read_text())
    man["schema_version"] = 1
    (pageset / "pageset.json").write_text(json.dumps(man))
    assert load_pageset(pageset).manifest.label_sample is None
    label_sample(pageset, 2, seed=1)
    assert json.loads((pageset / "pageset.json").read_text())["schema_version"] == 2


def _unchanged(pageset: Path):
    return (pageset / "pageset.json").read_bytes(), sorted(p.name for p in pageset.iterdir())


def test_refuses_more_documents_than_held_out(pageset):
    n_docs = len(_heldout_docs(load_pageset(pageset)))
    before = _unchanged(pageset)
    with pytest.raises(UsageError, match=f"has {n_docs} held-out document"):
        label_sample(pageset, n_docs + 1)
    assert _unchanged(pageset) == before
    label_sample(pageset, n_docs)  # all of them is a draw (a census)


def test_refuses_what_is_not_a_page_set(tmp_path, pageset):
    with pytest.raises(InputError, match="not a page set"):
        label_sample(tmp_path, 1)
    (pageset / "pageset.json").unlink()
    with pytest.raises(DataError, match="no pageset.json"):
        label_sample(pageset, 1)
    assert not (pageset / "label-sample").exists()


def test_an_existing_draw_is_shown_or_replaced_with_overwrite(pageset):
    first, _ = label_sample(pageset, 3, seed=1)
    assert label_sample(pageset, 3, seed=1) == (first, False)  # the same draw: shown, nothing written
    before = _unchanged(pageset)
    with pytest.raises(UsageError, match=r"already records a labeling draw \(.*seed 1.*--overwrite"):
        label_sample(pageset, 3, seed=2)
    assert _unchanged(pageset) == before
    second, wrote = label_sample(pageset, 3, seed=2, overwrite=True)
    assert wrote and load_pageset(pageset).manifest.label_sample == second
    assert [r["page_id"] for r in csv.DictReader((pageset / "label-sample" / "pages.csv").open())] == second.page_ids


def test_refuses_a_non_empty_list_folder(pageset, tmp_path):
    out = tmp_path / "labels"
    out.mkdir()
    (out / "p.md").write_text("a labeler's work")
    with pytest.raises(UsageError, match="not empty"):
        label_sample(pageset, 2, out=out)
    assert load_pageset(pageset).manifest.label_sample is None and (out / "p.md").read_text() == "a labeler's work"


def test_sample_status(pageset):
    assert "no labeling draw" in sample_status(load_pageset(pageset)).problem
    s, _ = label_sample(pageset, 3, seed=4)
    other = next(p.id for p in load_pageset(pageset).split("heldout") if p.id not in s.page_ids)
    # every drawn page labeled, and a page outside the draw: the sample stands; truth elsewhere is not part of it
    drop_truth(pageset, set(s.page_ids) | {other})
    st = sample_status(load_pageset(pageset))
    assert st.at_random and st.labeled == frozenset(s.page_ids) and other not in st.labeled
    # a drawn page left unlabeled: the labeled ones are no longer the random sample
    drop_truth(pageset, set(s.page_ids[1:]) | {other})
    st = sample_status(load_pageset(pageset))
    assert not st.at_random and "1 of the" in st.problem and s.page_ids[0] in st.problem
    assert st.labeled == frozenset(s.page_ids[1:])


def test_sample_status_catches_an_edited_or_stale_draw(pageset):
    s, _ = label_sample(pageset, 2, seed=4)
    man = json.loads((pageset / "pageset.json").read_text())
    ps = load_pageset(pageset)
    swap = next(p for p in ps.split("heldout") if p.document not in s.documents)
    edited = json.loads(json.dumps(man))
    edited["label_sample"]["documents"][0] = swap.document  # a document swapped by hand
    (pageset / "pageset.json").write_text(json.dumps(edited))
    assert "not the draw its seed makes" in sample_status(load_pageset(pageset)).problem
    (pageset / "pageset.json").write_text(json.dumps(man))
    # a held-out document removed after the draw: it was drawn from other pages
    lines = [ln for ln in (pageset / "pages.jsonl").read_text().splitlines()
             if json.loads(ln)["document"] != swap.document]
    (pageset / "pages.jsonl").write_text("\n".join(lines) + "\n")
    assert "held-out documents changed since the draw" in sample_status(load_pageset(pageset)).problem


def test_the_verb_exit_codes(pageset):
    def run(*argv):
        out, err = io.StringIO(), io.StringIO()
        with redirect_stdout(out), redirect_stderr(err):
            try:
                rc = cli.main(["pages", "label-sample", *argv])
            except SystemExit as e:
                rc = e.code
        return rc, out.getvalue(), err.getvalue()

    rc, out, _ = run(str(pageset), "-n", "2", "--sample-seed", "9")
    assert rc == 0 and "drew" in out and "in 2 document(s)" in out
    rc, _, err = run(str(pageset), "-n", "2", "--sample-seed", "8")
    assert rc == UsageError.exit_code and len(err.splitlines()) == 1 and "--overwrite" in err
    rc, _, err = run(str(pageset), "-n", "999", "--overwrite")
    assert rc == UsageError.exit_code and "held-out document" in err


def test_pages_check_accepts_a_mix_and_reports_the_draw(tmp_path):
    pageset = tmp_path / "set"  # no calibration split: simple pages look alike to the leakage check's hash
    synth_pages(pageset, 12, seed=3, profile="simple", pages_per_document=3, calibration_fraction=0.0)

    def check():
        out, err = io.StringIO(), io.StringIO()
        with redirect_stdout(out), redirect_stderr(err):
            rc = cli.main(["pages", "check", str(pageset)])
        return rc, out.getvalue()

    s, _ = label_sample(pageset, 2, seed=6)
    drop_truth(pageset, set(s.page_ids))
    n = len(load_pageset(pageset).pages)
    rc, out = check()
    assert rc == 0 and f"{len(s.page_ids)} with truth, {n - len(s.page_ids)} without" in out
    assert "labeling draw: " in out and "every drawn page has truth" in out
    drop_truth(pageset, set(s.page_ids[1:]))
    rc, out = check()
    assert rc == 0 and f"1 of the {len(s.page_ids)} drawn pages have no truth yet" in out
