"""A full disk anywhere in a study — serving (records, run.json), scoring, the report — is one
line naming the folder (exit 5), nothing already written is corrupted, and a rerun with room gives the verdicts
of a study that never ran out. The full disk is a file-size cap (``tests.support.disk_full``: RLIMIT_FSIZE in a
subprocess) at sizes that stop the study at different writes; quantize's own weights writer (safetensors) is
checked with its real error type."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from quantgate.errors import DiskFullError
from tests.support.paths import REPO
from tests.support.stub_study import run, study_yaml


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    from quantgate.heldout.synth import synth_pages

    root = tmp_path_factory.mktemp("full")
    synth_pages(root / "pages", 10, seed=4, profile="simple", calibration_fraction=0.0)
    st = study_yaml(root / "study.yaml", root / "pages", {"same": 0.0, "bad": 0.6}, min_pages=5)
    return st, run(st, root / "reference")


def _verdicts(summary):
    return [(v["variant"], v["metric"], v["verdict"], v["delta"], v["ci_low"], v["ci_high"]) for v in summary["verdicts"]]


def _intact(out):
    """Every JSON and JSONL file in the folder parses whole (a torn last record line is what resume cuts)."""
    for f in out.rglob("*"):
        if f.suffix == ".json":
            json.loads(f.read_text())
        elif f.suffix == ".jsonl" and f.name != "requests.jsonl":
            [json.loads(x) for x in f.read_text().splitlines()]
        assert ".tmp" not in f.name, f  # no temporary file of an atomic write left behind


# where the cap is set: below the size this file reaches in the reference study, so the study stops at
# it or at an earlier write that grows as large (the records, the scores, summary.json, the html report)
TARGETS = ["runs/bf16/requests.jsonl", "scores/bf16-c1.jsonl", "summary.json", "report.html"]


@pytest.mark.parametrize("target", TARGETS)
def test_a_full_disk_is_one_line_and_the_rerun_gives_the_same_verdicts(study, tmp_path, target):
    st, reference = study
    limit = int((st.parent / "reference" / target).stat().st_size * 0.9)  # timings make sizes vary a little
    out = tmp_path / "out"
    r = subprocess.run([sys.executable, "-m", "tests.support.disk_full", str(st), str(out), str(limit)],
                       capture_output=True, text=True, cwd=REPO, env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin", "PYTHONDONTWRITEBYTECODE": "1"},
                       timeout=300)
    lines = [x for x in r.stderr.splitlines() if x.startswith("error:") or "Traceback" in x]
    assert r.returncode == 5 and len(lines) == 1, (r.returncode, r.stderr[-3000:])
    assert f"error: {out}" in lines[0] and ("no room to write" in lines[0] or "cannot append a request record" in lines[0])
    _intact(out)
    again = run(st, out)
    assert _verdicts(again) == _verdicts(reference)


def test_quantize_disk_full_is_one_line_and_leaves_no_partial_build(tmp_path, monkeypatch):
    """safetensors reports a full disk as a SafetensorError whose text holds the OS's message (a raw
    traceback); quantize's build is made to hit it where it writes its weights."""
    from safetensors import SafetensorError

    import quantgate.quantize.build as build

    def full(*a, **k):
        raise SafetensorError("Error while serializing: IoError(Os { code: 28, kind: StorageFull, message: "
                              "\"No space left on device\" })")

    monkeypatch.setattr(build, "_build", full)
    monkeypatch.setattr(build, "_settle", lambda *a, **k: _job(tmp_path))
    monkeypatch.setattr(build, "_reusable", lambda *a, **k: None)
    monkeypatch.setattr(build.store, "fetch", lambda *a, **k: None)  # the machine's store holds no such variant
    with pytest.raises(DiskFullError, match=rf"^{tmp_path}: no room to write .*No space left on device.*rerun"):
        build.quantize(tmp_path / "model", "fp8-dynamic", tmp_path / "variant")
    assert not list(tmp_path.glob(".variant.building.*")) and not (tmp_path / "variant").exists()


def _job(tmp_path):
    class Job:
        out = tmp_path / "variant"
        inputs = None  # what the machine's variant store is asked for (its fetch is stubbed)
    return Job()
