"""The report side of the package's shape: the files between stages read through their typed models, summary.json
typed and versioned, report.html from an autoescaped Jinja2 template, the gate on the typed summary.
Built on a small synthetic study folder (no model, no server): seconds. The same checks on a real
demo run are in test_study.py."""

import json
import re
from pathlib import Path

import pytest

from quantgate.errors import InputError, UsageError
from quantgate.gate import gate
from quantgate.io.fileio import sha256_file
from quantgate.reports import build_summary, load_summary, write_reports
from quantgate.schema.base import read_record_file
from quantgate.schema.run import RunManifest
from quantgate.schema.summary import Summary
from quantgate.schema.variant import VariantManifest
from quantgate.schema.verdict import Verdict
from quantgate.study.spec import Study
from tests.support.paths import REPO
from tests.support.study_folder import _run, finished_study

HOSTILE = "<script>alert('x')</script> & <b>bold</b>"


WORST = {"fp8": [], "bad": [{"page_id": "p1", "metric": "ned", "baseline_value": 0.0, "variant_value": 0.5,
                            "truth": HOSTILE, "baseline_output": "# Title\n", "variant_output": "# Title\n" + HOSTILE},
                           {"page_id": "p2", "metric": "ned", "baseline_value": 0.0, "variant_value": 0.4,
                            "truth": None, "baseline_output": "kept & DROPPED", "variant_output": "kept & "}]}


@pytest.fixture(scope="module")
def _finished(tmp_path_factory):
    return finished_study(tmp_path_factory.mktemp("reports") / "out", worst=WORST)


@pytest.fixture
def study_dir(_finished, tmp_path):
    """A finished study folder as the study leaves it (weights, manifests, runs, score files, reports):
    fp8 changes a quarter of the pages by a hair, bad reads 0.2 ned worse on 40% of them. Built once per
    module; each test gets its own copy (every path in it is relative to the folder)."""
    import shutil

    out = Path(shutil.copytree(_finished, tmp_path / "out"))
    return out, {name: out / "variants" / name for name in ("bf16", "fp8", "bad")}


def _build(out, dirs, **kw):
    from quantgate.study.spec import Study
    from quantgate.study.verdicts import study_verdicts, verdict_inputs

    s = json.loads((out / "summary.json").read_text())
    st = Study.model_validate(s["study"])
    verdicts, _ = study_verdicts(st, out)
    return build_summary(st, out, sha256_file(out / "pages" / "pages.jsonl"), dirs, verdicts, WORST,
                         inputs=verdict_inputs(st, out, out / "pages" / "pages.jsonl"), **kw)


def test_committed_manifests_validate_against_their_models(tmp_path):
    """Real quantgate.json (a 4B model's, from the GPU runs; committed gzipped) and run.json files read through
    their models, losslessly."""
    import gzip
    import tarfile

    mans = []
    for i, gz in enumerate(sorted(REPO.glob("lab/2026-11-*/**/*quantgate.json.gz"))):
        mans.append(tmp_path / f"{i}-{gz.stem}")
        mans[-1].write_bytes(gzip.decompress(gz.read_bytes()))
    runs = sorted(REPO.glob("lab/2026-11-*/**/run.json")) + sorted(REPO.glob("training/results/**/run.json"))
    for i, tgz in enumerate(sorted(REPO.glob("lab/2026-11-*/session.tar.gz"))):  # the sessions' packed small files
        with tarfile.open(tgz) as tar:
            for m in tar.getmembers():
                if m.isfile() and m.name.endswith("run.json"):
                    runs.append(tmp_path / f"s{i}-{m.name.replace('/', '_')}")
                    runs[-1].write_bytes(tar.extractfile(m).read())
    assert len(mans) >= 3 and len(runs) >= 10
    for f in mans:  # older files lack fields added since (they read with their defaults)
        assert read_record_file(VariantManifest, f).model_dump(exclude_unset=True) == json.loads(f.read_text())
    for f in runs:
        obj = json.loads(f.read_text())
        dumped = read_record_file(RunManifest, f).model_dump()
        if obj["schema_version"] == 1:  # read as run.json 2: each scheme's one kernel, its count not recorded
            assert dumped["schema_version"] == 2
            assert dumped["kernels"] == {s: {k: None} for s, k in obj["kernels"].items()}
            obj = {**obj, "schema_version": 2, "kernels": dumped["kernels"]}
        if isinstance(obj.get("engine"), dict):  # engine settings gained fields since: unstated in older files
            assert all(dumped["engine"][k] is None for k in set(dumped["engine"]) - set(obj["engine"]))
            dumped["engine"] = {k: dumped["engine"][k] for k in obj["engine"]}
        assert {k: dumped[k] for k in obj} == obj  # older files lack fields added since, with their defaults


