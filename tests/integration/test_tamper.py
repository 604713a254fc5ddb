"""The gate binds every claim it prints or a report shows. One case per class of the 49
edits of a finished study folder (``tests.support.study_folder``: real verdict, report and gate code); each must
be caught — exit 3, one line naming what changed. Later fields of the summary join this table.

Not here: weights copied in with every hash rewritten consistently (only a signed verdict catches that:
tests/integration/test_attest.py), the lm-eval task's files (tests/integration/test_lmeval_moved.py), and the
report files, which the gate does not vouch for but `quantgate report` rebuilds (the last test)."""

from __future__ import annotations

import json
import shutil

import pytest

from tests.support.cli import run_cli as _cli
from tests.support.paths import REPO
from tests.support.study_folder import finished_study


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    return finished_study(tmp_path_factory.mktemp("tamper") / "study")




def _json(path, fn):
    obj = json.loads(path.read_text())
    fn(obj)
    path.write_text(json.dumps(obj))


def _lines(path, fn):
    lines = path.read_text().splitlines()
    path.write_text("\n".join(fn(lines)) + "\n")


def _edit_record(lines):
    rec = json.loads(lines[3])
    rec["output"] = "a forged output"
    return [*lines[:3], json.dumps(rec), *lines[4:]]


def _edit_bound(lines):
    """The largest ned bound of the file made 0, as if the two outputs read alike."""
    rows = [json.loads(x) for x in lines]
    top = max(range(len(rows)), key=lambda i: rows[i]["bounds"]["ned"])
    assert rows[top]["bounds"]["ned"] > 0
    rows[top]["bounds"]["ned"] = 0.0
    return [json.dumps(r) for r in rows]


def _summary(fn):
    return lambda f: _json(f / "summary.json", fn)


def _variant(name, fn):
    return _summary(lambda s: fn(next(v for v in s["variants"] if v["name"] == name)))


def _verdict(variant, metric, fn):
    return _summary(lambda s: fn(next(v for v in s["verdicts"] if (v["variant"], v["metric"]) == (variant, metric))))


def _edit_latency(lines):
    rec = json.loads(lines[1])
    rec["latency_s"] = rec["latency_s"] / 10
    return [lines[0], json.dumps(rec), *lines[2:]]


