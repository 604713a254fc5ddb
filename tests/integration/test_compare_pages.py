"""``quantgate compare --pages PAGESET BASELINE CANDIDATE --metric ned`` as a user runs it (its own process, its exit
code): the same verdict as ``quantgate.compare_outputs`` on the same inputs, for run folders and folders of
``<page_id>.md`` alike, and each kind of bad input one line naming the folder or page, with nothing written."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from quantgate.commands.scoring import EXIT
from quantgate.errors import DataError, UsageError
from quantgate.heldout.label import label_sample
from quantgate.heldout.synth import synth_pages
from quantgate.io.fileio import sha256_file
from quantgate.io.pageset import load_pageset
from tests.support.truthless import drop_truth

REPO = Path(__file__).resolve().parents[2]
LABELED_DOCS = 30


def quantgate(*args) -> subprocess.CompletedProcess:
    env = os.environ | {"PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "quantgate", *map(str, args)], capture_output=True, text=True,
                          env=env, cwd=REPO, timeout=300)


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    """400 single-page documents, all held out, truth kept on a recorded draw of 30 of them; the baseline's outputs
    are the truth, a candidate with identical outputs (a folder of .md) and one with an edit on every fifth page
    (a run folder, as `quantgate serve` writes it)."""
    root = tmp_path_factory.mktemp("cmp")
    ps_dir = root / "set"
    synth_pages(ps_dir, 400, seed=2, profile="simple", page_size=(200, 260), calibration_fraction=0.0)
    ps = load_pageset(ps_dir)
    texts = {p.id: ps.truth_text(p) or "" for p in ps.pages}
    draw, _ = label_sample(ps_dir, LABELED_DOCS, seed=4, out=root / "to-label")
    drop_truth(ps_dir, set(draw.page_ids))

    base, same = root / "base", root / "same"
    for folder in (base, same):
        folder.mkdir()
        for pid, t in texts.items():
            (folder / f"{pid}.md").write_text(t, "utf-8")
    edited = {pid: (t + " extra words" if i % 5 == 0 else t) for i, (pid, t) in enumerate(texts.items())}
    run = root / "run"
    run.mkdir()
    (run / "requests.jsonl").write_text("".join(
        json.dumps({"schema_version": 3, "page_id": pid, "concurrency": 1, "output": t, "start": 0.0, "end": 1.0})
        + "\n" for pid, t in edited.items()), "utf-8")
    return {"set": ps_dir, "base": base, "same": same, "run": run, "texts": texts, "edited": edited,
            "drawn": set(draw.page_ids)}


def _expected(s, candidate: dict[str, str]):
    from quantgate import compare_outputs

    ps = load_pageset(s["set"])
    truth = {p.id: ps.truth_text(p) for p in ps.pages if p.truth is not None}
    return compare_outputs(s["texts"], candidate, truth=truth, documents={p.id: p.document for p in ps.pages},
                           labeled_at_random=True, metric="ned")


@pytest.mark.parametrize("cand, texts", [("same", "texts"), ("run", "edited")])
def test_the_command_and_the_library_give_the_same_verdict(study, cand, texts):
    r = quantgate("compare", "--pages", study["set"], study["base"], study[cand], "--metric", "ned", "--json")
    assert r.returncode in EXIT.values(), r.stderr
    got = json.loads(r.stdout)
    want = json.loads(json.dumps(_expected(study, study[texts]).model_dump(), default=str))
    assert got == want
    assert r.returncode == EXIT[got["verdict"]]
    plain = quantgate("compare", "--pages", study["set"], study["base"], study[cand], "--metric", "ned")
    assert plain.returncode == r.returncode and got["verdict"].upper() in plain.stdout


def _files(*roots: Path) -> dict[str, str]:
    return {str(f): sha256_file(f) for r in roots for f in sorted(r.rglob("*")) if f.is_file()}


def _one_error(r: subprocess.CompletedProcess, code: int, *parts: str) -> None:
    assert r.returncode == code, (r.returncode, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("quantgate compare: error: "), r.stderr
    for p in parts:
        assert p in lines[0], (p, lines[0])


def test_bad_input_is_one_line_naming_the_folder_or_page(study, tmp_path):
    s = study
    before = _files(s["set"], s["base"], s["same"])
    gone = sorted(set(s["texts"]) - s["drawn"])[0]
    partial = tmp_path / "partial"
    partial.mkdir()
    for pid, t in s["texts"].items():
        if pid != gone:
            (partial / f"{pid}.md").write_text(t, "utf-8")
    _one_error(quantgate("compare", "--pages", s["set"], s["base"], partial, "--metric", "ned"), DataError.exit_code,
               "cover different pages", f"1 only in {s['base']} ({gone})")

    labeled = sorted(s["drawn"])[0]
    both = [tmp_path / "b2", tmp_path / "c2"]
    for folder in both:
        folder.mkdir()
        for pid, t in s["texts"].items():
            if pid != labeled:
                (folder / f"{pid}.md").write_text(t, "utf-8")
    _one_error(quantgate("compare", "--pages", s["set"], *both, "--metric", "ned"), DataError.exit_code,
               "with truth not compared", labeled)

    binary = tmp_path / "binary"
    binary.mkdir()
    for pid, t in s["texts"].items():
        (binary / f"{pid}.md").write_text(t, "utf-8")
    (binary / f"{gone}.md").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    _one_error(quantgate("compare", "--pages", s["set"], s["base"], binary, "--metric", "ned"), DataError.exit_code,
               str(binary / f"{gone}.md"), "NUL byte")

    a_file = s["base"] / f"{gone}.md"
    _one_error(quantgate("compare", "--pages", s["set"], s["base"], a_file, "--metric", "ned"), UsageError.exit_code,
               str(a_file), "not a folder")
    _one_error(quantgate("compare", "--pages", s["set"], s["base"], s["same"], "--metric", "ned", "--allow-missing"),
               UsageError.exit_code, "--allow-missing")
    assert _files(s["set"], s["base"], s["same"]) == before



def _drawn_study(tmp_path: Path):
    """A stub study's page set with truth on a recorded draw of 20 whole documents and on 10 pages outside it."""
    import shutil

    from tests.support.stub_study import study_yaml

    synth_pages(tmp_path / "answers", 100, seed=7, profile="simple", pages_per_document=1, calibration_fraction=0.1)
    shutil.copytree(tmp_path / "answers", tmp_path / "pages")
    draw, _ = label_sample(tmp_path / "pages", 20, seed=3)
    extra = sorted(p.id for p in load_pageset(tmp_path / "pages").split("heldout") if p.id not in draw.page_ids)[:10]
    drop_truth(tmp_path / "pages", set(draw.page_ids) | set(extra))
    spec = study_yaml(tmp_path / "study.yaml", tmp_path / "answers", {"cand": 0.05}, metrics=["ned"],
                      concurrency=[1], min_pages=5, min_documents=3)
    spec.write_text(spec.read_text().replace(f"path: {(tmp_path / 'answers').resolve()}",
                                             f"path: {(tmp_path / 'pages').resolve()}"))
    return spec, draw, extra


