"""Where a study's servers run: ``servers: all_at_once`` starts every variant's server together
(their starts overlap) and serves pages only when every start has ended; ``one_at_a_time`` (what the default,
``auto``, settles on without a GPU to measure: test_study_overlap.py) starts each after the previous variant's
pages; per-variant ``server_env`` and ``gpus`` reach the server process and run.json. Served by the stand-in
vLLM CLI (``tests.support.fake_vllm``), its start slowed to 1.5 s so overlap is measurable; quantize is replaced
by a folder the stand-in accepts."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import pytest
import yaml

from quantgate.errors import InputError
from quantgate.serve.run import ServeHooks, ServeOptions

FAKE_VLLM = f"{shlex.quote(sys.executable)} -m tests.support.fake_vllm"
START_S = 1.5


@pytest.fixture
def fake_quantize(monkeypatch):
    import quantgate.quantize as qz
    from tests.support.stub_study import fake_quantize as stub_quantize

    def quantize(model, recipe, out, **kw):
        result = stub_quantize(model, recipe, out, **kw)  # a small variant folder, reused when present
        (Path(out) / "config.json").write_text("{}")
        return result

    monkeypatch.setattr(qz, "quantize", quantize)
    monkeypatch.setenv("FAKE_VLLM_START_S", str(START_S))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)


def _study(tmp_path: Path, **over) -> Path:
    body = {
        "name": "servers", "model": "unused", "pages": {"synth": {"n": 4, "profile": "simple",
                                                                  "calibration_fraction": 0.0}},
        "variants": [{"name": "bf16", "recipe": "bf16"},
                     {"name": "bi", "recipe": "bf16", "server_env": {"VLLM_BATCH_INVARIANT": "1"}},
                     {"name": "kv", "recipe": "bf16", "server_args": ["--kv-cache-dtype", "fp8"]}],
        "backend": {"name": "vllm", "vllm_cmd": FAKE_VLLM, "compile_cache": "none", "startup_timeout_s": 60,
                    "gpu_memory_utilization": 0.2, "extra_args": ["--kv-cache-memory-bytes", "1073741824"]},
        "concurrency": [1], "max_tokens": 8, "metrics": ["ned"], "min_pages": 2, "resamples": 1000,
    }
    body.update(over)
    f = tmp_path / "study.yaml"
    f.write_text(yaml.safe_dump(body))
    return f


def _timings(out: Path) -> list[dict]:
    return [json.loads(x) for x in (out / "timings.jsonl").read_text().splitlines()]


def _run(out: Path, name: str) -> dict:
    return json.loads((out / "runs" / name / "run.json").read_text())


def test_all_at_once_overlaps_the_starts_and_serves_after_them(tmp_path, fake_quantize):
    from quantgate.study import run_study

    out = tmp_path / "out"
    run_study(_study(tmp_path, servers="all_at_once", gpus=[0, 1]), out, log=lambda s: None, stop_after="score")
    t = _timings(out)
    starts = [r for r in t if r["stage"] == "server_start"]
    runs = [r for r in t if r["stage"] == "pages_run"]
    assert sorted(r["variant"] for r in starts) == ["bf16", "bi", "kv"] and all(r["background"] for r in starts)
    assert all(r["wall_s"] >= START_S for r in starts)
    # all three started before the first one was healthy: the starts overlap
    assert max(r["start"] for r in starts) < min(r["start"] + r["wall_s"] for r in starts)
    # no page was sent while a server was still starting
    assert min(r["start"] for r in runs) >= max(r["start"] + r["wall_s"] for r in starts) - 0.01
    for name, gpu in (("bf16", "0"), ("bi", "1"), ("kv", "0")):
        run = _run(out, name)
        assert run["layout"]["servers"] == "all_at_once" and run["layout"]["servers_in_study"] == 3
        assert run["layout"]["gpu"] == gpu and run["engine"]["env"]["CUDA_VISIBLE_DEVICES"] == gpu
    assert _run(out, "bi")["layout"]["env"] == {"VLLM_BATCH_INVARIANT": "1"}
    assert _run(out, "bi")["engine"]["env"]["VLLM_BATCH_INVARIANT"] == "1"  # reached the server process
    assert "VLLM_BATCH_INVARIANT" not in _run(out, "bf16")["engine"]["env"]
    assert _run(out, "kv")["engine"]["kv_cache_dtype"] == "fp8" and _run(out, "bf16")["engine"]["kv_cache_dtype"] != "fp8"

    # a rerun with nothing left to serve starts no server and keeps each run's layout
    before = {n: _run(out, n)["layout"] for n in ("bf16", "bi", "kv")}
    run_study(_study(tmp_path, servers="all_at_once", gpus=[0, 1]), out, log=lambda s: None, stop_after="score")
    assert len([r for r in _timings(out) if r["stage"] == "server_start"]) == 3
    assert {n: _run(out, n)["layout"] for n in before} == before


@pytest.mark.parametrize("servers", ["all_at_once", "one_at_a_time"])
def test_all_at_once_starts_each_server_as_its_variant_is_quantized(tmp_path, fake_quantize, monkeypatch, servers):
    """all_at_once: quantizing the later variants runs beside the earlier variants' starts (the study waits
    for the longer of the two, not their sum); one_at_a_time: no server starts before every variant is
    quantized."""
    import time

    import quantgate.quantize as qz
    from quantgate.study import run_study

    fast = qz.quantize

    def slow(*a, **kw):
        time.sleep(0.6)
        return fast(*a, **kw)

    monkeypatch.setattr(qz, "quantize", slow)
    out = tmp_path / "out"
    run_study(_study(tmp_path, servers=servers), out, log=lambda s: None, stop_after="score")
    t = _timings(out)
    quant = {r["variant"]: r for r in t if r["stage"] == "quantize"}
    start = {r["variant"]: r for r in t if r["stage"] == "server_start"}
    last_quantized = max(r["start"] + r["wall_s"] for r in quant.values())
    if servers == "all_at_once":
        assert start["bf16"]["start"] < quant["kv"]["start"]  # bf16's server was starting while kv was quantized
        assert start["bf16"]["start"] >= quant["bf16"]["start"] + quant["bf16"]["wall_s"] - 0.01  # not before
        assert start["bi"]["start"] >= quant["bi"]["start"] + quant["bi"]["wall_s"] - 0.01
    else:
        assert min(r["start"] for r in start.values()) >= last_quantized - 0.01


def test_one_at_a_time_starts_each_server_after_the_previous_pages(tmp_path, fake_quantize):
    from quantgate.study import run_study

    out = tmp_path / "out"
    run_study(_study(tmp_path), out, log=lambda s: None, stop_after="score")
    t = _timings(out)
    order = ["bf16", "bi", "kv"]
    start = {r["variant"]: r for r in t if r["stage"] == "server_start"}
    pages_end = {v: max(r["start"] + r["wall_s"] for r in t if r["stage"] == "pages_run" and r["variant"] == v)
                 for v in order}
    for prev, nxt in zip(order, order[1:], strict=False):
        assert start[nxt]["start"] >= pages_end[prev] - 0.01
    layout = _run(out, "kv")["layout"]
    placement = layout.pop("placement")  # without a pool the servers inherit the devices, one at a time
    assert layout == {"schema_version": 1, "servers": "one_at_a_time", "servers_in_study": 3, "gpu": None, "env": {}}
    assert (placement["placed_by"], placement["gpus"], placement["wave"], placement["parallel"]) == \
        ("inherited", None, 2, {"tensor_parallel_size": 1, "data_parallel_size": 1})
    assert "CUDA_VISIBLE_DEVICES" not in _run(out, "kv")["engine"]["env"]


@pytest.mark.parametrize("over, field", [
    ({"servers": "all_at_once", "backend": {"name": "vllm", "vllm_cmd": FAKE_VLLM}}, "servers"),
    ({"backend": {"name": "openai", "endpoint": "http://127.0.0.1:9/v1", "model": "m"},
      "variants": [{"name": "bf16", "recipe": "bf16"}, {"name": "x", "recipe": "bf16", "server_env": {"A": "1"}}]},
     "variants.1.server_env"),
    ({"backend": {"name": "openai", "endpoint": "http://127.0.0.1:9/v1", "model": "m"}, "gpus": [0],
      "variants": [{"name": "bf16", "recipe": "bf16"}, {"name": "x", "recipe": "bf16"}]}, "gpus"),
    ({"variants": [{"name": "bf16", "recipe": "bf16"}, {"name": "x", "recipe": "bf16", "server_env": {"1A": "1"}}]},
     "server_env"),
    ({"gpus": [0, 1], "variants": [{"name": "bf16", "recipe": "bf16"},
                                   {"name": "x", "recipe": "bf16", "server_env": {"CUDA_VISIBLE_DEVICES": "1"}}]},
     "variants.1.server_env"),
])
def test_layouts_that_cannot_work_are_refused_before_anything_runs(tmp_path, over, field):
    from quantgate.study.spec import load_study

    with pytest.raises(InputError, match=field.replace(".", r"\.")):
        load_study(_study(tmp_path, **over))


def test_all_at_once_with_a_gpu_per_variant_needs_no_memory_split(tmp_path):
    from quantgate.study.spec import load_study

    st = load_study(_study(tmp_path, servers="all_at_once", gpus=[0, 1, 2],
                           backend={"name": "vllm", "vllm_cmd": FAKE_VLLM}))
    assert st.servers == "all_at_once" and st.gpus == [0, 1, 2]


def test_a_run_served_with_other_server_flags_or_env_is_not_resumed(tmp_path, fake_quantize):
    """A rerun whose variant gained --kv-cache-dtype fp8 (or a server_env) reused every record served without
    it: the 'FP8 KV cache' variant was judged on BF16-cache pages. The run's flags and env are now its identity."""
    from quantgate.heldout.synth import synth_pages
    from quantgate.schema.run import ServerLayout
    from quantgate.serve import serve_variant
    from quantgate.serve.backends import make_backend

    pages = tmp_path / "pages"
    synth_pages(pages, 3, seed=5, profile="simple", calibration_fraction=0.0)
    variant = tmp_path / "v"
    variant.mkdir()
    (variant / "config.json").write_text("{}")
    (variant / "model.safetensors").write_bytes(b"\0" * 8)

    def serve(extra=(), env=None, overwrite=False):
        b = make_backend("vllm", vllm_cmd=FAKE_VLLM, compile_cache="none", startup_timeout_s=60, extra_args=list(extra))
        layout = ServerLayout(servers="one_at_a_time", servers_in_study=1, env=env or {}) if env is not None else None
        return serve_variant(variant, pages, b, tmp_path / "run", ServeOptions(concurrency=[1], max_tokens=8, overwrite=overwrite), hooks=ServeHooks(layout=layout, log=lambda s: None))

    first = serve()
    assert first.server_args == [] and first.server_env == {}
    assert serve().server_command == first.server_command  # same flags: resumed, nothing re-sent
    for extra, env in ((["--kv-cache-dtype", "fp8"], None), ((), {"VLLM_BATCH_INVARIANT": "1"})):
        with pytest.raises(InputError, match="holds a run"):
            serve(extra, env)
    again = serve(["--kv-cache-dtype", "fp8"], overwrite=True)
    assert again.server_args == ["--kv-cache-dtype", "fp8"] and again.engine.kv_cache_dtype == "fp8"