EDITS = {
    # requests.jsonl: the outputs scored and shown
    "requests output edited": (lambda f: _lines(f / "runs/bad/requests.jsonl", _edit_record), "runs/bad/requests.jsonl"),
    "requests records swapped": (lambda f: _lines(f / "runs/bad/requests.jsonl", lambda x: [x[1], x[0], *x[2:]]),
                                 "runs/bad/requests.jsonl"),
    "requests deleted": (lambda f: (f / "runs/bad/requests.jsonl").unlink(), "runs/bad/requests.jsonl"),
    "requests copied from the baseline": (
        lambda f: shutil.copy(f / "runs/bf16/requests.jsonl", f / "runs/bad/requests.jsonl"), "runs/bad/requests.jsonl"),
    # run.json
    "run.json server_command": (lambda f: _json(f / "runs/bad/run.json", lambda r: r.update(server_command=["x"])),
                                "runs/bad/run.json"),
    "run.json speed": (lambda f: _json(f / "runs/fp8/run.json", lambda r: r["levels"][0].update(pages_per_s=1000.0)),
                       "runs/fp8/run.json"),
    # the page set
    "page image edited": (lambda f: (f / "pages/images/p003.png").write_bytes(b"forged"), "pages/images/p003.png"),
    "page image deleted": (lambda f: (f / "pages/images/p003.png").unlink(), "pages/images/p003.png"),
    "truth edited": (lambda f: (f / "pages/truth/p003.md").write_text("# forged\n"), "pages/truth/p003.md"),
    "truth deleted": (lambda f: (f / "pages/truth/p003.md").unlink(), "pages/truth/p003.md"),
    "pageset.json": (lambda f: _json(f / "pages/pageset.json", lambda m: m.update(seed=99)), "pages/pageset.json"),
    # the variant folder
    "quantgate.json name": (lambda f: _json(f / "variants/bad/quantgate.json", lambda m: m.update(name="bf16")),
                            "variants/bad/quantgate.json"),
    "quantgate.json recipe": (lambda f: _json(f / "variants/bad/quantgate.json",
                                              lambda m: m["recipe"].update(name="bf16", text="name: bf16\n")),
                              "variants/bad/quantgate.json"),
    "extra tokenizer file": (lambda f: (f / "variants/fp8/special_tokens_map.json").write_text("{}"),
                             "variants/fp8/special_tokens_map.json"),
    "extra code file": (lambda f: (f / "variants/fp8/modeling_evil.py").write_text("import os\n"),
                        "variants/fp8/modeling_evil.py"),
    "extra variant folder": (lambda f: shutil.copytree(f / "variants/fp8", f / "variants/fp8-copy"), "variants/fp8-copy"),
    # summary.json's reported numbers
    "summary speedup": (_variant("bad", lambda v: v["speedup"].update({"1": 10.0})), "speedup"),
    "summary pages_per_s": (_variant("bad", lambda v: v["levels"][0].update(pages_per_s=1000.0)), "pages_per_s"),
    "summary weights_bytes": (_variant("bad", lambda v: v.update(weights_bytes=1)), "weights_bytes"),
    "summary kernels": (_variant("bad", lambda v: v.update(kernels={"fp8": {"CutlassFP8": 7}})), "kernels"),
    # the preemption counts and the engine's start wait, copied from run.json
    "summary preemptions": (_variant("bad", lambda v: v.update(preemptions={"1": 0})), "preemptions"),
    "summary engine start wait": (_variant("bad", lambda v: v.update(engine={"profile_wait_s": 1.0})), "engine"),
    "summary formats": (_variant("bad", lambda v: v.update(formats={"nvfp4": 1})), "formats"),
    "summary recipe": (_variant("bad", lambda v: v.update(recipe="bf16")), "recipe"),
    "summary worst page dropped": (_summary(lambda s: s["worst_pages"]["bad"].pop(0)), "worst_pages"),
    "summary worst page output": (_summary(lambda s: s["worst_pages"]["bad"][0].update(variant_output="fine")),
                                  "worst_pages"),
    "summary provenance pageset": (_summary(lambda s: s["provenance"].update(pageset_sha256="0" * 64)),
                                   "pageset_sha256"),
    "summary provenance statistics": (_summary(lambda s: s["provenance"].update(statistics="two-sided")),
                                      "provenance.statistics"),
    # the document-level fields of a verdict, made again from the score files with the verdict
    "verdict documents": (_verdict("bad", "ned", lambda v: v.update(documents=400)), "documents"),
    "verdict design_effect": (_verdict("bad", "ned", lambda v: v.update(design_effect=0.5)), "design_effect"),
    "verdict baseline_score": (_verdict("bad", "ned", lambda v: v.update(baseline_score=0.99)), "baseline_score"),
    "verdict flips": (_verdict("bad", "ned", lambda v: v.update(flips=0)), "flips"),
    # per-variant placement — the run's layout (run.json) and a verdict's noise layout
    "run.json placement": (lambda f: _json(f / "runs/fp8/run.json", lambda r: r.update(layout={
        "servers": "all_at_once", "servers_in_study": 3, "gpu": "3",
        "placement": {"variant": "fp8", "gpus": [3], "wave": 1}})), "runs/fp8/run.json"),
    "verdict noise_layout": (_verdict("fp8", "ned", lambda v: v.update(noise_layout="measured")), "noise_layout"),
    # the truth-free bounds beside the score files, and what the report shows of them
    "bounds file edited": (lambda f: _lines(f / "scores/bad-c1.bounds.jsonl", _edit_bound), "scores/bad-c1.bounds.jsonl"),
    "bounds file deleted": (lambda f: (f / "scores/fp8-c1.bounds.jsonl").unlink(), "scores/fp8-c1.bounds.jsonl"),
    "noise run's bounds edited": (lambda f: _lines(f / "scores/bf16-c2.bounds.jsonl", _edit_bound),
                                  "scores/bf16-c2.bounds.jsonl"),
    "summary pages with truth": (_summary(lambda s: s["truth"].update(with_truth=1, without_truth=39)), "truth"),
    "summary mean bound": (_summary(lambda s: s["truth_free"][0].update(mean_bound=0.0)), "truth_free"),
    "summary largest bound output": (_summary(lambda s: s["largest_bounds"]["bad"][0].update(variant_output="ok")),
                                     "largest_bounds"),
}