def test_summary_built_through_the_models(study_dir):
    out, dirs = study_dir
    s = _build(out, dirs)
    assert isinstance(s, Summary) and s.complete
    by = {v.name: v for v in s.variants}
    assert by["fp8"].speedup == {"1": 2.0} and by["bad"].speedup == {"1": 3.0}
    assert by["bf16"].speedup == {"1": 1.0, "2": 1.0} and by["bad"].weights_bytes == 40
    assert by["fp8"].files["model.safetensors"] == sha256_file(dirs["fp8"] / "model.safetensors")
    # paths relative to the study folder; inputs name every file the verdicts rest on, by its hash
    assert [v.path for v in s.variants] == ["variants/bf16", "variants/fp8", "variants/bad"]
    assert s.inputs.pages == "pages/pages.jsonl" and s.inputs.margins == {"ned": 0.01, "cer": 0.01, "bow_f1": 0.01}
    # and every file a reported claim rests on (run.json, requests.jsonl, quantgate.json, pageset.json)
    assert sorted(s.inputs.files) == sorted(["pages/pages.jsonl", "pages/pageset.json", "study.json"] + [
        f"{kind}/{v}/{f}" for kind, f in (("runs", "requests.jsonl"), ("runs", "run.json"),
                                          ("variants", "quantgate.json")) for v in ("bad", "bf16", "fp8")] + [
        "scores/bad-c1.jsonl", "scores/bf16-c1.jsonl", "scores/bf16-c2.jsonl", "scores/fp8-c1.jsonl",
        "scores/bad-c1.bounds.jsonl", "scores/bf16-c2.bounds.jsonl", "scores/fp8-c1.bounds.jsonl"])
    assert s.inputs.files["scores/bad-c1.jsonl"] == sha256_file(out / "scores" / "bad-c1.jsonl")
    # the verdict rows keep the variant first and every Verdict field after it (what the study wrote before)
    st = Study.model_validate(s.study)
    row = build_summary(st, out, "f" * 64, dirs, [s.verdicts[0]], {}, inputs=s.inputs).model_dump()
    assert list(row["verdicts"][0]) == ["variant", *Verdict.model_fields]
    assert row["complete"] is False  # one verdict of the six the study expects
    with pytest.raises(InputError, match="outside the study folder"):
        build_summary(st, out / "runs", "f" * 64, {"fp8": dirs["fp8"]}, [], {}, inputs=s.inputs)


@pytest.mark.parametrize("file,patch,field", [
    ("variants/fp8/quantgate.json", {"size": {"weights_bytes": "big", "source_weights_bytes": 1, "compression": 1.0}},
     "size.weights_bytes"),
    ("variants/fp8/quantgate.json", {"colour": "blue"}, "colour"),
    ("variants/fp8/quantgate.json", {"kind": "quantgate.run"}, "kind"),
    ("runs/bad/run.json", {"levels": [{"concurrency": 1}]}, "levels.0.n_requests"),
    ("runs/bad/run.json", {"schema_version": 7}, "schema_version 7"),
])
def test_a_malformed_manifest_is_one_error_naming_file_and_field(study_dir, file, patch, field):
    out, dirs = study_dir
    f = out / file
    f.write_text(json.dumps({**json.loads(f.read_text()), **patch}))
    with pytest.raises(InputError) as e:
        _build(out, dirs)
    assert str(f) in str(e.value) and field in str(e.value)


