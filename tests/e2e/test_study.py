"""The demo at reduced size (a real verdict spread), kill-and-resume of a study,
reports (HTML in headless Chromium), the gate's exit codes, the lock, bad study files."""

import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest
import yaml

from quantgate.errors import InputError
from quantgate.study import load_study
from tests.support.paths import REPO

VARIANTS = "bf16,fp8-dynamic,harmful-int2"
# 8 pages keep the suite fast; the study then judges ~6 held-out pages, below the calibrated minimum of 30, so
# the demo lowers min_pages deliberately (the report and the gate say the verdicts are a smoke test)
SMALL = ["--pages", "8", "--min-pages", "4"]
ARTIFACTS = REPO / "test-artifacts"


def _qg(*args, **kw):
    return subprocess.run([sys.executable, "-m", "quantgate", *args], capture_output=True, text=True, **kw)


CONSOLE: dict[str, str] = {}  # the demo fixture's captured console, for the console test


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    out = tmp_path_factory.mktemp("demo") / "out"
    r = _qg("demo", "-o", str(out), *SMALL, "--variants", VARIANTS, timeout=1500)
    assert r.returncode == 0, r.stderr[-3000:]
    CONSOLE.update(stdout=r.stdout, stderr=r.stderr)
    return out, r.stdout


def test_demo_console_is_quiet_and_ends_with_the_verdicts(demo):
    """Captured (not a terminal), the console holds one line per stage and no progress-bar
    carriage returns; the libraries' own output went to study.log; it ends with the verdict table and
    the report's path."""
    out, _ = demo
    stdout, stderr = CONSOLE["stdout"], CONSOLE["stderr"]
    assert "\r" not in stdout + stderr
    noise = ("Loading weights", "Compressing model", "No accelerator available", "Requesting API", "it/s]", "Warning")
    assert not [n for n in noise if n in stdout + stderr]
    log = (out / "study.log").read_text()
    assert "No accelerator available" in log and "Loading weights" in log  # captured, not lost
    # one final line per stage; a stage that lasts longer than 15 s also prints progress lines ("… ")
    final = [x for x in stderr.splitlines() if not x.endswith(" …")]
    progress = [x for x in stderr.splitlines() if x.endswith(" …")]
    labels = [x.rsplit(": ", 1)[0] for x in final]
    assert len(final) == len(set(labels)) == 1 + 1 + 3 + (4 + 3 + 3) + 2, final  # head, pages, quantize ×3,
    for v in VARIANTS.split(","):  # server start + level(s) + lm-eval per variant, score, report
        assert f"quantize {v} ({v})" in labels and sum(x.startswith(f"{v}: ") for x in labels) == (4 if v == "bf16" else 3)
    assert all(any(p.startswith(label + ": ") for label in labels) for p in progress)
    lines = stdout.rstrip("\n").splitlines()
    # the demo names its baseline before it runs, so the verdict table's header is the second line
    assert lines[0] == f"baseline: {VARIANTS.split(',')[0]} (the first of --variants)"
    assert lines[1].startswith("variant ") and "verdict" in lines[1]
    for v in json.loads((out / "summary.json").read_text())["verdicts"]:
        assert any(x.split()[:2] == [v["variant"], v["metric"]] for x in lines)
    assert lines[-1].startswith(f"report: {out / 'report.html'}")
    tb = json.loads((out / "summary.json").read_text())["time_budget"]  # the time budget's line, from summary.json
    assert lines[-2] == (f"time: {tb['wall_s']:.1f} s — server starts {tb['engine_start_s']:.1f} s, generation "
                         f"{tb['generation_s']:.1f} s, quantgate's own overhead {tb['overhead_s']:.1f} s "
                         f"({tb['overhead_share']:.1%}; report.md, \"Time budget\")")


def test_demo_starts_one_server_per_variant(demo):
    """A variant's page runs and its lm-eval run share one server start; the study's timing
    records say so too."""
    out, _ = demo
    timings = [json.loads(x) for x in (out / "timings.jsonl").read_text().splitlines()]
    for v in VARIANTS.split(","):
        log = (out / "runs" / v / "server.log").read_text()
        assert sum(line.startswith("$ ") for line in log.splitlines()) == 1, v
        assert "POST /v1/chat/completions" in log and not (out / "lmeval" / v / "server.log").exists()
        assert [t["stage"] for t in timings if t.get("variant") == v] == \
            ["quantize", "server_start", "pages_run"] + (["pages_run"] if v == "bf16" else []) + ["lmeval"]
    assert {t["stage"] for t in timings} == {"pages", "quantize", "server_start", "pages_run", "lmeval", "score",
                                             "report"}


