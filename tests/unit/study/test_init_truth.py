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
from quantgate.errors import InputError
from quantgate.schema.metrics import METRICS
from quantgate.study.init import ImportRequest, ModelFacts, pages_target, prepare_pages, render_study
from tests.support.cli import run_cli as _qg
from tests.support.paths import SHARED

OMNIDOC_JSON = SHARED / "reference" / "omnidocbench" / "demo_data" / "omnidocbench_demo" / "OmniDocBench_demo.json"
needs_omnidoc = pytest.mark.skipif(not OMNIDOC_JSON.is_file(), reason="OmniDocBench's demo JSON "
                                   "(../shared/reference/omnidocbench) is not beside the checkout")


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