def test_summary_round_trips_and_refuses_foreign_newer_or_malformed(study_dir, tmp_path):
    out, dirs = study_dir
    write_reports(_build(out, dirs), out)
    f = out / "summary.json"
    good = json.loads(f.read_text())
    assert load_summary(out).model_dump() == good

    def refused(obj, *needles):
        f.write_text(obj if isinstance(obj, str) else json.dumps(obj))
        with pytest.raises(InputError) as e:
            load_summary(out)
        for n in (str(f), *needles):
            assert n in str(e.value)

    # schema 3 reads as a report that did not count its pages with and without truth
    old = {k: v for k, v in good.items() if k not in ("truth", "truth_free", "largest_bounds")}
    f.write_text(json.dumps({**old, "schema_version": 3}))
    assert load_summary(out).truth is None and load_summary(out).largest_bounds == {}
    refused({**good, "schema_version": 6}, "schema_version 6", "reads schema_version 5", "newer quantgate")
    refused({**good, "schema_version": 1}, "schema_version 1", "reads schema_version 5", "older quantgate")
    refused(_run("bf16", {1: 1.0}), "'quantgate.run'", "not a quantgate.report file")  # a run.json copied over it
    refused({**good, "verdicts": [{**good["verdicts"][0], "delta": "small"}]}, "field 'verdicts.0.delta'")
    refused({**good, "verdicts": [{**good["verdicts"][0], "verdict": "fine"}]}, "field 'verdicts.0.verdict'")
    refused({**good, "extra": 1}, "field 'extra'")
    refused({**good, "study": {"name": "s"}}, "field 'study'", "study.baseline: Field required")
    refused("{not json", "not valid JSON")
    f.unlink()
    with pytest.raises(InputError, match="no such file.*rerun `quantgate study`"):
        load_summary(out)


def test_gate_cli_on_a_newer_summary_is_one_line(study_dir):
    import subprocess
    import sys

    out, dirs = study_dir
    write_reports(_build(out, dirs), out)
    s = json.loads((out / "summary.json").read_text())
    (out / "summary.json").write_text(json.dumps({**s, "schema_version": 6}))
    r = subprocess.run([sys.executable, "-m", "quantgate", "report", str(out)], capture_output=True, text=True)
    assert r.returncode == 65 and "Traceback" not in r.stderr
    assert "summary.json" in r.stderr and "reads schema_version 5" in r.stderr
    r = subprocess.run([sys.executable, "-m", "quantgate", "gate", str(out)], capture_output=True, text=True)
    assert r.returncode == 3 and not r.stderr and len(r.stdout.splitlines()) == 1
    assert r.stdout.startswith("INVALID: ") and "summary.json" in r.stdout and "reads schema_version 5" in r.stdout


def test_gate_reads_the_typed_summary(study_dir):
    from quantgate.io.pageset import load_pageset
    from quantgate.io.scores import read_scores
    from quantgate.study.worst import worst_pages

    out, dirs = study_dir
    summary = _build(out, dirs)
    st = Study.model_validate(summary.study)
    # the worst pages the files give (the gate makes them again; WORST is hand-made for the html tests)
    worst = worst_pages(st, load_pageset(out / "pages"), out,
                        {(n, 1): read_scores(out / "scores" / f"{n}-c1.jsonl") for n in dirs}, 1)
    write_reports(summary.model_copy(update={"worst_pages": worst}), out)
    code, lines = gate(out)
    assert code == 1 and any(line.startswith("regression") and " bad ned" in line for line in lines)
    assert gate(out, variants=["fp8"])[0] == 0
    assert gate(out, metrics=["cer"])[0] == 1
    with pytest.raises(UsageError, match="--metrics: 'wer'"):  # the study does not compute it: the caller's typo
        gate(out, metrics=["wer"])
    assert gate(out, variants=["fp8"], lmeval=True)[0] == 3  # no lm-eval verdicts in this study
    (dirs["fp8"] / "model.safetensors").write_bytes(b"changed")
    code, lines = gate(out, variants=["fp8"])
    assert code == 3 and "fp8/model.safetensors changed" in lines[0]


