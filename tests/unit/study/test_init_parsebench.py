"""Protects `quantgate init` on ParseBench rules (`--parsebench`, as `pages import` takes it, or a page set imported
with them): it proposes the ParseBench metrics of the dimensions whose rules the held-out pages carry (not a dimension
no page has), says so in a comment, and a page set with only ParseBench rules is scored, not refused as having nothing
to score; a bad rule is refused naming its line before the model is loaded. In-process: the model is never loaded."""

from __future__ import annotations

import io
import json
from contextlib import redirect_stderr, redirect_stdout

import pytest
import yaml
from PIL import Image

from quantgate import cli
from quantgate.errors import InputError
from quantgate.heldout.importer import ImportOptions, import_pages
from quantgate.schema.metrics import FAMILIES, METRICS
from quantgate.scoring.parsebench.dataset import read_rules
from quantgate.study.init import ImportRequest, ModelFacts, pages_target, prepare_pages, render_study

RULES = [  # doc1: a content and a formatting rule; doc2: a formatting rule only; doc3: none
    {"pdf": "text/doc1.pdf", "page": 1, "type": "missing_word_percent", "rule": {"bag_of_word": {"revenue": 2}}},
    {"pdf": "text/doc1.pdf", "page": 1, "type": "is_bold", "rule": {"text": "revenue"}},
    {"pdf": "text/doc2.pdf", "page": 1, "type": "is_bold", "rule": {"text": "quarterly"}},
]


def _sources(tmp_path, rules):
    src = tmp_path / "src"
    src.mkdir()
    for name in ("doc1_pg1", "doc2_pg1", "doc3_pg1"):
        Image.new("RGB", (64, 64), "white").save(src / f"{name}.png")
    f = tmp_path / "rules.jsonl"
    f.write_text("".join(json.dumps(r) + "\n" for r in rules))
    return src, f


def _page_set(tmp_path, rules):
    src, f = _sources(tmp_path, rules)
    by_page = read_rules(f).by_page if rules else {}
    import_pages([src], tmp_path / "set", ImportOptions(calibration_fraction=0.0, parsebench=by_page))
    return tmp_path / "set"


def _model(tmp_path) -> ModelFacts:
    return ModelFacts(path=tmp_path / "ckpt", architecture="Qwen3_5ForConditionalGeneration", params=10**6,
                      weights_bytes=2 * 10**6, vision_bf16=3, not_applicable={},
                      presets={"fp8-dynamic": {"formats": ["fp8"], "quantized": 4, "compression": 2.0,
                                               "calibration": False, "vision_touched": False}})


def test_init_picks_the_parsebench_dimensions_the_pages_carry(tmp_path):
    pset = _page_set(tmp_path, RULES)
    pf = prepare_pages(pset, pset, tmp_path / "no-model")
    assert pf.parsebench == {"parsebench_content": 1, "parsebench_formatting": 2}
    text = render_study(_model(tmp_path), pf, tmp_path / "study.yaml", "transformers", None)
    body = yaml.safe_load(text)
    assert body["metrics"] == ["parsebench_content", "parsebench_formatting"]  # no truth: no ned; no chart rules
    assert set(body["metrics"]) < set(FAMILIES["parsebench"])
    assert body["margins"] == {m: METRICS[m].margin for m in body["metrics"]}
    assert "parsebench_content: 1 page(s), parsebench_formatting: 2 page(s)" in text


def test_a_page_set_with_nothing_to_score_names_the_parsebench_import(tmp_path):
    pset = _page_set(tmp_path, [])
    with pytest.raises(InputError, match=r"no held-out page has truth, checks or ParseBench rules.*--parsebench"):
        prepare_pages(pset, pset, tmp_path / "no-model")


def test_init_imports_images_with_parsebench_rules_and_picks_their_metrics(tmp_path):
    src, f = _sources(tmp_path, RULES)
    req = ImportRequest(parsebench=f, calibration_fraction=0.0)
    target, reuse = pages_target(src, tmp_path, req)
    pf = prepare_pages(src, target, tmp_path / "no-model", req, reuse=reuse)
    assert pf.parsebench == {"parsebench_content": 1, "parsebench_formatting": 2}
    assert f"--parsebench {f}" in (pf.imported or "")  # the YAML names the import that makes the same page set
    assert pages_target(src, tmp_path, req) == (target, True)  # a rerun with the same rules reuses the import
    with pytest.raises(InputError, match="not the same import"):
        pages_target(src, tmp_path, ImportRequest(calibration_fraction=0.0))  # without them it is another import


def test_init_refuses_a_bad_parsebench_rule_before_the_model(tmp_path):
    src, f = _sources(tmp_path, [RULES[0], {"pdf": "text/doc1.pdf", "page": 1, "type": "no_such_rule", "rule": {}}])
    model = tmp_path / "empty-model"
    model.mkdir()
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        rc = cli.main(["init", "--model", str(model), "--pages", str(src), "--parsebench", str(f),
                       "-o", str(tmp_path / "out" / "study.yaml")])
    assert rc == 65 and len(err.getvalue().strip().splitlines()) == 1, err.getvalue()
    assert f"{f}:2" in err.getvalue() and "no_such_rule" in err.getvalue() and "config.json" not in err.getvalue()
    assert not (tmp_path / "out").exists()