def test_truth_beyond_the_draw_gives_the_study_verdict(tmp_path):
    """A study and `compare --pages` on the study's own runs make the same verdict when truth goes beyond the
    recorded draw: the drawn pages rectify the bound, every page with truth shows the baseline's score (where
    `compare --pages` once dropped the draw for the extra truth)."""
    from quantgate.commands._compare_pages import compare_pages
    from quantgate.study.spec import load_study
    from tests.support.stub_study import run

    spec, draw, extra = _drawn_study(tmp_path)
    summary = run(spec, tmp_path / "out")
    study = next(v for v in summary["verdicts"] if v["variant"] == "cand" and v["metric"] == "ned")
    runs = tmp_path / "out" / "runs"
    cmd = compare_pages(tmp_path / "pages", runs / "bf16", runs / "cand", load_study(spec).verdict_settings("ned"))
    assert study["method"] == "rectified" and study["pages_at_random"] == len(draw.page_ids)
    assert study["pages_with_truth"] == len(draw.page_ids) + len(extra)
    fields = ("verdict", "reason", "method", "mean_bound", "bound_upper", "excess_lower", "pages_at_random",
              "pages_with_truth", "pages_without_truth", "baseline_score", "ci_low", "ci_high")
    assert {f: getattr(cmd, f) for f in fields} == {f: study[f] for f in fields}


def test_an_edited_draw_stops_a_study_before_it_serves(tmp_path):
    """The study refuses an edited draw by the rule `compare --pages` refuses it by, before anything is served."""
    from tests.support.stub_study import run

    spec, _, _ = _drawn_study(tmp_path)
    manifest = tmp_path / "pages" / "pageset.json"
    man = json.loads(manifest.read_text())
    man["label_sample"]["seed"] += 1
    manifest.write_text(json.dumps(man))
    with pytest.raises(DataError, match=rf"{tmp_path / 'pages' / 'pageset.json'}: label_sample is not the draw its "
                                        "seed makes"):
        run(spec, tmp_path / "out")
    assert not (tmp_path / "out" / "runs").exists()