def test_html_is_autoescaped_self_contained_and_has_every_section(study_dir):
    out, dirs = study_dir
    write_reports(_build(out, dirs), out)
    page = (out / "report.html").read_text()
    for h in ("Verdicts", "Plots", "Speed", "Variants", "Worst pages", "Provenance"):
        assert f"<h2>{h}</h2>" in page
    assert page.count("<svg") == 4 and page.count("<figure>") == 4
    # text from pages and model outputs is escaped, once; the diff marks are the template's own markup
    assert "<script" not in page and "<b>bold</b>" not in page
    assert "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; &lt;b&gt;bold&lt;/b&gt;" in page
    # the baseline's column is marked against the truth (escaped text inside the marks), the
    # candidate's against the baseline
    assert "&amp;lt;" not in page and "<pre><del>&lt;scr</del><ins># T</ins>" in page
    assert "<pre># Title\n<ins>&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; &lt;b&gt;bold&lt;/b&gt;</ins></pre>" in page
    assert "<pre>kept &amp; <del>DROPPED</del></pre>" in page
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page)
    rows = re.findall(r"<tr class='(\w+)'><td>(\w+)</td>", page)
    assert rows == [("within_noise", "fp8")] * 3 + [("regression", "bad")] * 3
    assert "<b>REGRESSION</b>" in page and "2.00×" in page and "3.00×" in page
    # every verdict's reason and message, the noise floor and what the interval is
    assert page.count("<code>ci_inside_margin</code>") == 3 and page.count("<code>ci_beyond_margin</code>") == 3
    assert "<th>noise floor</th>" in page and "one-sided 95% bounds" in page and "90% CI" not in page
    assert page.count("<tr class='why'>") == 6 and "beyond the margin 0.0100" in page
    assert "max(study margin" not in page and "Holm" in page
    md = (out / "report.md").read_text()
    assert re.search(r"\| bad \| ned ↓ \| ❌ regression \| `ci_beyond_margin` \| \+0\.\d{4} \| \[\+0\.\d{4}, \+0\.\d{4}\] "
                     r"cluster_hall_t \| 0\.0100 \(registry\) \| 0\.\d{4} \(\+0\.\d{4}\) \|", md)
    # baseline score, documents, design effect and flips beside each verdict (40 single-page documents)
    assert "| baseline score | documents | design effect | flips |" in md
    assert re.search(r"\| bad \| ned ↓ .* \| 40 \(\d+ of 40 changed\) \| 0\.\d{4} \| 40 \| 1\.00 \| \d+ \|", md)
    # in the HTML they are each verdict's folded details, so the table fits a 1,400 px window
    assert page.count("<dt>documents</dt><dd>40</dd><dt>design effect</dt><dd>1.00</dd><dt>flips</dt>") == 6
    assert "40 documents, design effect 1.00, flips" in junit_text(out)
    assert "noise floor (shift)" in md and "## Worst pages" not in md and "90% CI" not in md
    assert md.count("(ci_beyond_margin): at least") == 3
    junit = (out / "junit.xml").read_text()
    assert 'failures="3"' in junit and 'skipped="0"' in junit and 'classname="quantgate.bad" name="ned"' in junit
    assert 'type="regression"' in junit and "regression (ci_beyond_margin): at least" in junit


def junit_text(out):
    return (out / "junit.xml").read_text()


# --- engine settings beside the speed table ----------------------------------------------

def _engine(out, name, **fields):
    p = out / "runs" / name / "run.json"
    run = json.loads(p.read_text())
    run["engine"] = {"compilation": "VLLM_COMPILE", "cudagraph_mode": "FULL_AND_PIECEWISE",
                     "cudagraph_capture_sizes": [1, 2, 4, 8], "prefix_caching": False, "max_num_batched_tokens": 8192,
                     "kv_cache_dtype": "auto", "env": {"CUDA_VISIBLE_DEVICES": "0", "VLLM_CACHE_ROOT": f"/c/{name}"},
                     "compile_start": "cold", "compile_s": 100.0, "start_s": 150.0, **fields}
    p.write_text(json.dumps(run))


