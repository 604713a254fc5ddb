"""Faults injected and hostile input. lab/2026-12-04-reliability-cases/README.md lists each with its test (the
record behind docs/reliability.md); a test below keeps that table and these tests in sync."""

import json
import re
import signal
import sys

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from quantgate.errors import InputError, QuantgateError, ServerError
from quantgate.serve import load_records, serve_variant
from quantgate.serve.backends import Backend
from quantgate.serve.run import ServeHooks, ServeOptions
from quantgate.serve.server import ManagedServer
from tests.support.paths import REPO

DOC = REPO / "lab" / "2026-12-04-reliability-cases" / "README.md"


class StubBackend(Backend):
    """A managed (killable) stub server, so faults of a real server process can be injected fast."""

    name = "stub"

    def server(self, model, log_path):
        return ManagedServer("stub", lambda port: [sys.executable, "-m", "tests.support.stub", "--port", str(port)],
                             log_path, startup_timeout_s=60)

    def model_name(self, model):
        return "stub"


@pytest.fixture(scope="module")
def pages(tmp_path_factory):
    from quantgate.heldout.synth import synth_pages

    out = tmp_path_factory.mktemp("rel") / "pages"
    synth_pages(out, 8, seed=2, profile="simple", calibration_fraction=0.0)
    return out


@pytest.fixture
def variant(tmp_path):
    v = tmp_path / "variant"
    v.mkdir()
    (v / "config.json").write_text("{}")
    (v / "model.safetensors").write_bytes(b"\0" * 8)
    return v


def test_server_killed_mid_run_then_resumed(pages, variant, tmp_path, monkeypatch):
    import quantgate.serve.client as client

    real = client.append_jsonl
    state = {"n": 0}

    def kill_after_three(path, rec, **kw):
        real(path, rec, **kw)
        state["n"] += 1
        if state["n"] == 3:
            import os

            import psutil

            for p in psutil.Process(os.getpid()).children(recursive=True):
                if "tests.support.stub" in " ".join(p.cmdline()):
                    p.send_signal(signal.SIGKILL)

    monkeypatch.setattr(client, "append_jsonl", kill_after_three)
    run = tmp_path / "run"
    with pytest.raises(ServerError, match="died during the run"):
        serve_variant(variant, pages, StubBackend(), run, ServeOptions(concurrency=[1], max_tokens=8), hooks=ServeHooks(log=lambda s: None))
    first = load_records(run)
    assert len(first) == 8 and 3 <= sum(r.error is None for r in first) < 8  # failures recorded, not raised
    monkeypatch.setattr(client, "append_jsonl", real)
    m = serve_variant(variant, pages, StubBackend(), run, ServeOptions(concurrency=[1], max_tokens=8), hooks=ServeHooks(log=lambda s: None))
    final = load_records(run)
    assert len(final) == 8 and all(r.error is None for r in final)  # failed ones re-sent, nothing twice
    assert m.levels[0].n_requests == 8 and m.levels[0].n_errors == 0
    assert len(load_records(run, latest=False)) > 8  # the failed attempts stay in the file as history


def test_write_failure_keeps_what_was_written(pages, variant, tmp_path, monkeypatch):
    import errno

    import quantgate.serve.client as client

    real = client.append_jsonl
    state = {"n": 0}

    def disk_full(path, rec, **kw):
        state["n"] += 1
        if state["n"] == 4:
            raise OSError(errno.ENOSPC, "No space left on device")
        real(path, rec, **kw)

    monkeypatch.setattr(client, "append_jsonl", disk_full)
    run = tmp_path / "run"
    with pytest.raises(QuantgateError, match="No space left.*rerun to resume"):
        serve_variant(variant, pages, StubBackend(), run, ServeOptions(concurrency=[1], max_tokens=8), hooks=ServeHooks(log=lambda s: None))
    assert len(load_records(run)) == 3
    monkeypatch.setattr(client, "append_jsonl", real)
    serve_variant(variant, pages, StubBackend(), run, ServeOptions(concurrency=[1], max_tokens=8), hooks=ServeHooks(log=lambda s: None))
    recs = load_records(run, latest=False)
    assert len(recs) == 8 and len({r.page_id for r in recs}) == 8


def test_pdf_with_too_many_pages_is_refused(tmp_path):
    import pypdfium2 as pdfium

    from quantgate.heldout.importer import ImportOptions, import_pages

    pdf = pdfium.PdfDocument.new()
    for _ in range(30):
        pdf.new_page(200, 200)
    pdf.save(str(tmp_path / "big.pdf"))
    with pytest.raises(InputError, match=r"big\.pdf: PDF has 30 pages, over the limit of 20"):
        import_pages([tmp_path / "big.pdf"], tmp_path / "out", ImportOptions(max_pdf_pages=20))
    assert not (tmp_path / "out").exists()


# --- property-based: parsers raise only the documented error, naming the file -------------------

json_values = st.recursive(st.none() | st.booleans() | st.floats(allow_nan=True) | st.integers() | st.text(max_size=20),
                           lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=10), c, max_size=5),
                           max_leaves=12)
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@SETTINGS
@given(body=st.dictionaries(st.sampled_from(["name", "rules", "allow_vision", "calibration", "x"]), json_values, max_size=5))
def test_recipe_parser_property(tmp_path, body):
    from quantgate.recipes import load_recipe

    f = tmp_path / "r.yaml"
    f.write_text(yaml.safe_dump(body))
    try:
        load_recipe(f)
    except InputError as e:
        assert str(f) in str(e)


@SETTINGS
@given(rows=st.lists(st.dictionaries(st.sampled_from(["page_id", "ned", "cer", "zzz", "empty"]), json_values,
                                     max_size=4), max_size=5))
def test_score_file_parser_property(tmp_path, rows):
    from quantgate.io.scores import read_scores

    f = tmp_path / "s.jsonl"
    f.write_text("".join(json.dumps(r) + "\n" for r in rows))
    try:
        read_scores(f)
    except InputError as e:
        assert re.search(re.escape(str(f)) + r"(:\d+)?:", str(e))


@SETTINGS
@given(body=st.dictionaries(st.sampled_from(["name", "model", "pages", "variants", "metrics", "margins", "concurrency",
                                             "backend", "q"]), json_values, max_size=7))
def test_study_parser_property(tmp_path, body):
    from quantgate.study import load_study

    f = tmp_path / "s.yaml"
    f.write_text(yaml.safe_dump(body))
    try:
        load_study(f)
    except InputError as e:
        assert str(f) in str(e)


@SETTINGS
@given(recs=st.lists(st.dictionaries(st.sampled_from(["id", "image", "sha256", "width", "height", "source", "split",
                                                      "truth", "checks"]), json_values, max_size=9), max_size=3))
def test_pages_manifest_parser_property(tmp_path, recs):
    from quantgate.io.pageset import load_pageset

    d = tmp_path / "ps"
    d.mkdir(exist_ok=True)
    (d / "pages.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    try:
        load_pageset(d)
    except InputError as e:
        assert "pages.jsonl" in str(e)


def test_reliability_table_matches_the_tests():
    text = DOC.read_text()
    named = set(re.findall(r"`(tests/(?:\w+/)*test_\w+\.py)::(test_\w+)`", text))
    assert len(named) >= 15
    for file, name in named:
        src = (REPO / file).read_text()
        assert f"def {name}(" in src, f"{file}::{name} is in {DOC.relative_to(REPO)} but not in the tests"
