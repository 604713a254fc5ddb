"""Protects `quantgate init` as `pages import` plus a study: the same truth forms (OmniDocBench's JSON too),
metrics chosen from what the truth holds and said in the YAML, every refusal that the files alone decide
made before the model is loaded, and a rerun that resumes or says --overwrite. In-process: the model is
never loaded here (a refusal must come first; the YAML is rendered from stated model facts)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from PIL import Image

from quantgate import cli
from quantgate.errors import InputError, UsageError
from quantgate.schema.metrics import METRICS
from quantgate.study.init import ImportRequest, ModelFacts, pages_target, prepare_pages, render_study
from tests.support.cli import run_cli as _qg
from tests.support.paths import SHARED, oracle_missing

OMNIDOC_JSON = SHARED / "reference" / "omnidocbench" / "demo_data" / "omnidocbench_demo" / "OmniDocBench_demo.json"
needs_omnidoc = pytest.mark.skipif(oracle_missing(OMNIDOC_JSON) is not None, reason=oracle_missing(OMNIDOC_JSON) or "")


def _images(folder: Path, names) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for n in names:
        Image.new("RGB", (96, 128), "white").save(folder / n)
    return folder


def _model(tmp_path) -> ModelFacts:
    return ModelFacts(path=tmp_path / "ckpt", architecture="Qwen3_5ForConditionalGeneration", params=10**6,
                      weights_bytes=2 * 10**6, vision_bf16=3, not_applicable={},
                      presets={"fp8-dynamic": {"formats": ["fp8"], "quantized": 4, "compression": 2.0,
                                               "calibration": False, "vision_touched": False}})


@needs_omnidoc
@pytest.mark.parametrize("missing", [[], ["texlive-xetex", "ghostscript"]])
def test_init_on_omnidocbench_json_picks_the_omnidocbench_family(tmp_path, monkeypatch, missing):
    from quantgate.scoring.omnidoc import cdm_render

    monkeypatch.setattr(cdm_render, "missing_packages", lambda: missing)  # doctor's check, as this machine answers
    pages = json.loads(OMNIDOC_JSON.read_text("utf-8"))
    imgs = _images(tmp_path / "imgs", [p["page_info"]["image_path"].replace(".jpg", ".png") for p in pages])
    req = ImportRequest(truth=OMNIDOC_JSON, calibration_fraction=0.0, tags=["source:omnidoc-demo"],
                        document_pattern=r"^(.+?)(?:\.pdf)?_\d+\.png$")
    target, reuse = pages_target(imgs, tmp_path, req)
    assert target == tmp_path / "pages" and not reuse
    pf = prepare_pages(imgs, target, tmp_path / "no-model", req)
    assert pf.omnidoc == pf.heldout == len(pages) and pf.tables  # the demo's truth has HTML tables
    assert "--document-pattern" in pf.imported and "--tag source:omnidoc-demo" in pf.imported
    text = render_study(_model(tmp_path), pf, tmp_path / "study.yaml", "transformers", None)
    body = yaml.safe_load(text)
    family = [m for m, spec in METRICS.items() if spec.family == "omnidoc15" and m != "omnidoc15_formula_cdm"]
    assert family and set(family) <= set(body["metrics"]) and "table_teds" in body["metrics"]
    # formula CDM where its toolchain is installed; where not, the YAML says what installs it
    assert ("omnidoc15_formula_cdm" in body["metrics"]) == (not missing)
    assert ("make setup-cdm, then add it to metrics" in text) == bool(missing)
    assert not missing or "texlive-xetex ghostscript" in text
    assert not any(METRICS[m].family == "omnidoc" for m in body["metrics"])  # v1.0's, only when asked for by name
    assert body["margins"] == {m: METRICS[m].margin for m in body["metrics"]}
    # each choice said in a comment, with what in the truth led to it
    assert "OmniDocBench block records (layout_dets)" in text and "tables (HTML or pipe tables)" in text
    assert body["bootstrap_seed"] == 0 and "seed" not in body


@needs_omnidoc
def test_a_rerun_reuses_the_same_import_and_refuses_another(tmp_path):
    pages = json.loads(OMNIDOC_JSON.read_text("utf-8"))[:3]
    imgs = _images(tmp_path / "imgs", [p["page_info"]["image_path"] for p in pages])
    truth = tmp_path / "truth.json"
    truth.write_text(json.dumps(pages), "utf-8")
    req = ImportRequest(truth=truth, calibration_fraction=0.0)
    target, _ = pages_target(imgs, tmp_path, req)
    prepare_pages(imgs, target, tmp_path / "no-model", req)
    assert pages_target(imgs, tmp_path, req) == (target, True)  # the same files and split: resumed
    other = ImportRequest(truth=truth, calibration_fraction=0.0, split_seed=1)
    with pytest.raises(InputError, match="--overwrite"):
        pages_target(imgs, tmp_path, other)
    assert pages_target(imgs, tmp_path, other, overwrite=True) == (target, False)


def test_a_json_that_is_not_omnidocbenchs_is_refused_before_the_model(tmp_path):
    imgs = _images(tmp_path / "imgs", ["a.png", "b.png"])
    bad = tmp_path / "labels.json"
    bad.write_text(json.dumps({"a": "# Title"}), "utf-8")
    model = tmp_path / "empty-model"
    model.mkdir()  # loading it would fail on its missing config.json: the JSON must be refused first
    out = tmp_path / "out"
    rc, stdout, err = _qg("init", "--model", model, "--pages", imgs, "--truth", bad, "-o", out / "study.yaml")
    assert rc == 65 and stdout == "" and len(err.strip().splitlines()) == 1, err
    assert str(bad) in err and "OmniDocBench" in err and "config.json" not in err
    assert not out.exists()


def test_a_rerun_into_the_same_yaml_says_overwrite_before_the_model(tmp_path):
    imgs = _images(tmp_path / "imgs", ["a.png"])
    model = tmp_path / "empty-model"
    model.mkdir()
    (tmp_path / "study.yaml").write_text("name: earlier\n", "utf-8")
    rc, _, err = _qg("init", "--model", model, "--pages", imgs, "-o", tmp_path / "study.yaml")
    assert rc == 64 and "--overwrite" in err and "config.json" not in err, err  # the -o path: a usage error
    assert (tmp_path / "study.yaml").read_text("utf-8") == "name: earlier\n"


def test_init_takes_every_pages_import_flag():
    """The import flags are one definition: init has each of `pages import`'s truth/split/grouping flags."""
    parser = cli.build_parser()
    verbs = dict(_verbs(parser))
    shared = {"--truth", "--checks", "--calibration-fraction", "--split-seed", "--document-pattern", "--tag"}
    for verb in ("init", "pages import"):
        flags = {o for a in verbs[verb]._actions for o in a.option_strings}
        assert shared <= flags, (verb, shared - flags)