def test_engine_settings_print_beside_the_speed_and_differences_are_named(study_dir):
    out, dirs = study_dir
    for name in dirs:  # the same settings; where each kept its cache and how it started do not count
        _engine(out, name, compile_start="warm" if name == "bad" else "cold")
    write_reports(_build(out, dirs), out)
    md, page = (out / "report.md").read_text(), (out / "report.html").read_text()
    assert "| variant | compilation | CUDA graphs | capture sizes | prefix cache | max batched tokens | KV cache |" in md
    assert "| fp8 | VLLM_COMPILE | FULL_AND_PIECEWISE | 4 (1–8) | off | 8192 | auto | CUDA_VISIBLE_DEVICES=0 | " \
           "150 s (cold cache, compile 100 s) |" in md
    assert md.index("## Speed") < md.index("| variant | compilation |") < md.index("## Variants")
    assert "different engine settings" not in md and "<h3>Engine settings</h3>" in page
    assert "different engine settings" not in page and "<td>FULL_AND_PIECEWISE</td>" in page

    _engine(out, "fp8", kv_cache_dtype="fp8", cudagraph_mode_effective="PIECEWISE")
    _engine(out, "bad", compilation="NONE", env={"CUDA_VISIBLE_DEVICES": "0", "VLLM_BATCH_INVARIANT": "1"})
    s = _build(out, dirs)
    assert s.variants[1].engine.kv_cache_dtype == "fp8"
    write_reports(s, out)
    md, page = (out / "report.md").read_text(), (out / "report.html").read_text()
    note = next(line for line in md.splitlines() if "different engine settings" in line)
    assert "compilation (bf16: VLLM_COMPILE; fp8: VLLM_COMPILE; bad: NONE)" in note
    assert "kv_cache_dtype (bf16: auto; fp8: fp8; bad: auto)" in note and "cudagraph_mode_effective" in note
    assert "VLLM_BATCH_INVARIANT (bf16: unset; fp8: unset; bad: 1)" in note
    assert "VLLM_CACHE_ROOT" not in note and "compile_start" not in note and "start_s" not in note
    assert "FULL_AND_PIECEWISE → PIECEWISE" in md and "different engine settings" in page


def test_a_long_wait_after_vllms_profiling_run_is_said_as_the_machines_not_the_formats(study_dir):
    """A start that waited 122 s between vLLM's profiling run and its KV cache (the four starts of
    2026-11-30b that built FlashInfer's sampling module) gets the wait in its start cell and a note; 8 s (a start
    with the module built) gets neither."""
    out, dirs = study_dir
    for name in dirs:
        _engine(out, name, profile_wait_s=122.0 if name == "fp8" else 8.0)
    write_reports(_build(out, dirs), out)
    md, page = (out / "report.md").read_text(), (out / "report.html").read_text()
    assert "150 s (cold cache, compile 100 s, 122 s after profiling) |" in md
    assert md.count("after profiling") == 1 and "different engine settings" not in md  # not a setting
    note = next(line for line in md.splitlines() if "between its profiling run" in line)
    assert note.startswith("**Note:** fp8: vLLM waited 122 s") and "FlashInfer's sampling module" in note
    assert "fp8: vLLM waited 122 s" in page and "bf16: vLLM waited" not in md


def test_a_long_wait_after_the_kv_cache_is_said_too(study_dir):
    """An eager start samples after its KV cache is made, so its FlashInfer build shows as a wait
    between the KV cache and the end of the warm-up (97 s in 2026-12-03's phase B); 3 s (graph capture) is not."""
    out, dirs = study_dir
    for name in dirs:
        _engine(out, name, profile_wait_s=1.0, warmup_wait_s=97.0 if name == "bad" else 3.0)
    write_reports(_build(out, dirs), out)
    md = (out / "report.md").read_text()
    assert "150 s (cold cache, compile 100 s, 97 s warming up) |" in md and md.count("warming up") == 1
    note = next(line for line in md.splitlines() if "end of its warm-up" in line)
    assert "bad: vLLM waited 97 s between its KV cache and the end of its warm-up" in note
    assert "after profiling" not in md


