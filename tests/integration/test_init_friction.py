"""What `quantgate init` and `pages import`/`synth` say agrees with what the statistics do —
the verdict's minimum pages and documents, the test it runs (non-inferiority), the registry's margins — and
the frictions on the way from `init` to `gate` are gone (several checks files, pages without checks listed,
max_tokens capped and said, every page for calibration accepted, the bundled reader's path in the README)."""

import json
import subprocess
import sys
from pathlib import Path

import yaml
from PIL import Image

from quantgate.judge.clustered import MIN_DOCUMENTS, MIN_PAGES
from quantgate.schema.metrics import METRICS
from quantgate.study.init import MAX_TOKENS_CAP, ModelFacts, PageFacts, _too_few, max_tokens_line, render_study

ROOT = Path(__file__).resolve().parents[2]


def _facts(tmp_path, heldout=40, documents=40, truth_tokens_max=900):
    return PageFacts(path=tmp_path / "pages", n=heldout + 5, heldout=heldout, calibration=5, heldout_truth=heldout,
                     heldout_checks=0, tables=False, truth_tokens_max=truth_tokens_max, heldout_documents=documents)


def _model(tmp_path):
    return ModelFacts(path=tmp_path / "ckpt", architecture="Qwen3_5ForConditionalGeneration", params=10**6,
                      weights_bytes=2 * 10**6, vision_bf16=3, not_applicable={},
                      presets={"fp8-dynamic": {"formats": ["fp8"], "quantized": 4, "compression": 2.0,
                                               "calibration": False, "vision_touched": False}})


def test_init_warns_below_the_verdicts_own_minimums():
    pages_only = _too_few(PageFacts(Path("p"), 60, 25, 35, 25, 0, False, None, heldout_documents=25))
    assert len(pages_only) == 2 and f"at least {MIN_PAGES} scored pages" in pages_only[0]
    assert f"at least {MIN_DOCUMENTS} documents" in pages_only[1]
    # 40 pages from 3 PDFs: enough pages, too few documents (the clustered verdict's rule)
    few_docs = _too_few(PageFacts(Path("p"), 50, 40, 10, 40, 0, False, None, heldout_documents=3))
    assert len(few_docs) == 1 and "3 held-out document(s)" in few_docs[0]
    assert not _too_few(PageFacts(Path("p"), 50, MIN_PAGES, 10, 40, 0, False, None, heldout_documents=MIN_DOCUMENTS))


def test_the_yaml_describes_the_test_it_runs_and_the_registrys_margins(tmp_path):
    text = render_study(_model(tmp_path), _facts(tmp_path), tmp_path / "study.yaml", "transformers", None)
    body = yaml.safe_load(text)
    assert "Non-inferiority margins" in text and "lies inside ±margin" not in text
    assert body.get("test", "non_inferiority") == "non_inferiority"
    assert body["margins"] == {m: METRICS[m].margin for m in body["metrics"]}


def test_max_tokens_is_capped_and_the_yaml_says_so(tmp_path):
    line = max_tokens_line(25_514)  # the olmOCR sample's longest truth by the reader's byte-level tokenizer
    assert line.startswith(f"max_tokens: {MAX_TOKENS_CAP}  # capped") and "38272" in line
    assert max_tokens_line(900).startswith("max_tokens: 1408  # 1.5x")
    text = render_study(_model(tmp_path), _facts(tmp_path, truth_tokens_max=25_514), tmp_path / "s.yaml",
                        "transformers", None)
    assert yaml.safe_load(text)["max_tokens"] == MAX_TOKENS_CAP


def _qg(*args):
    return subprocess.run([sys.executable, "-m", "quantgate", *args], capture_output=True, text=True, timeout=300)


def test_checks_from_several_files_and_pages_without_any_listed(tmp_path):
    imgs = tmp_path / "imgs"
    imgs.mkdir()
    for name in ("a_pg1", "b_pg1", "c_pg1"):
        Image.new("RGB", (40, 40), "white").save(imgs / f"{name}.png")
    present = {"pdf": "a.pdf", "page": 1, "type": "present", "text": "x", "id": "a1"}
    blank = {"pdf": "b.pdf", "page": 1, "type": "baseline", "max_repeats": 30, "id": "b1"}
    (tmp_path / "present.jsonl").write_text(json.dumps(present) + "\n")
    (tmp_path / "blanks.jsonl").write_text(json.dumps(blank) + "\n")
    r = _qg("pages", "import", str(imgs), "-o", str(tmp_path / "ps"), "--checks", str(tmp_path / "present.jsonl"),
            "--checks", str(tmp_path / "blanks.jsonl"))
    assert r.returncode == 0, r.stderr
    pages = {p["id"]: p for p in map(json.loads, (tmp_path / "ps" / "pages.jsonl").read_text().splitlines())}
    assert [c["id"] for c in pages["a_pg1"]["checks"]] == ["a1"] and [c["id"] for c in pages["b_pg1"]["checks"]] == ["b1"]
    assert "neither truth nor checks" in r.stderr and "c_pg1" in r.stderr


def test_synth_accepts_every_page_for_calibration(tmp_path):
    r = _qg("pages", "synth", "--n", "3", "--profile", "simple", "--calibration-fraction", "1", "-o",
            str(tmp_path / "cal"))
    assert r.returncode == 0, r.stderr
    splits = {json.loads(line)["split"] for line in (tmp_path / "cal" / "pages.jsonl").read_text().splitlines()}
    assert splits == {"calibration"}


def test_readme_shows_the_bundled_readers_path_in_the_init_example():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "quantgate init --model quantgate/assets/reader" in readme
    assert (ROOT / "quantgate" / "assets" / "reader" / "config.json").is_file()