def _verdicts(out):
    rep = json.loads((out / "summary.json").read_text())
    return {(v["variant"], v["metric"]): v for v in rep["verdicts"]}


def test_demo_shows_a_real_verdict_spread(demo):
    out, stdout = demo
    v = _verdicts(out)
    assert {v[("fp8-dynamic", m)]["verdict"] for m in ("ned", "cer", "bow_f1")} == {"within_noise"}
    # on ~7 pages (below the calibrated 30) the interval is wide: harmful-int2 never passes, and the
    # clearest of its losses is called a regression
    assert all(v[("harmful-int2", m)]["verdict"] != "within_noise" for m in ("ned", "cer", "bow_f1"))
    assert "regression" in {v[("harmful-int2", m)]["verdict"] for m in ("ned", "cer", "bow_f1")}
    assert v[("harmful-int2", "ned")]["delta"] > 0.03
    assert "report:" in stdout and "regression" in stdout
    rep = json.loads((out / "summary.json").read_text())
    base = next(x for x in rep["variants"] if x["name"] == "bf16")
    assert rep["complete"] and rep["noise_level"] == 2 and base["levels"][0]["n_requests"] >= 5
    # the tiny reader reads: BF16 within the quality bar on these pages
    assert v[("fp8-dynamic", "ned")]["baseline_mean"] <= 0.05
    for f in ("report.md", "report.html", "junit.xml"):
        assert (out / f).stat().st_size > 500


def test_demo_records_what_transformers_serve_computed(demo):
    """Each run served by `transformers serve` (CPU) records its numerics per format — FP8 as
    W8A8, INT2 weight-only, from the measurement in test_numerics — in run.json and summary.json, and
    the reports print them; the old unmeasured note ("activation quantization is not simulated") is gone."""
    from quantgate.serve.numerics import MEASURED_BY

    out, _ = demo
    summ = {v["name"]: v for v in json.loads((out / "summary.json").read_text())["variants"]}
    for name, fmt, computes in (("fp8-dynamic", "fp8", "weights+activations"), ("harmful-int2", "w2a16", "weights-only")):
        run = json.loads((out / "runs" / name / "run.json").read_text())
        num = run["numerics"]
        assert (num["backend"], num["device"], num["quantized"], list(num["formats"])) == ("transformers", "cpu", True, [fmt])
        f = num["formats"][fmt]
        assert (f["computes"], f["evidence"], f["measured_by"]) == (computes, "measured", MEASURED_BY)
        assert summ[name]["numerics"] == num
        assert any(n.startswith(f"transformers serve (cpu): {fmt} runs {computes}") for n in run["notes"])
        assert not any("not simulated" in n for n in run["notes"])
    assert summ["bf16"]["numerics"]["quantized"] is False and summ["bf16"]["numerics"]["formats"] == {}
    md = (out / "report.md").read_text()
    assert "| fp8-dynamic | transformers (cpu) | fp8 | weights+activations | FP8 E4M3" in md
    assert "| harmful-int2 | transformers (cpu) | w2a16 | weights-only |" in md


def test_gate_exit_codes(demo, tmp_path):
    """The gate's binding on a real study: the folder copied elsewhere and gated from a third folder gives
    the same exit codes; one byte of a weight file changed in the copy is exit 3 naming it; a verdict
    edited in the copy's summary.json is exit 3."""
    out, _ = demo
    # the gate writes junit.xml (default OUT/junit.xml); kept out of the shared demo folder, whose own junit.xml
    # test_junit_and_markdown reads
    keep = ("--junit", str(tmp_path / "gate-junit.xml"))
    assert _qg("gate", str(out), *keep).returncode == 1  # harmful-int2 regressed
    r = _qg("gate", str(out), "--variants", "fp8-dynamic", *keep)
    assert r.returncode == 0 and "PASS" in r.stdout
    copy = tmp_path / "elsewhere" / "copy"
    shutil.copytree(out, copy)
    third = tmp_path / "third"
    third.mkdir()
    assert _qg("gate", str(copy), cwd=third).returncode == 1
    r = _qg("gate", str(copy), "--variants", "fp8-dynamic", "--lmeval", cwd=third)
    assert r.returncode == 0 and "PASS" in r.stdout
    w = copy / "variants" / "fp8-dynamic" / "model.safetensors"
    data = bytearray(w.read_bytes())
    data[-1] ^= 0xFF
    w.write_bytes(bytes(data))
    r = _qg("gate", str(copy), "--variants", "fp8-dynamic", "--metrics", "ned", cwd=third)
    assert r.returncode == 3 and f"{copy}/variants/fp8-dynamic/model.safetensors changed" in r.stdout
    assert _qg("gate", str(out), "--variants", "fp8-dynamic", *keep).returncode == 0  # the original still passes
    data[-1] ^= 0xFF
    w.write_bytes(bytes(data))
    summ = json.loads((copy / "summary.json").read_text())
    for v in summ["verdicts"]:
        if v["variant"] == "harmful-int2":
            v["verdict"], v["reason"] = "within_noise", "ci_inside_margin"
    (copy / "summary.json").write_text(json.dumps(summ))
    r = _qg("gate", str(copy), cwd=third)
    assert r.returncode == 3 and "harmful-int2" in r.stdout and len(r.stdout.splitlines()) == 1
    summ["complete"] = False
    (copy / "summary.json").write_text(json.dumps(summ))
    r = _qg("gate", str(copy))
    assert r.returncode == 3 and "incomplete" in r.stdout


