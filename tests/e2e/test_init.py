"""`quantgate init` writes a commented study YAML from a checkpoint and pages that
`quantgate study` runs as written, and refuses unusable models and pages with one clear line."""

import json
import subprocess
import sys

import pytest
import yaml

from quantgate.study.demo import READER


def _qg(*args, **kw):
    return subprocess.run([sys.executable, "-m", "quantgate", *args], capture_output=True, text=True, **kw)


@pytest.fixture(scope="module")
def reader_pages(tmp_path_factory):
    from quantgate.heldout.synth import synth_pages

    d = tmp_path_factory.mktemp("init") / "pages"
    synth_pages(d, 6, seed=3, profile="reader", calibration_fraction=0.2)
    return d


@pytest.mark.slow  # a whole study of the reader: about 1.5 minutes
def test_init_writes_a_study_that_runs_as_written(reader_pages, tmp_path):
    yml = tmp_path / "study.yaml"
    r = _qg("init", "--model", str(READER), "--pages", str(reader_pages), "--variants", "fp8-dynamic", "-o", str(yml),
            timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    assert f"next: quantgate study {yml}" in r.stdout
    text = yml.read_text()
    body = yaml.safe_load(text)
    # what init found, written with its reasons
    assert "Qwen3_5ForConditionalGeneration" in text and "vision encoder and projector (10 modules) stay BF16" in text
    assert [v["recipe"] for v in body["variants"]] == ["bf16", "fp8-dynamic"] and body["baseline"] == "bf16"
    assert body["metrics"] == ["ned", "cer", "bow_f1"] and body["margins"] == {"ned": 0.01, "cer": 0.01, "bow_f1": 0.01}
    assert body["concurrency"] == [1] and body["noise_concurrency"] == 2 and body["backend"]["name"] == "transformers"
    assert body["pages"] == {"path": str(reader_pages.resolve())}  # outside the YAML's folder: absolute
    assert "at least 30 scored pages" in text and "too_few_documents" in text  # 5 held-out pages: too few
    n_comments = sum(1 for line in text.splitlines() if "#" in line)
    assert n_comments >= 12
    # the study runs as written, from another working directory (paths are relative to the YAML or absolute)
    r = _qg("study", str(yml), cwd=str(tmp_path.parent), timeout=1500)
    assert r.returncode == 0, r.stderr[-3000:]
    out = tmp_path / "reader-out"
    summ = json.loads((out / "summary.json").read_text())
    assert summ["complete"] and {v["variant"] for v in summ["verdicts"]} == {"fp8-dynamic"}
    assert len(summ["verdicts"]) == 3 and summ["noise_level"] == 2


def test_init_imports_images_with_truth_beside_the_yaml(reader_pages, tmp_path):
    from quantgate.io.pageset import load_pageset

    src = load_pageset(reader_pages)
    imgs, truth = tmp_path / "scans", tmp_path / "md"
    imgs.mkdir()
    truth.mkdir()
    for p in src.pages:
        (imgs / f"{p.id}.png").write_bytes(src.image_bytes(p))
        (truth / f"{p.id}.md").write_text(src.truth_text(p))
    yml = tmp_path / "proj" / "study.yaml"
    r = _qg("init", "--model", str(READER), "--pages", str(imgs), "--truth", str(truth), "-o", str(yml),
            "--backend", "vllm", timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    body = yaml.safe_load(yml.read_text())
    assert body["pages"] == {"path": "pages"}  # imported next to the YAML
    ps = load_pageset(tmp_path / "proj" / "pages")
    assert len(ps.pages) == 6 and all(p.truth for p in ps.pages)
    assert "quantgate pages import" in yml.read_text()  # how they were imported, for the record
    # vLLM: speed levels, the default variants that apply, calibration sized to the calibration split
    assert body["backend"] == {"name": "vllm"} and body["concurrency"] == [1, 8, 32, 64]
    assert [v["name"] for v in body["variants"]] == ["bf16", "fp8-dynamic", "nvfp4", "mixed"]
    assert body["calibration_samples"] == len(ps.split("calibration"))
    # a second init does not overwrite either the YAML or the imported pages
    r = _qg("init", "--model", str(READER), "--pages", str(imgs), "-o", str(yml), timeout=600)
    assert r.returncode == 64 and "exists" in r.stderr and "Traceback" not in r.stderr


@pytest.mark.parametrize("case", ["model_not_a_model", "pickle_model", "no_pages", "no_truth", "bad_variant"])
def test_init_refuses_unusable_inputs(reader_pages, tmp_path, case):
    import shutil

    model, pages, extra = READER, reader_pages, []
    if case == "model_not_a_model":
        model, msg = reader_pages, "not a model folder"
    elif case == "pickle_model":
        model = tmp_path / "m"
        shutil.copytree(READER, model)
        (model / "pytorch_model.bin").write_bytes(b"x")
        msg = "pickle"
    elif case == "no_pages":
        pages = tmp_path / "empty"
        pages.mkdir()
        (pages / "notes.txt").write_text("nothing here")
        msg = "no PDFs or images"
    elif case == "no_truth":
        pages = tmp_path / "imgs"
        pages.mkdir()
        (pages / "a.png").write_bytes((reader_pages / "images" / sorted(p.name for p in
                                                                        (reader_pages / "images").iterdir())[0]).read_bytes())
        msg = "no held-out page has truth, checks or ParseBench rules"
    else:
        extra, msg = ["--variants", "no-such-preset"], "no such preset"
    yml = tmp_path / "new" / "study" / "s.yaml"  # folders init would create for its YAML and pages
    r = _qg("init", "--model", str(model), "--pages", str(pages), "-o", str(yml), *extra, timeout=600)
    assert r.returncode == 65, r.stdout + r.stderr  # the files given exist but cannot be used
    assert msg in r.stderr and "Traceback" not in r.stderr and r.stderr.count("\n") <= 2
    assert not (tmp_path / "new").exists()  # neither the YAML nor an empty folder for it is left behind
