"""Real servers, one record per page and level, resume after a kill, failures recorded."""

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from quantgate.errors import InputError, ServerError
from quantgate.serve import load_records, make_backend, serve_variant
from quantgate.serve.run import ServeHooks, ServeOptions
from quantgate.serve.server import ManagedServer


def _qg(*args, **kw):
    return subprocess.Popen([sys.executable, "-m", "quantgate", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, **kw)


def _stub(tmp_path, *extra):
    return ManagedServer("stub", lambda port: [sys.executable, "-m", "tests.support.stub", "--port", str(port), *extra],
                         tmp_path / f"stub{len(extra)}.log", startup_timeout_s=60)


@pytest.fixture(scope="module")
def pages(tmp_path_factory):
    from quantgate.heldout.synth import synth_pages

    out = tmp_path_factory.mktemp("serve") / "pages"
    synth_pages(out, 6, seed=5, profile="simple", calibration_fraction=0.0)
    return out


def test_one_record_per_page_per_level_and_scores(tiny_models, pages, tmp_path):
    run = tmp_path / "run"
    m = serve_variant(tiny_models["qwen3_5"], pages, make_backend("transformers"), run, ServeOptions(concurrency=[1, 2], max_tokens=4), hooks=ServeHooks(log=lambda s: None))
    recs = load_records(run)
    keys = [(r.page_id, r.concurrency) for r in recs]
    assert len(keys) == len(set(keys)) == 12
    assert all(r.error is None and r.completion_tokens and r.ttft_s is not None and r.latency_s >= r.ttft_s for r in recs)
    assert [lv.concurrency for lv in m.levels] == [1, 2] and all(lv.pages_per_s > 0 for lv in m.levels)
    assert m.levels[0].latency_s["p90"] >= m.levels[0].latency_s["p50"] > 0
    assert m.server_command[1] == "serve" and json.loads((run / "run.json").read_text())["backend"] == "transformers"
    # the run feeds `quantgate score` directly
    r = subprocess.run([sys.executable, "-m", "quantgate", "score", "--pages", str(pages), "--predictions", str(run),
                        "-o", str(tmp_path / "s.jsonl"), "--metrics", "ned", "--concurrency", "2"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert len((tmp_path / "s.jsonl").read_text().splitlines()) == 6


def test_kill_midway_and_resume(tiny_models, pages, tmp_path):
    run = tmp_path / "run"
    args = ["serve", str(tiny_models["llava"]), "--pages", str(pages), "--concurrency", "1", "--max-tokens", "24",
            "-o", str(run)]
    p = _qg(*args)
    deadline = time.time() + 240
    while time.time() < deadline:
        n = len((run / "requests.jsonl").read_text().splitlines()) if (run / "requests.jsonl").exists() else 0
        if n >= 2:
            break
        time.sleep(0.2)
    p.send_signal(signal.SIGKILL)
    p.wait()
    first = load_records(run)
    assert 2 <= len(first) < 6, "killed too late to test resumption"
    # the server died with quantgate (no orphan holding the port)
    time.sleep(2)
    assert not [line for line in subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout.splitlines()
                if "transformers serve" in line and str(tiny_models["llava"]) in line]
    p = _qg(*args)
    out, err = p.communicate(timeout=300)
    assert p.returncode == 0, err
    recs = load_records(run)
    ids = [r.page_id for r in recs]
    assert len(ids) == len(set(ids)) == 6  # no duplicates, no gaps
    assert [r.model_dump() for r in recs[: len(first)]] == [r.model_dump() for r in first]  # nothing rewritten


def test_torn_last_line_is_dropped_on_resume(pages, tmp_path):
    run = tmp_path / "run"
    with _stub(tmp_path) as srv:
        backend = make_backend("openai", endpoint=srv.base_url, model="stub")
        serve_variant(Path("stub"), pages, backend, run, ServeOptions(concurrency=[1], max_tokens=8), hooks=ServeHooks(log=lambda s: None))
        lines = (run / "requests.jsonl").read_text().splitlines()
        torn = "\n".join(lines[:3]) + "\n" + lines[3][:40]  # a crash in the middle of writing record 4
        (run / "requests.jsonl").write_text(torn)
        serve_variant(Path("stub"), pages, backend, run, ServeOptions(concurrency=[1], max_tokens=8), hooks=ServeHooks(log=lambda s: None))
    recs = load_records(run)
    assert sorted(r.page_id for r in recs) == sorted({r.page_id for r in recs}) and len(recs) == 6


def test_server_that_fails_to_start_reports_its_log(tiny_models, pages, tmp_path):
    import shutil

    bad = tmp_path / "bad"
    shutil.copytree(tiny_models["llava"], bad)
    cfg = json.loads((bad / "config.json").read_text())
    cfg["text_config"]["hidden_size"] = 272  # weights no longer fit the config
    (bad / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(ServerError, match=r"exited with code \d+ before it was healthy.*\n(.|\n)*Error"):
        serve_variant(bad, pages, make_backend("transformers"), tmp_path / "run", ServeOptions(max_tokens=4), hooks=ServeHooks(log=lambda s: None))


@pytest.mark.parametrize("fault,expect", [("hang", "timeout after 2 s"), ("500", "HTTP 500"),
                                          ("badchunk", "malformed stream chunk"),
                                          ("notopenai", "not an OpenAI chat")])
def test_faulty_requests_are_recorded_and_the_run_goes_on(pages, tmp_path, fault, expect):
    run = tmp_path / "run"
    with _stub(tmp_path, "--fault", fault, "--every", "3") as srv:
        backend = make_backend("openai", endpoint=srv.base_url, model="stub")
        m = serve_variant(Path("stub"), pages, backend, run, ServeOptions(concurrency=[2], max_tokens=8, timeout_s=2), hooks=ServeHooks(log=lambda s: None))
    recs = load_records(run)
    assert len(recs) == 6
    bad = [r for r in recs if r.error]
    # the warm-up took request 1, so requests 3 and 6 of 7 fail: two of the six pages
    assert len(bad) == 2 and all(expect in r.error for r in bad), [r.error for r in bad]
    assert all(r.output for r in recs if not r.error)
    assert m.levels[0].n_errors == 2


def test_unreadable_page_image_is_an_error_for_that_page(pages, tmp_path):
    import shutil

    ps = tmp_path / "ps"
    shutil.copytree(pages, ps)
    first = json.loads((ps / "pages.jsonl").read_text().splitlines()[1])
    (ps / first["image"]).unlink()
    with _stub(tmp_path) as srv:
        serve_variant(Path("stub"), ps, make_backend("openai", endpoint=srv.base_url, model="s"), tmp_path / "r", ServeOptions(concurrency=[1], max_tokens=8), hooks=ServeHooks(log=lambda s: None))
    recs = {r.page_id: r for r in load_records(tmp_path / "r")}
    assert len(recs) == 6 and "image unreadable" in recs[first["id"]].error
    assert sum(r.error is None for r in recs.values()) == 5


def test_taken_port_picks_another(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        taken = s.getsockname()[1]
        srv = _stub(tmp_path).start(port=taken)
        try:
            assert srv.port != taken and srv.alive()
        finally:
            srv.stop()


def test_not_a_model_folder(pages, tmp_path):
    (tmp_path / "v").mkdir()
    with pytest.raises(InputError, match="not a model folder"):
        serve_variant(tmp_path / "v", pages, make_backend("transformers"), tmp_path / "r", hooks=ServeHooks(log=lambda s: None))


def test_a_different_run_is_not_overwritten(pages, tmp_path):
    with _stub(tmp_path) as srv:
        b = make_backend("openai", endpoint=srv.base_url, model="s")
        serve_variant(Path("s"), pages, b, tmp_path / "r", ServeOptions(max_tokens=8), hooks=ServeHooks(log=lambda s: None))
        before = (tmp_path / "r" / "requests.jsonl").read_bytes()
        with pytest.raises(InputError, match="--overwrite"):
            serve_variant(Path("s"), pages, b, tmp_path / "r", ServeOptions(max_tokens=9), hooks=ServeHooks(log=lambda s: None))
    assert (tmp_path / "r" / "requests.jsonl").read_bytes() == before


def test_cli_serve_prints_table(pages, tmp_path):
    with _stub(tmp_path) as srv:
        p = _qg("serve", "stub", "--backend", "openai", "--endpoint", srv.base_url, "--pages", str(pages),
                "--concurrency", "1,4", "-o", str(tmp_path / "r"), env={**os.environ})
        out, err = p.communicate(timeout=120)
    assert p.returncode == 0, err
    assert "pages/s" in out and "highest concurrency with p90 latency" in out
    assert len(out.strip().splitlines()) >= 4


def test_speed_sweep_options_waves_and_ignore_eos(pages, tmp_path):
    # --waves sends ceil(waves x c) pages per level (at least 3); --ignore-eos reaches the server and
    # fixes the output length; both are part of the run's identity.
    with _stub(tmp_path) as srv:
        b = make_backend("openai", endpoint=srv.base_url, model="s")
        m = serve_variant(Path("s"), pages, b, tmp_path / "r", ServeOptions(concurrency=[1, 4], max_tokens=7, ignore_eos=True, waves=1.0), hooks=ServeHooks(log=lambda s: None))
        recs = [json.loads(x) for x in (tmp_path / "r" / "requests.jsonl").read_text().splitlines()]
        assert sorted(r["concurrency"] for r in recs) == [1, 1, 1, 4, 4, 4, 4]
        assert {(r["completion_tokens"], r["finish_reason"]) for r in recs} == {(7, "length")}
        assert m.ignore_eos and m.waves == 1.0 and [lv.n_requests for lv in m.levels] == [3, 4]
        with pytest.raises(InputError, match="--overwrite"):
            serve_variant(Path("s"), pages, b, tmp_path / "r", ServeOptions(concurrency=[1], max_tokens=7), hooks=ServeHooks(log=lambda s: None))
        with pytest.raises(InputError, match="--waves"):
            serve_variant(Path("s"), pages, b, tmp_path / "r2", ServeOptions(waves=0), hooks=ServeHooks(log=lambda s: None))


def test_page_images_are_read_off_the_event_loop(tmp_path):
    """A page image read on the event loop stalls every stream in flight (their TTFT and latency grow
    by the read time): images are read in worker threads, and one that cannot be read is still that
    page's recorded error."""
    import asyncio
    import threading

    from quantgate.serve.client import RequestSpec, run_level

    readers: list[int] = []

    def load_ok():
        readers.append(threading.get_ident())
        return b"\x89PNG not really"

    def load_gone():
        readers.append(threading.get_ident())
        raise OSError("gone")

    async def level(spec):
        return threading.get_ident(), await run_level(spec, [("a", load_ok), ("b", load_gone), ("c", load_ok)], 2,
                                                      tmp_path / "requests.jsonl", "s")

    with _stub(tmp_path) as srv:
        loop_thread, recs = asyncio.run(level(RequestSpec(base_url=srv.base_url, model="s", prompt="p", max_tokens=4)))
    assert len(readers) == 4 and loop_thread not in readers  # 3 pages + the warm-up's read
    errors = {r.page_id: r.error for r in recs}
    assert errors["a"] is None and errors["c"] is None and errors["b"] == "image unreadable: gone"
    assert len((tmp_path / "requests.jsonl").read_text().splitlines()) == 3
