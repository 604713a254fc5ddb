"""OmniDocBench's JSON truth imported with its page images (`pages import --truth X.json`) and
upstream's 18 demo predictions scored through `quantgate score --metrics omnidoc`: the whole-set values are
upstream's published ones (read from its result JSON), pages without a category are not scored (and counted),
and bad truth is one clear error with nothing written."""

import json
import subprocess
import sys

import pytest
from PIL import Image

from tests.support import upstream_omnidoc as ref

pytestmark = pytest.mark.skipif(ref.demo_missing_reason() is not None, reason=ref.demo_missing_reason() or "")

PUBLISHED = ref.SET_VALUES


def _qg(*args):
    return subprocess.run([sys.executable, "-m", "quantgate", *args], capture_output=True, text=True, timeout=300)


def _images(folder, truth_json):
    # The demo's page images are not in the reference (SOURCE.md: the block metrics do not read them): blank
    # stand-ins under upstream's image names give the pages their ids.
    folder.mkdir()
    for page in json.loads(truth_json.read_text(encoding="utf-8")):
        Image.new("RGB", (120, 160), "white").save(folder / page["page_info"]["image_path"])
    return folder


@pytest.fixture(scope="module")
def demo_set(tmp_path_factory):
    d = tmp_path_factory.mktemp("omnidoc")
    imgs = _images(d / "images", ref.DEMO_TRUTH)
    r = _qg("pages", "import", str(imgs), "-o", str(d / "ps"), "--truth", str(ref.DEMO_TRUTH),
            "--calibration-fraction", "0")
    assert r.returncode == 0, r.stderr[-2000:]
    return d / "ps"


def test_import_writes_markdown_and_block_truth_per_page(demo_set):
    pages = [json.loads(line) for line in (demo_set / "pages.jsonl").read_text().splitlines()]
    assert len(pages) == 18 and all(p["truth"].endswith(".md") for p in pages)
    for p in pages:
        record = json.loads((demo_set / p["truth"].replace(".md", ".omnidoc.json")).read_text(encoding="utf-8"))
        assert record["kind"] == "omnidoc_truth_page" and record["image"].startswith(p["id"])
        # OmniDocBench's page attributes become tags (language, layout, source), as it reports per attribute
        assert f"language:{record['attributes']['language']}" in p["tags"]
        assert f"data_source:{record['attributes']['data_source']}" in p["tags"]