def _verbs(parser):
    from quantgate.commands._fields import walk

    return walk(parser)


def test_a_check_scoring_would_refuse_is_refused_before_the_model(tmp_path):
    imgs = _images(tmp_path / "imgs", ["a.png"])
    checks = tmp_path / "checks.jsonl"
    checks.write_text(json.dumps({"pdf": "a.pdf", "page": 1, "id": "a_00", "type": "present", "text": "x"}) + "\n"
                      + json.dumps({"pdf": "a.pdf", "page": 1, "id": "a_01", "type": "no-such-type"}) + "\n", "utf-8")
    model = tmp_path / "empty-model"
    model.mkdir()
    out = tmp_path / "out"
    rc, _, err = _qg("init", "--model", model, "--pages", imgs, "--checks", checks, "-o", out / "study.yaml")
    assert rc == 65 and len(err.strip().splitlines()) == 1, err
    assert f"{checks}:2" in err and "a_01" in err and "config.json" not in err
    assert not out.exists()


def _first_import(tmp_path, req: ImportRequest) -> tuple[Path, Path, Path]:
    """Two tiny images imported as an init into tmp_path/out would (the model never loaded): (images, the page set,
    an empty model folder that a rerun would fail to load, so a refusal must come before it)."""
    imgs = _images(tmp_path / "imgs", ["a.png", "b.png"])
    target, reuse = pages_target(imgs, tmp_path / "out", req)
    assert not reuse
    prepare_pages(imgs, target, tmp_path / "no-model", req)
    model = tmp_path / "empty-model"
    model.mkdir()
    return imgs, target, model


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {str(f.relative_to(folder)): f.read_bytes() for f in sorted(folder.rglob("*")) if f.is_file()}