def test_junit_and_markdown(demo):
    import xml.etree.ElementTree as ET

    out, _ = demo
    suite = ET.parse(out / "junit.xml").getroot()
    cases = [c for c in suite.findall("testcase") if not c.get("name").startswith("lm-eval/")]
    assert len(cases) == 6
    failed = {(c.get("classname"), c.get("name")) for c in cases if c.find("failure") is not None}
    skipped = {(c.get("classname"), c.get("name")) for c in cases if c.find("skipped") is not None}
    assert failed and failed | skipped == {("quantgate.harmful-int2", m) for m in ("ned", "cer", "bow_f1")}
    for c in cases:  # each case says why: the reason and the verdict's message
        node = c.find("failure") if c.find("failure") is not None else c.find("skipped")
        text = node.get("message") if node is not None else c.find("system-out").text
        assert any(f"({r})" in text for r in ("ci_inside_margin", "ci_beyond_margin", "ci_straddles_margin",
                                              "identical_outputs", "noise_exceeds_margin"))
    lm_cases = [c for c in suite.findall("testcase") if c.get("name").startswith("lm-eval/")]
    assert len(lm_cases) == 2  # one lm-eval verdict per candidate variant (page task, exact_match)
    md = (out / "report.md").read_text()
    assert md.index("| variant | metric | verdict | reason") < md.index("## Speed")
    # the reasons, the messages and the noise floor column, and that these are not calibrated
    assert "noise floor (shift)" in md and "`ci_beyond_margin`" in md and "(ci_beyond_margin): at least" in md
    assert "min_pages is 4, below the calibrated minimum of 30" in md and "90% CI" not in md


def test_lmeval_results_stderr_and_paired_verdicts(demo, tmp_path):
    # lm-eval ran through each variant's transformers serve on the offline page task.
    out, _ = demo
    rep = json.loads((out / "summary.json").read_text())
    lm = rep["lm_eval"]
    res = lm["runs"]["bf16"]["results"]["quantgate_page_heading"]["exact_match,heading"]
    assert res["n"] >= 5 and res["stderr"] is not None and res["value"] >= 0.8  # the reader reads headings
    rows = {v["variant"]: v for v in lm["verdicts"]}
    fp8 = rows["fp8-dynamic"]
    assert fp8["task"] == "quantgate_page_heading" and fp8["higher_is_better"]
    assert fp8["verdict"] == "within_noise" and fp8["recovery"] == pytest.approx(1.0)
    assert fp8["ci_low"] <= fp8["delta"] <= fp8["ci_high"] and fp8["n"] == res["n"]
    samples = (out / "lmeval" / "bf16" / "samples-quantgate_page_heading.jsonl").read_text().splitlines()
    assert len(samples) == res["n"] and "exact_match,heading" in json.loads(samples[0])["metrics"]
    md = (out / "report.md").read_text()
    assert "## Standard benchmarks (lm-eval)" in md and "quantgate_page_heading" in md
    assert "Standard benchmarks (lm-eval)" in (out / "report.html").read_text()
    # the gate can require them; a report without them fails --lmeval as invalid
    assert _qg("gate", str(out), "--variants", "fp8-dynamic", "--lmeval", "--junit", str(tmp_path / "j.xml")).returncode == 0
    copy = tmp_path / "c"
    shutil.copytree(out, copy)
    summ = json.loads((copy / "summary.json").read_text())
    summ["lm_eval"] = None
    (copy / "summary.json").write_text(json.dumps(summ))
    r = _qg("gate", str(copy), "--variants", "fp8-dynamic", "--lmeval")
    # refused either for the missing section or, first, for the claims it no longer matches
    assert r.returncode == 3 and ("no lm_eval section" in r.stdout or "from the study's files" in r.stdout), r.stdout