def test_the_next_vllm_server_starts_beside_the_current_one_only_when_both_fit(tmp_path):
    from quantgate.study.placement import may_run_together, plan_placement
    from quantgate.study.spec import load_study

    def may(**over):
        st = load_study(_study(tmp_path, **over))
        return may_run_together(plan_placement(st), st.variants[0].name, st.variants[1].name)

    vllm = {"name": "vllm", "vllm_cmd": FAKE_VLLM}
    assert not may(backend=vllm)  # each takes 0.9 of the GPU by default: vLLM would refuse the second
    assert may(backend={**vllm, "gpu_memory_utilization": 0.4})
    assert may(backend=vllm, gpus=[0, 1]) and not may(backend=vllm, gpus=[0])
    assert may(backend={"name": "transformers"})


def test_closing_a_server_that_is_still_starting_cancels_the_start(tmp_path, monkeypatch):
    """A study interrupted while its servers compile (all_at_once) waited for each start to end — up to its
    startup timeout (minutes under vLLM) — before stopping it. close() now cancels the start: it returns at
    once and the process is gone."""
    import time

    from quantgate.serve.backends import make_backend
    from quantgate.serve.server import SharedServer

    monkeypatch.setenv("FAKE_VLLM_START_S", "60")
    variant = tmp_path / "v"
    variant.mkdir()
    (variant / "config.json").write_text("{}")
    (variant / "model.safetensors").write_bytes(b"\0" * 8)
    b = make_backend("vllm", vllm_cmd=FAKE_VLLM, compile_cache="none", startup_timeout_s=300)
    srv = SharedServer(b, variant, tmp_path / "server.log", log=lambda s: None)
    srv.prestart()
    deadline = time.monotonic() + 30
    while (srv._server is None or srv._server.proc is None) and time.monotonic() < deadline:
        time.sleep(0.05)
    proc = srv._server.proc
    assert proc is not None and proc.poll() is None  # launched, not yet healthy
    t0 = time.monotonic()
    srv.close()
    assert time.monotonic() - t0 < 20 and proc.poll() is not None
    with pytest.raises(Exception, match="cancelled|exited"):
        srv.endpoint()