def _truth(folder: Path, **pages: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for pid, text in pages.items():
        (folder / f"{pid}.md").write_text(text, "utf-8")
    return folder


@pytest.mark.parametrize("change, flag", [
    ("truth-edited", "--truth"), ("truth-other", "--truth"), ("tag", "--tag"), ("pattern", "--document-pattern"),
    ("seed", "--split-seed"), ("checks", "--checks")])
def test_a_rerun_with_other_inputs_says_overwrite_naming_them(tmp_path, change, flag):
    truth = _truth(tmp_path / "truth", a="# A\n", b="# B\n")
    imgs, target, model = _first_import(tmp_path, ImportRequest(truth=truth, calibration_fraction=0.0))
    before = _snapshot(target)
    args = ["--truth", truth, "--calibration-fraction", "0"]
    if change == "truth-edited":  # the same path, other bytes: the file's name alone does not make it the same truth
        (truth / "b.md").write_text("# B, corrected\n", "utf-8")
    elif change == "truth-other":
        args[1] = _truth(tmp_path / "truth2", a="# A\n", b="# Another B\n")
    elif change == "tag":
        args += ["--tag", "source:scans"]
    elif change == "pattern":
        args += ["--document-pattern", r"^(.)"]
    elif change == "seed":
        args += ["--split-seed", "1"]
    else:
        checks = tmp_path / "checks.jsonl"
        checks.write_text(json.dumps({"pdf": "a.pdf", "page": 1, "id": "a_00", "type": "present", "text": "A"}) + "\n")
        args += ["--checks", checks]
    rc, stdout, err = _qg("init", "--model", model, "--pages", imgs, *args, "-o", tmp_path / "out" / "study.yaml")
    assert rc == 64 and len(err.strip().splitlines()) == 1, err  # the usage code: the folder, not a file's content
    assert f"another {flag}" in err and "--overwrite" in err and str(target) in err and "config.json" not in err
    assert _snapshot(target) == before and not (tmp_path / "out" / "study.yaml").exists()


def test_a_rerun_with_a_json_that_is_not_omnidocbenchs_is_refused_not_reused(tmp_path):
    truth = _truth(tmp_path / "truth", a="# A\n", b="# B\n")
    imgs, target, model = _first_import(tmp_path, ImportRequest(truth=truth, calibration_fraction=0.0))
    before = _snapshot(target)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"a": "# T"}), "utf-8")
    rc, stdout, err = _qg("init", "--model", model, "--pages", imgs, "--truth", bad, "--calibration-fraction", "0",
                          "-o", tmp_path / "out" / "study.yaml")
    assert rc == 65 and stdout == "" and len(err.strip().splitlines()) == 1, err
    assert str(bad) in err and "OmniDocBench" in err and "reusing" not in err and "config.json" not in err
    assert _snapshot(target) == before and not (tmp_path / "out" / "study.yaml").exists()


def test_an_identical_rerun_reuses_the_import(tmp_path):
    truth = _truth(tmp_path / "truth", a="# A\n", b="# B\n")
    req = ImportRequest(truth=truth, calibration_fraction=0.0, tags=["source:scans"], document_pattern=r"^(.)")
    imgs, target, _ = _first_import(tmp_path, req)
    assert pages_target(imgs, tmp_path / "out", req) == (target, True)
    # the same bytes from another folder are the same truth: still the same import
    copy = _truth(tmp_path / "copy", a="# A\n", b="# B\n")
    same = ImportRequest(truth=copy, calibration_fraction=0.0, tags=["source:scans"], document_pattern=r"^(.)")
    assert pages_target(imgs, tmp_path / "out", same) == (target, True)
    assert pages_target(imgs, tmp_path / "out", same, overwrite=True) == (target, False)


def test_an_import_that_records_no_inputs_still_reads_and_is_not_reused(tmp_path):
    """A page set from before pageset.json recorded its inputs (schema 2, no made_from) reads as it did; init
    cannot tell it is the same import, so a rerun says --overwrite rather than trust it."""
    from quantgate.io.pageset import load_pageset

    truth = _truth(tmp_path / "truth", a="# A\n", b="# B\n")
    req = ImportRequest(truth=truth, calibration_fraction=0.0)
    imgs, target, _ = _first_import(tmp_path, req)
    manifest = json.loads((target / "pageset.json").read_text("utf-8"))
    assert manifest["schema_version"] == 3 and manifest["made_from"]["truth_sha256"]
    del manifest["made_from"]
    (target / "pageset.json").write_text(json.dumps({**manifest, "schema_version": 2}), "utf-8")
    assert load_pageset(target).manifest.made_from is None
    with pytest.raises(UsageError, match="does not record what it was imported from.*--overwrite"):
        pages_target(imgs, tmp_path / "out", req)