def test_lmeval_cli(demo, tmp_path):
    out, _ = demo
    r = _qg("lmeval-compare", str(out / "lmeval" / "bf16"), str(out / "lmeval" / "fp8-dynamic"), "--margin", "0.05",
            "--min-pages", "4", "--min-documents", "4", "--worst-sample-damage", "0.0948")
    assert r.returncode == 0 and "within_noise" in r.stdout and "recovery 1.000" in r.stdout
    r = _qg("lmeval", str(out / "variants" / "bf16"), "--tasks", "no_such_task_xyz", "-o", str(tmp_path / "x"),
            timeout=300)
    assert r.returncode == 65 and "unknown lm-eval task" in r.stderr and "--include-path" in r.stderr


def test_lmeval_recovery_is_oriented_by_direction():
    from quantgate.lmeval.compare import recovery

    assert recovery(0.80, 0.78, higher_is_better=True) == pytest.approx(0.975)
    assert recovery(10.0, 12.5, higher_is_better=False) == pytest.approx(0.8)  # perplexity up 25%: worse, < 1
    assert recovery(0.0, 0.5, higher_is_better=True) is None


def test_report_renders_in_headless_chromium(demo):
    out, _ = demo
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    assert chromium, "Debian's chromium is installed by .ci/run"
    ARTIFACTS.mkdir(exist_ok=True)
    shot = ARTIFACTS / "report.png"
    url = (out / "report.html").resolve().as_uri()
    flags = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars"]
    dom = subprocess.run([*flags, "--dump-dom", url], capture_output=True, text=True, timeout=120)
    assert dom.returncode == 0
    # verdicts, throughput and sizes; no accuracy-versus-speed plot: transformers serve runs BF16 kernels
    assert dom.stdout.count("<svg") >= 3 and "Verdicts" in dom.stdout and "Worst pages" in dom.stdout
    assert "Accuracy versus speed" not in dom.stdout and "BF16 kernels" in dom.stdout
    assert "harmful-int2" in dom.stdout and "<table" in dom.stdout
    r = subprocess.run([*flags, "--enable-logging=stderr", "--v=0", f"--screenshot={shot}", "--window-size=1200,2400", url],
                       capture_output=True, text=True, timeout=120)
    assert shot.is_file() and shot.stat().st_size > 20_000
    assert "Uncaught" not in r.stderr and "CONSOLE" not in r.stderr
    # the page loads nothing from the network and runs no script
    import re

    page = (out / "report.html").read_text()
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page) and "<script" not in page


def test_report_rebuilds_from_files(demo, tmp_path):
    out, _ = demo
    copy = tmp_path / "c"
    shutil.copytree(out, copy)
    (copy / "report.html").unlink()
    assert _qg("report", str(copy)).returncode == 0 and (copy / "report.html").is_file()


def _wait_for(cond, timeout=900):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if cond():
            return True
        time.sleep(0.3)
    return False


@pytest.mark.slow  # three partial demos and a whole one: about 3.5 minutes
def test_kill_and_resume_at_each_stage(demo, tmp_path):
    """Killed while quantizing, then while serving: the rerun completes, nothing duplicated, and the
    verdicts equal the uninterrupted run's."""
    ref, _ = demo
    out = tmp_path / "out"
    args = [sys.executable, "-m", "quantgate", "demo", "-o", str(out), *SMALL, "--variants", VARIANTS]

    def kill_when(cond):
        p = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        assert _wait_for(cond), "stage never reached"
        p.send_signal(signal.SIGKILL)
        p.wait()

    kill_when(lambda: (out / "variants" / "fp8-dynamic" / "quantgate.json").exists())
    assert not (out / "variants" / "harmful-int2").exists()
    reqs = out / "runs" / "fp8-dynamic" / "requests.jsonl"
    kill_when(lambda: reqs.exists() and len(reqs.read_text().splitlines()) >= 2)
    before = (out / "variants" / "bf16" / "quantgate.json").read_bytes()
    p = subprocess.run(args, capture_output=True, text=True, timeout=1500)
    assert p.returncode == 0, p.stderr[-2000:]
    assert (out / "variants" / "bf16" / "quantgate.json").read_bytes() == before  # reused, not rebuilt
    for name in VARIANTS.split(","):
        recs = [json.loads(x) for x in (out / "runs" / name / "requests.jsonl").read_text().splitlines()]
        keys = [(r["page_id"], r["concurrency"]) for r in recs]
        assert len(keys) == len(set(keys))
    a, b = _verdicts(ref), _verdicts(out)
    assert {k: (v["verdict"], round(v["delta"], 6), round(v["ci_low"], 6)) for k, v in a.items()} == \
           {k: (v["verdict"], round(v["delta"], 6), round(v["ci_low"], 6)) for k, v in b.items()}