def test_the_block_truth_record_is_bound_like_the_truth(demo_set, tmp_path):
    """Hashes on OmniDocBench pages: the block-matched metrics read each page's ``.omnidoc.json``, so pages.jsonl
    carries its sha256 (schema 3); an edited record is caught by `pages check` and by the check every study start
    runs, and a record pages.jsonl does not bind is refused when scored instead of being read unchecked."""
    import hashlib
    import shutil

    from quantgate.errors import InputError
    from quantgate.io.pageset import load_pageset, verify_page_files

    pages = [json.loads(line) for line in (demo_set / "pages.jsonl").read_text().splitlines()]
    for p in pages:
        record = demo_set / p["truth"].replace(".md", ".omnidoc.json")
        # truth_record_sha256 came with schema 3; pages are written as schema 5 now (4 added parsebench, 5 its
        # table truth)
        assert p["schema_version"] == 5 and p["truth_record_sha256"] == hashlib.sha256(record.read_bytes()).hexdigest()
    ps = tmp_path / "ps"
    shutil.copytree(demo_set, ps)
    victim = ps / pages[0]["truth"].replace(".md", ".omnidoc.json")
    forged = json.loads(victim.read_text(encoding="utf-8"))
    forged["blocks"] = forged["blocks"][:1]  # a truth with blocks removed scores a prediction differently
    victim.write_text(json.dumps(forged), encoding="utf-8")
    r = _qg("pages", "check", str(ps))
    assert r.returncode != 0 and f"OmniDocBench truth record {victim.name} changed since import" in r.stdout + r.stderr
    with pytest.raises(InputError, match=rf"{victim.name} \(page {pages[0]['id']}'s OmniDocBench truth record\) "
                                         "changed since"):
        verify_page_files(load_pageset(ps))
    # the record's hash dropped from pages.jsonl: scoring refuses to read it unchecked
    lines = [dict(p, truth_record_sha256=None) if p["id"] == pages[0]["id"] else p for p in pages]
    (ps / "pages.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    with pytest.raises(InputError, match="is not in .*pages.jsonl .*no truth_record_sha256"):
        load_pageset(ps).omnidoc_truth_text(load_pageset(ps).pages[0])


def test_demo_predictions_score_to_upstreams_published_values(demo_set, tmp_path):
    r = _qg("score", "--pages", str(demo_set), "--predictions", str(ref.DEMO_PREDICTIONS), "-o",
            str(tmp_path / "s.jsonl"), "--metrics", "omnidoc", "--json")
    assert r.returncode == 0, r.stderr[-2000:]
    out = json.loads(r.stdout)
    published = json.loads((ref.RESULT / "end2end_quick_match_metric_result.json").read_text(encoding="utf-8"))
    for name, (category, metric, key) in PUBLISHED.items():
        assert out["omnidoc"]["set_values"][name] == pytest.approx(published[category]["all"][metric][key], abs=0.005)
    # 2 of the 18 pages have display formulas, 9 have tables: the rest are left out, not scored 0
    by_metric = {m["metric"]: m for m in out["metrics"]}
    assert (by_metric["omnidoc_formula_edit"]["n"], by_metric["omnidoc_formula_edit"]["not_scored"]) == (2, 16)
    assert by_metric["omnidoc_table_teds"]["not_scored"] == 9
    rows = [json.loads(line) for line in (tmp_path / "s.jsonl").read_text().splitlines()]
    assert sum(r["omnidoc_formula_edit"] is None for r in rows) == 16


def test_an_empty_prediction_is_scored_by_the_protocol_not_given_a_category_it_lacks(demo_set, tmp_path):
    preds = tmp_path / "preds"
    preds.mkdir()
    for f in ref.DEMO_PREDICTIONS.iterdir():
        (preds / f.name).write_text("", encoding="utf-8")
    r = _qg("score", "--pages", str(demo_set), "--predictions", str(preds), "-o", str(tmp_path / "s.jsonl"),
            "--metrics", "omnidoc_formula_edit,omnidoc_text_edit", "--json")
    assert r.returncode == 0, r.stderr[-2000:]
    by_metric = {m["metric"]: m for m in json.loads(r.stdout)["metrics"]}
    assert by_metric["omnidoc_formula_edit"]["n"] == 2 and by_metric["omnidoc_formula_edit"]["mean"] == 1.0
    assert by_metric["omnidoc_text_edit"]["mean"] == 1.0


def _bad_truth(tmp_path, mutate):
    pages = json.loads(ref.DEMO_TRUTH.read_text(encoding="utf-8"))[:2]
    mutate(pages[1]["layout_dets"])
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(pages, ensure_ascii=False), encoding="utf-8")
    imgs = tmp_path / "imgs"
    imgs.mkdir()
    for p in pages:
        Image.new("RGB", (50, 50), "white").save(imgs / p["page_info"]["image_path"])
    return _qg("pages", "import", str(imgs), "-o", str(tmp_path / "ps"), "--truth", str(path))


def _first(dets, category):
    return next(d for d in dets if d.get("category_type") == category)


def test_an_unknown_category_is_one_error_naming_the_block_and_nothing_is_written(tmp_path):
    r = _bad_truth(tmp_path, lambda dets: dets[0].update(category_type="txet_block"))
    assert r.returncode != 0 and "unknown category 'txet_block'" in r.stderr and "block #0" in r.stderr
    assert not (tmp_path / "ps").exists() and not list(tmp_path.glob(".ps.importing.*"))


def test_a_text_block_without_text_is_one_error(tmp_path):
    r = _bad_truth(tmp_path, lambda dets: _first(dets, "text_block").pop("text"))
    assert r.returncode != 0 and "needs its 'text'" in r.stderr and "bad.json" in r.stderr


def test_a_malformed_table_is_a_listed_skip_and_the_page_still_imports(tmp_path):
    def break_table(dets):
        dets.append({"category_type": "table", "order": 99, "anno_id": 777, "html": "<p>no table here</p>"})

    r = _bad_truth(tmp_path, break_table)
    assert r.returncode == 0, r.stderr[-2000:]
    notes = json.loads((tmp_path / "ps" / "pageset.json").read_text())["notes"]
    assert any("anno_id 777" in n and "skipped" in n for n in notes)