# the study echo's fields no run.json or variant manifest proves, bound to the hashed study as run (study.json):
# one smallest edit per group, each refused naming the field, without --study
ECHO_EDITS = {
    "echo name": (_summary(lambda s: s["study"].update(name="release-candidate")), "study.name"),
    "echo model": (_summary(lambda s: s["study"].update(model="/elsewhere/other-model")), "study.model"),
    "echo pages path": (_summary(lambda s: s["study"]["pages"].update(path="/elsewhere/other-pages")),
                        "study.pages.path"),
    "echo variant recipe": (_summary(lambda s: s["study"]["variants"][2].update(recipe="fp8-dynamic")),
                            "study.variants[2].recipe"),
    "echo calibration_samples": (_summary(lambda s: s["study"].update(calibration_samples=512)),
                                 "study.calibration_samples"),
    "echo backend option": (_summary(lambda s: s["study"]["backend"].update(continuous_batching=True)),
                            "study.backend.continuous_batching"),
    "echo backend threads": (_summary(lambda s: s["study"]["backend"].update(threads=4)), "study.backend.threads"),
    "echo timeout_s": (_summary(lambda s: s["study"].update(timeout_s=5.0)), "study.timeout_s"),
    "echo gpus": (_summary(lambda s: s["study"].update(gpus=[0])), "study.gpus"),
    "study.json edited": (lambda f: _json(f / "study.json", lambda st: st.update(name="other")), "study.json changed"),
    "study.json unbound": (_summary(lambda s: s["inputs"]["files"].pop("study.json")), "no hash for study.json"),
}

# a study with a speed: block — each variant's speed waves (speed.jsonl) and their intervals
SPEED_EDITS = {
    "speed.jsonl wave edited": (lambda f: _lines(f / "runs/fp8/speed.jsonl", _edit_latency), "runs/fp8/speed.jsonl"),
    "speed.jsonl deleted": (lambda f: (f / "runs/fp8/speed.jsonl").unlink(), "runs/fp8/speed.jsonl"),
    "run.json speed wave": (lambda f: _json(f / "runs/fp8/run.json",
                                            lambda r: r["speed"][0]["waves"][0].update(output_tokens_per_s=1e4)),
                            "runs/fp8/run.json"),
    "summary speedup_interval": (_variant("fp8", lambda v: v["speedup_interval"]["1"].update(low=9.0, ratio=10.0)),
                                 "speedup_interval"),
    "summary speedup_interval dropped": (_variant("fp8", lambda v: v.update(speedup_interval={})), "speedup_interval"),
    "summary speed waves": (_variant("fp8", lambda v: v["speed"][0]["waves"].pop()), "speed"),
}


# the decode profiles and copy bandwidth a study's Decode step section shows (speed.profile)
PROFILE_EDITS = {
    "decode profile edited": (lambda f: _json(f / "speed/fp8/c1.profile.json",
                                              lambda p: p["step"][0].update(us=p["step"][0]["us"] / 2)),
                              "speed/fp8/c1.profile.json"),
    "decode profile deleted": (lambda f: (f / "speed/fp8/c1.profile.json").unlink(), "speed/fp8/c1.profile.json"),
    "copy bandwidth edited": (lambda f: _json(f / "speed/copy-bandwidth.json", lambda c: c.update(gbs=9e3)),
                              "speed/copy-bandwidth.json"),
}


@pytest.fixture(scope="module")
def profiled_study(tmp_path_factory):
    """A speed study whose folder held decode profiles (the committed 2026-12-03 fp8-all profile, as fp8's) and a
    copy bandwidth when its summary was made, as a speed.profile study's does."""
    import tarfile

    out = tmp_path_factory.mktemp("tamper-profile") / "study"
    (out / "speed" / "fp8").mkdir(parents=True)
    session = REPO / "lab" / "2026-12-03-h200-seven-variant-study" / "study" / "speed.tar.xz"
    with tarfile.open(session) as t:
        prof = json.loads(t.extractfile("speed/fp8-all/c1.profile.json").read()) | {"variant": "fp8"}
    (out / "speed" / "fp8" / "c1.profile.json").write_text(json.dumps(prof))
    (out / "speed" / "copy-bandwidth.json").write_text(json.dumps(
        {"schema_version": 1, "kind": "quantgate.copy_bandwidth", "gbs": 4274.8, "source": "hbm.json"}))
    return finished_study(out, speed={"repeats": 3, "levels": [1]})