def test_second_study_on_same_folder_refuses(demo, tmp_path):
    out = tmp_path / "out"
    p = subprocess.Popen([sys.executable, "-m", "quantgate", "demo", "-o", str(out), *SMALL, "--variants", VARIANTS],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        assert _wait_for(lambda: (out / ".lock").exists() and (out / ".lock").read_text().strip(), 120)
        r = _qg("study", str(out / "study.yaml"), "-o", str(out), timeout=60)
        assert r.returncode == 65 and "another quantgate study is running" in r.stderr
    finally:
        p.send_signal(signal.SIGKILL)
        p.wait()


@pytest.mark.parametrize("patch,msg", [
    ({"colour": "blue"}, r"field 'colour'"),
    ({"variants": [{"name": "bf16", "recipe": "bf16"}, {"name": "x", "recipe": "fp8-dynamic", "extra": 1}]},
     r"variants\.1\.extra"),
    ({"baseline": "nope"}, "baseline 'nope'"),
    ({"metrics": ["ned", "bleu"]}, "unknown metric 'bleu'"),
    ({"margins": {"wer": 0.1}}, r"margins\.wer"),
])
def test_bad_study_files_name_the_field(tmp_path, patch, msg):
    from quantgate.study.demo import demo_study

    body = demo_study(8, ["bf16", "fp8-dynamic"])
    body.update(patch)
    f = tmp_path / "s.yaml"
    f.write_text(yaml.safe_dump(body))
    with pytest.raises(InputError, match=msg):
        load_study(f)
    r = _qg("study", str(f), "-o", str(tmp_path / "o"))
    assert r.returncode == 65 and "Traceback" not in r.stderr and str(f) in r.stderr
    assert os.path.basename(str(f)) in r.stderr


def test_killed_while_scoring_or_reporting_resumes_without_reserving(demo, tmp_path):
    """Scores and reports are written atomically, so a kill leaves each file whole or absent; a
    rerun recomputes them from the records without sending a single request again."""
    out, _ = demo
    copy = tmp_path / "c"
    shutil.copytree(out, copy)
    summ = json.loads((copy / "summary.json").read_text())
    study = yaml.safe_load((copy / "study.yaml").read_text())
    (copy / "study.yaml").write_text(yaml.safe_dump(study, sort_keys=False))
    sizes = {p: p.stat().st_size for p in (copy / "runs").rglob("requests.jsonl")}
    logs = {p: p.stat().st_size for p in (copy / "runs").rglob("server.log")}
    (copy / "summary.json").unlink()  # killed while reporting
    (copy / "report.html").unlink()
    next((copy / "scores").glob("*.jsonl")).unlink()  # killed while scoring
    r = _qg("study", str(copy / "study.yaml"), "-o", str(copy), timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    assert {p: p.stat().st_size for p in (copy / "runs").rglob("requests.jsonl")} == sizes  # nothing re-sent
    assert {p: p.stat().st_size for p in (copy / "runs").rglob("server.log")} == logs  # no server started
    again = json.loads((copy / "summary.json").read_text())
    strip = lambda vs: [{k: v[k] for k in ("variant", "metric", "verdict", "delta", "ci_low", "ci_high")} for v in vs]  # noqa: E731
    assert strip(again["verdicts"]) == strip(summ["verdicts"]) and (copy / "report.html").is_file()


# --- the files between stages, typed ---------------------------------------------------


def _old_dict_report(study, out, pages_sha256, variant_dirs, verdicts, compare_level, noise_level, worst, lm_eval,
                     statistics, inputs):
    """The report builder as it was before summary.json was typed (a plain dict from raw JSON), kept
    here only to show the typed one writes the same file. Package versions, commit and time are left out."""
    import hashlib

    variants, runs = [], {}
    for name, vdir in variant_dirs.items():
        man = json.loads((vdir / "quantgate.json").read_text("utf-8"))
        run = json.loads((out / "runs" / name / "run.json").read_text("utf-8"))
        runs[name] = run
        variants.append({
            "name": name, "recipe": man["recipe"]["name"], "recipe_sha256": hashlib.sha256(man["recipe"]["text"].encode()).hexdigest(),
            "path": vdir.relative_to(out).as_posix(), "weights_bytes": man["size"]["weights_bytes"], "compression": man["size"]["compression"],
            "formats": man["verification"].get("formats"), "vision_bf16": man["verification"].get("vision_bf16"),
            "files": {k: v["sha256"] for k, v in man["files"].items()},
            "kernels": run.get("kernels", {}), "numerics": run.get("numerics"), "notes": run.get("notes", []), "server_version": run.get("server_version"),
            "engine": run.get("engine"), "levels": run["levels"], "max_concurrency_within_slo": run.get("max_concurrency_within_slo"),
            "calibration_pages": len(man["calibration"]["page_ids"])})
    base_levels = {lv["concurrency"]: lv for lv in runs[study["baseline"]]["levels"]}
    for v in variants:
        # a quantized variant served by transformers serve (BF16 kernels) has no speed-up
        n = v["numerics"] or {}
        bf16_kernels = bool(n.get("quantized")) and n.get("backend") == "transformers"
        v["speedup"] = {str(lv["concurrency"]): (lv["pages_per_s"] / base_levels[lv["concurrency"]]["pages_per_s"])
                        if not bf16_kernels and lv["concurrency"] in base_levels
                        and base_levels[lv["concurrency"]]["pages_per_s"] else None
                        for lv in v["levels"]}
        v["speed"], v["speedup_interval"] = [], {}  # added with speed waves: a study without them has none
        v["sequential"] = None  # added with sequential studies: a fixed study has none
        # added with preemption counts: run.json's, keyed by concurrency as text; None where not counted
        pre = runs[v["name"]].get("preemptions")
        v["preemptions"] = None if pre is None else {str(k): n for k, n in pre.items()}
    expected = (len(study["variants"]) - 1) * len(study["metrics"])
    return {
        "schema_version": 5, "kind": "quantgate.report", "created": None,
        "study": study, "baseline": study["baseline"], "compare_level": compare_level, "noise_level": noise_level,
        "complete": len(verdicts) == expected and (not study.get("lm_eval") or bool(lm_eval and lm_eval["verdicts"])),
        "verdicts": verdicts, "lm_eval": lm_eval, "variants": variants, "worst_pages": worst,
        "provenance": {"packages": None, "git_commit": None, "pageset_sha256": pages_sha256, "statistics": statistics},
        "inputs": inputs, "time_budget": None}


def test_demo_summary_is_the_old_dict_apart_from_typing(demo):
    """summary.json written through the typed model equals, key for key and in order, what the untyped
    builder made from the same files; verdicts and lm-eval rows are recomputed from the score files and
    lm-eval logs the way the study made them, not copied from the summary under test."""
    from quantgate.io.fileio import sha256_file
    from quantgate.io.scores import read_scores
    from quantgate.judge.compare import Names, compare_scores
    from quantgate.judge.family import holm
    from quantgate.lmeval import compare_lmeval
    from quantgate.lmeval.run import load_lmeval
    from quantgate.schema.settings import VerdictSettings
    from quantgate.scoring import REGISTRY

    out, _ = demo
    new = json.loads((out / "summary.json").read_text())
    st, base, c0, nl = new["study"], new["baseline"], new["compare_level"], new["noise_level"]
    sc = lambda name, c: read_scores(out / "scores" / f"{name}-c{c}.jsonl")  # noqa: E731
    def settings(m):
        return VerdictSettings(metric=m, margin=st["margins"].get(m), seed=st["bootstrap_seed"], n_resamples=st["resamples"],
                               min_pages=st["min_pages"], min_documents=st["min_documents"],
                               expected_shift=st["expected_shift"].get(m, 0.0),
                               **{k: st[k].get(m) for k in ("worst_page_damage", "worst_document_damage",
                                                            "baseline_floor")})

    empty = read_scores(out / "scores" / "empty-output.jsonl")  # what reading nothing scores: fitness rests on it
    verdicts = [{"variant": v["name"], **compare_scores(sc(base, c0), sc(v["name"], c0), settings(m), noise=sc(base, nl),
                                                        names=Names(f"{base}@c{c0}", f"{v['name']}@c{c0}"),
                                                        empty=empty).model_dump()}
        for v in st["variants"] if v["name"] != base for m in st["metrics"]]
    lm = st["lm_eval"]
    lm_eval = {"verdicts": [{"variant": v["name"], **r.model_dump()} for v in st["variants"] if v["name"] != base
                            for r in compare_lmeval(out / "lmeval" / base, out / "lmeval" / v["name"],
                                                    margins=lm["margins"], default_margin=lm["margin"], seed=st["bootstrap_seed"],
                                                    n_resamples=st["resamples"], min_pages=st["min_pages"],
                                                    names=(base, v["name"]), min_documents=st["min_documents"],
                                                    worst_sample_damage=lm["worst_sample_damage"])],
               "runs": {v["name"]: load_lmeval(out / "lmeval" / v["name"])[0].model_dump() for v in st["variants"]}}
    family = verdicts + lm_eval["verdicts"]  # Holm over every verdict of the study
    for row, p in zip(family, holm([r["p_regression"] for r in family]), strict=True):
        row["p_regression_holm"] = p
    files = ["pages/pages.jsonl"] + [f"scores/{v['name']}-c{c0}.jsonl" for v in st["variants"]] + \
        [f"scores/{base}-c{nl}.jsonl"]
    # every file a reported claim rests on — each variant's run, records and manifest, the page set's
    # manifest, the lm-eval page task's files
    files += [f for v in st["variants"] for f in (f"runs/{v['name']}/run.json", f"runs/{v['name']}/requests.jsonl",
                                                  f"variants/{v['name']}/quantgate.json")]
    # the truth-free bounds of each candidate and of the baseline's re-run, beside their score files
    files += [f"scores/{v['name']}-c{c0}.bounds.jsonl" for v in st["variants"] if v["name"] != base] + \
        [f"scores/{base}-c{nl}.bounds.jsonl"]
    files += ["study.json", "scores/empty-output.jsonl", "pages/pageset.json"] + sorted(
        p.relative_to(out).as_posix() for p in (out / "lmeval" / "task").rglob("*") if p.is_file())
    for v in st["variants"]:
        files += [f"lmeval/{v['name']}/lmeval.json"] + [f"lmeval/{v['name']}/samples-{t}.jsonl" for t in
                                                         sorted(lm_eval["runs"][v["name"]]["tasks"])]
    inputs = {"margins": {m: st["margins"].get(m, REGISTRY[m].margin) for m in st["metrics"]},
              "pages": "pages/pages.jsonl", "files": {f: sha256_file(out / f) for f in files}}
    old = _old_dict_report(st, out, new["provenance"]["pageset_sha256"],
                           {v["name"]: out / "variants" / v["name"] for v in st["variants"]}, verdicts, c0, nl,
                           new["worst_pages"], lm_eval, new["provenance"]["statistics"], inputs)
    # schema 4's pages with and without truth and their bounds: made and tested by study.truthfree
    # (tests/integration/test_study_truthfree.py), carried over as they are
    old |= {k: new[k] for k in ("truth", "truth_free", "largest_bounds")}
    old["created"], old["time_budget"] = new["created"], new["time_budget"]  # the time budget: test_study_sequential
    old["provenance"].update(packages=new["provenance"]["packages"], git_commit=new["provenance"]["git_commit"])
    assert json.dumps(new) == json.dumps(old)  # same keys, same order, same values
    assert len(new["verdicts"]) == 6 and len(new["lm_eval"]["verdicts"]) == 2 and sum(map(len, new["worst_pages"].values()))


def test_every_file_between_stages_of_the_demo_validates(demo):
    """Each file one stage hands the next, as a real flow wrote it, reads through its model and
    dumps back to what is on disk (the model holds every field the writer writes, values unchanged)."""
    from quantgate.schema.base import read_record_file
    from quantgate.schema.bounds import BoundRow
    from quantgate.schema.lmeval import LmEvalRun
    from quantgate.schema.pages import PageRecord, PageSetManifest
    from quantgate.schema.run import RequestRecord, RunManifest
    from quantgate.schema.scores import ScoreRow
    from quantgate.schema.summary import Summary
    from quantgate.schema.variant import VariantManifest

    out, _ = demo

    def lines(f):
        return [json.loads(x) for x in f.read_text("utf-8").splitlines()]

    seen = {}
    for pattern, model, jsonl in [("pages/pageset.json", PageSetManifest, False), ("pages/pages.jsonl", PageRecord, True),
                                  ("variants/*/quantgate.json", VariantManifest, False),
                                  ("runs/*/requests.jsonl", RequestRecord, True), ("runs/*/run.json", RunManifest, False),
                                  # a score file is <variant>-c<level>.jsonl; the truth-free bounds file beside it
                                  # is <variant>-c<level>.bounds.jsonl, rows of another model
                                  ("scores/*[0-9].jsonl", ScoreRow, True), ("scores/*.bounds.jsonl", BoundRow, True),
                                  ("scores/empty-output.jsonl", ScoreRow, True),  # each judged page read as empty
                                  ("lmeval/*/lmeval.json", LmEvalRun, False),
                                  ("summary.json", Summary, False)]:
        files = sorted(out.glob(pattern))
        seen[pattern] = len(files)
        for f in files:
            for obj in (lines(f) if jsonl else [json.loads(f.read_text("utf-8"))]):
                assert model.model_validate(obj).model_dump(exclude_unset=True) == obj, f
            if not jsonl and "kind" in model.model_fields:
                read_record_file(model, f)  # kind and schema version too
    n = len(VARIANTS.split(","))
    assert seen == {"pages/pageset.json": 1, "pages/pages.jsonl": 1, "variants/*/quantgate.json": n,
                    "runs/*/requests.jsonl": n, "runs/*/run.json": n,
                    "scores/*[0-9].jsonl": n + 1,  # one level each, and the baseline's noise run
                    "scores/*.bounds.jsonl": n,  # each candidate's, and the baseline's noise run, against the baseline
                    "scores/empty-output.jsonl": 1,
                    "lmeval/*/lmeval.json": n, "summary.json": 1}


# --- stale state ----------------------------------------------------------------------

def test_synth_pages_are_rebuilt_when_the_study_spec_changes(tmp_path, monkeypatch):
    """A study reused out/pages whenever pages.jsonl existed, even after its pages.synth changed. Now
    the spec is recorded in pageset.json: same spec, reused; another spec (or none recorded), rebuilt
    with a line saying why; a folder quantgate did not synthesize, refused. Quantize is stubbed out:
    only the pages step is under test."""
    import quantgate.quantize as qz
    from quantgate.io.pageset import load_pageset
    from quantgate.schema.pages import PageSetManifest
    from quantgate.study import run_study
    from quantgate.study.demo import demo_study
    from tests.support.stub_study import fake_quantize

    monkeypatch.setattr(qz, "quantize", fake_quantize)
    body = demo_study(4, ["bf16", "fp8-dynamic"])
    body["pages"]["synth"].update(profile="simple")
    f, out = tmp_path / "s.yaml", tmp_path / "out"

    def study(**synth):
        body["pages"]["synth"].update(synth)
        f.write_text(yaml.safe_dump(body))
        lines = []
        run_study(f, out, log=lines.append, stop_after="quantize")
        return load_pageset(out / "pages"), lines

    ps, _ = study()
    assert len(ps.pages) == 4 and ps.manifest.synth.model_dump()["n"] == 4
    first = ps.sha256
    ps, lines = study()
    assert ps.sha256 == first and not any("rebuilding" in x for x in lines)  # same spec: reused
    for change in ({"n": 6}, {"seed": 2}, {"noise": 0.0}, {"calibration_fraction": 0.5}, {"profile": "doc"}):
        ps, lines = study(**change)
        key, value = next(iter(change.items()))
        assert getattr(ps.manifest.synth, key) == value and ps.sha256 != first, change
        assert any("pages.synth changed" in x and key in x and "rebuilding" in x for x in lines), lines
        first = ps.sha256
    # a synth set from before the spec was recorded: rebuilt
    man = json.loads((out / "pages" / "pageset.json").read_text())
    man["synth"] = None
    (out / "pages" / "pageset.json").write_text(json.dumps(man))
    _, lines = study()
    assert any("records no synth spec" in x for x in lines)
    # an imported set in its place: refused, untouched
    man = PageSetManifest.model_validate({**json.loads((out / "pages" / "pageset.json").read_text()),
                                          "created_by": "quantgate pages import", "synth": None})
    (out / "pages" / "pageset.json").write_text(man.model_dump_json())
    before = (out / "pages" / "pages.jsonl").read_bytes()
    with pytest.raises(InputError, match="did not synthesize.*pages.path"):
        study(n=5)
    assert (out / "pages" / "pages.jsonl").read_bytes() == before