def test_runs_without_engine_settings_print_no_engine_table(study_dir):
    out, dirs = study_dir
    write_reports(_build(out, dirs), out)
    assert "Engine settings" not in (out / "report.md").read_text()
    assert "Engine settings" not in (out / "report.html").read_text()


# --- numerics per variant; provenance from the source tree -------------------

def test_numerics_of_each_run_reach_summary_and_both_reports(study_dir):
    """run.json's numerics (per format: weights-only or weights+activations, and the evidence) are
    copied into summary.json per variant and printed as a table in report.md and report.html."""
    from compressed_tensors.quantization import preset_name_to_scheme

    from quantgate.serve.numerics import MEASURED_BY, MEASURED_WITH, variant_numerics

    out, dirs = study_dir
    cfgs = {"bf16": {"model_type": "x"}, "fp8": {"model_type": "x", "quantization_config": {
        "quant_method": "compressed-tensors", "config_groups": {
            "g0": {**preset_name_to_scheme("FP8_DYNAMIC", ["Linear"]).model_dump(mode="json"), "targets": ["a"]},
            "g1": {**preset_name_to_scheme("W4A16", ["Linear"]).model_dump(mode="json"), "targets": ["b"]}}}}}
    for name, cfg in cfgs.items():
        (dirs[name] / "config.json").write_text(json.dumps(cfg))
        f = out / "runs" / name / "run.json"
        run = json.loads(f.read_text())
        run["numerics"] = variant_numerics(dirs[name], "transformers", device="cpu",
                                           versions=dict(MEASURED_WITH)).model_dump()
        f.write_text(json.dumps(run))
    write_reports(_build(out, dirs), out)
    by = {v["name"]: v for v in json.loads((out / "summary.json").read_text())["variants"]}
    fp8 = by["fp8"]["numerics"]["formats"]
    assert (fp8["fp8"]["computes"], fp8["fp8"]["evidence"]) == ("weights+activations", "measured")
    assert fp8["w4a16"]["computes"] == "weights-only"
    assert by["bf16"]["numerics"]["quantized"] is False and by["bad"]["numerics"] is None  # "bad" recorded none
    md = (out / "report.md").read_text()
    section = md[md.index("## Numerics"):]
    assert f"| fp8 | transformers (cpu) | fp8 | weights+activations | FP8 E4M3, per token, dynamic scale (W8A8) | " \
           f"measured ({MEASURED_BY}) |" in section
    assert "| fp8 | transformers (cpu) | w4a16 | weights-only | BF16 (the checkpoint dtype) |" in section
    assert "| bf16 | transformers (cpu) | none | not quantized |" in section
    assert "| bad | – | – | not recorded |" in section
    page = (out / "report.html").read_text()
    assert "<h2>Numerics</h2>" in page
    assert "<td>fp8</td><td>transformers (cpu)</td><td>fp8</td><td>weights+activations</td>" in page


def test_report_provenance_names_the_running_source_without_an_installed_dist(study_dir, monkeypatch):
    """With no installed quantgate distribution (run from a checkout on PYTHONPATH, as the
    GPU scripts do), the report still names quantgate's version and commit, read from the source tree."""
    import importlib.metadata as md
    import subprocess

    import quantgate

    real = md.version

    def no_quantgate_dist(name):
        if name == "quantgate":
            raise md.PackageNotFoundError(name)
        return real(name)

    monkeypatch.setattr(md, "version", no_quantgate_dist)
    with pytest.raises(md.PackageNotFoundError):
        md.version("quantgate")  # the case of the bug: no dist metadata to read
    out, dirs = study_dir
    write_reports(_build(out, dirs), out)
    p = json.loads((out / "summary.json").read_text())["provenance"]
    head = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, cwd=REPO).stdout.strip()
    assert p["packages"]["quantgate"] == quantgate.__version__ and p["packages"]["torch"] == real("torch")
    assert p["git_commit"] == head and len(head) == 40
    assert f"quantgate {quantgate.__version__}, commit {head[:10]}" in (out / "report.md").read_text()