@pytest.mark.parametrize("name", list(PROFILE_EDITS))
def test_every_edit_of_a_profiled_study_is_caught(profiled_study, tmp_path, name):
    files = json.loads((profiled_study / "summary.json").read_text())["inputs"]["files"]
    assert {"speed/fp8/c1.profile.json", "speed/copy-bandwidth.json"} <= set(files)
    _caught(profiled_study, tmp_path, *PROFILE_EDITS[name])


@pytest.fixture(scope="module")
def speed_study(tmp_path_factory):
    return finished_study(tmp_path_factory.mktemp("tamper-speed") / "study", speed={"repeats": 3, "levels": [1]})


@pytest.mark.parametrize("name", list(EDITS))
def test_every_edit_of_a_finished_study_is_caught(study, tmp_path, name):
    _caught(study, tmp_path, *EDITS[name])


@pytest.mark.parametrize("name", list(ECHO_EDITS))
def test_every_edit_of_the_study_echo_is_caught(study, tmp_path, name):
    _caught(study, tmp_path, *ECHO_EDITS[name])


def test_a_schema_4_summary_gates_on_what_it_binds(study, tmp_path):
    """A summary from before the study as run was hashed: read and gated as before (its echo bound where run.json
    proves it), not refused for lacking study.json."""
    folder = shutil.copytree(study, tmp_path / "s")
    _summary(lambda s: (s.update(schema_version=4), s["inputs"]["files"].pop("study.json")))(folder)
    code, out, _ = _cli("gate", folder, "--variants", "fp8")
    assert code == 0, out


def test_an_edited_name_does_not_retitle_the_rebuilt_reports(study, tmp_path):
    folder = shutil.copytree(study, tmp_path / "s")
    before = (folder / "report.md").read_text()
    _summary(lambda s: s["study"].update(name="release-candidate"))(folder)
    code, out, err = _cli("report", folder)
    assert code == 65 and "study.name" in err and "study.json" in err, (code, out, err)
    assert (folder / "report.md").read_text() == before and "release-candidate" not in before


@pytest.mark.parametrize("name", list(SPEED_EDITS))
def test_every_edit_of_a_speed_study_is_caught(speed_study, tmp_path, name):
    assert json.loads((speed_study / "summary.json").read_text())["variants"][1]["speedup_interval"]["1"]["ratio"] > 1
    _caught(speed_study, tmp_path, *SPEED_EDITS[name])


def _caught(study, tmp_path, edit, needle):
    folder = shutil.copytree(study, tmp_path / "s")
    code, out, _ = _cli("gate", folder, "--variants", "fp8")
    assert code == 0, out  # the untouched copy passes for its within-noise variant
    edit(folder)
    code, out, err = _cli("gate", folder, "--variants", "fp8")
    assert code == 3 and len(out.splitlines()) == 1 and out.startswith("INVALID: ") and not err, (code, out, err)
    assert needle in out, out


def test_the_reports_are_not_vouched_for_and_rebuilt_from_the_checked_summary(study, tmp_path):
    """report.md / report.html / junit.xml with the failures stripped: the gate's exit is the files' truth (1, bad
    regresses), it says it does not vouch for the reports, and `quantgate report` rebuilds them with the failure."""
    folder = shutil.copytree(study, tmp_path / "s")
    for f in ("report.md", "report.html", "junit.xml"):
        (folder / f).write_text("all passed\n")
    code, out, _ = _cli("gate", folder)
    assert code == 1 and "does not vouch for report.md, report.html, junit.xml" in out
    code, _, err = _cli("report", folder)
    assert code == 0, err
    assert "<failure" in (folder / "junit.xml").read_text()
    assert (folder / "report.md").read_text() == (study / "report.md").read_text()
