"""A study's ``speed:`` block: each speed level sent in repeated waves into speed.jsonl (apart from the
scored page runs), the waves found again from the records alone, kept per wave in run.json, and each variant's
ratio to the baseline with its interval in summary.json and report.md, labelled ignore_eos. Served by the
stand-in vLLM CLI (``tests.support.fake_vllm``) whose per-token delay (a variant's ``server_env``) makes one
variant measurably faster; quantize is replaced by a folder the stand-in accepts."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import pytest
import yaml

from quantgate.judge.speed import split_waves

FAKE_VLLM = f"{shlex.quote(sys.executable)} -m tests.support.fake_vllm"


@pytest.fixture
def fake_quantize(monkeypatch):
    import quantgate.quantize as qz
    from tests.support.stub_study import fake_quantize as stub_quantize

    def quantize(model, recipe, out, **kw):
        result = stub_quantize(model, recipe, out, **kw)
        if result.reused:
            return result
        # the stand-in vLLM needs a config.json; listed in the manifest, so the gate finds the folder as made
        from quantgate.io.fingerprint import sha256_file
        from quantgate.schema.variant import VariantManifest

        (Path(out) / "config.json").write_text("{}")
        man = json.loads((Path(out) / "quantgate.json").read_text())
        man["files"]["config.json"] = {"sha256": sha256_file(Path(out) / "config.json"), "bytes": 2}
        (Path(out) / "quantgate.json").write_text(json.dumps(man))
        return type(result)(manifest=VariantManifest.model_validate(man), reused=False)

    monkeypatch.setattr(qz, "quantize", quantize)
    monkeypatch.setenv("FAKE_VLLM_START_S", "0.1")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)


def _study(tmp_path: Path, **over) -> Path:
    body = {
        "name": "speed", "model": "unused", "pages": {"synth": {"n": 4, "profile": "simple",
                                                                "calibration_fraction": 0.0}},
        # the candidate streams its tokens four times as fast as the baseline: a clear 1.3x and more even when the
        # other test worker loads both cores (at 2x, the client's and server's own time ate the gap once: 0.96x)
        "variants": [{"name": "bf16", "recipe": "bf16", "server_env": {"FAKE_VLLM_TOKEN_S": "0.04"}},
                     {"name": "fast", "recipe": "bf16", "server_env": {"FAKE_VLLM_TOKEN_S": "0.01"}}],
        "backend": {"name": "vllm", "vllm_cmd": FAKE_VLLM, "compile_cache": "none", "startup_timeout_s": 60,
                    "gpu_memory_utilization": 0.2},
        "concurrency": [1, 4], "max_tokens": 24, "metrics": ["ned"], "min_pages": 2, "resamples": 1000,
        "speed": {"repeats": 3, "ignore_eos": True},
    }
    body.update(over)
    f = tmp_path / "study.yaml"
    f.write_text(yaml.safe_dump(body))
    return f


def _lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines()]


def test_speed_levels_in_waves_with_intervals(tmp_path, fake_quantize):
    from quantgate.study import run_study

    out = tmp_path / "out"
    run_study(_study(tmp_path), out, log=lambda s: None)
    for name in ("bf16", "fast"):
        rdir = out / "runs" / name
        # the scored page runs: the accuracy level for both, the noise level for the baseline only
        levels = {r["concurrency"] for r in _lines(rdir / "requests.jsonl")}
        assert levels == ({1, 4} if name == "bf16" else {1})
        speed = _lines(rdir / "speed.jsonl")
        for c, per in ((1, 3), (4, 4)):
            recs = [r for r in speed if r["concurrency"] == c]
            assert sorted({r["wave"] for r in recs}) == [0, 1, 2] and len(recs) == 3 * per
            assert all(r["completion_tokens"] == 24 and r["finish_reason"] == "length" for r in recs)  # ignore_eos
            complete, partial = split_waves(recs, per)  # the waves found again from the records alone
            assert len(complete) == 3 and not partial
        run = json.loads((rdir / "run.json").read_text())
        assert [(lv["concurrency"], lv["per_wave"], len(lv["waves"]), lv["ignore_eos"]) for lv in run["speed"]] == \
            [(1, 3, 3, True), (4, 4, 3, True)]
    summary = json.loads((out / "summary.json").read_text())
    by = {v["name"]: v for v in summary["variants"]}
    for c in ("1", "4"):
        iv = by["fast"]["speedup_interval"][c]
        assert iv["n_variant"] == iv["n_baseline"] == 3 and iv["ignore_eos"] is True
        assert iv["low"] <= iv["ratio"] <= iv["high"] and iv["ratio"] > 1.3  # the candidate streams 4x faster
        base = by["bf16"]["speedup_interval"][c]
        assert base["ratio"] == pytest.approx(1.0) and base["low"] <= 1.0 <= base["high"]
    md = (out / "report.md").read_text()
    assert "Speed levels in repeated waves (ignore_eos" in md
    row = next(x for x in md.splitlines() if x.startswith("| fast | 4 | 3 × 4 |"))
    assert "(90%, 3 vs 3 waves)" in row and row.endswith("| yes |")


def test_preemptions_are_counted_per_level_from_the_servers_counter_and_shown(tmp_path, fake_quantize):
    """A level whose KV cache runs out (the stand-in's ``FAKE_VLLM_KV_SEQS``: a request arriving
    while 2 are in flight is preempted) measures recomputation too; the count comes from vLLM's own counter on
    /metrics, read before and after each send, is kept per level in run.json and summary.json, said in the report
    and bound by the gate (a summary that hides it is refused)."""
    from quantgate.gate.check import INVALID, gate
    from quantgate.study import run_study

    out = tmp_path / "out"
    small_cache = {"FAKE_VLLM_TOKEN_S": "0.02", "FAKE_VLLM_KV_SEQS": "2"}
    run_study(_study(tmp_path, variants=[{"name": "bf16", "recipe": "bf16", "server_env": {"FAKE_VLLM_TOKEN_S": "0.02"}},
                                         {"name": "small-kv", "recipe": "bf16", "server_env": small_cache}]),
              out, log=lambda s: None)
    runs = {v: json.loads((out / "runs" / v / "run.json").read_text()) for v in ("bf16", "small-kv")}
    assert runs["bf16"]["preemptions"] == {"1": 0, "4": 0}
    small = runs["small-kv"]["preemptions"]
    # c=1 never has 3 in flight (the warm-up request goes alone); at c=4 each of the 3 waves × 4 requests sent
    # together has its 3rd and 4th request preempted
    assert small["1"] == 0 and small["4"] >= 6
    summary = json.loads((out / "summary.json").read_text())
    assert {v["name"]: v["preemptions"] for v in summary["variants"]} == {"bf16": {"1": 0, "4": 0},
                                                                         "small-kv": small}
    md = (out / "report.md").read_text()
    assert f"small-kv: the server preempted requests — {small['4']} at concurrency 4" in md
    assert "bf16: no request preempted at concurrency 1, 4 (the server's own counter)" in md
    assert gate(out).code != INVALID, gate(out).lines
    hidden = json.loads((out / "summary.json").read_text())
    next(v for v in hidden["variants"] if v["name"] == "small-kv")["preemptions"]["4"] = 0
    (out / "summary.json").write_text(json.dumps(hidden))
    code, lines = gate(out)
    assert code == INVALID and "preemptions" in lines[0], lines


def test_a_rerun_sends_only_the_waves_left(tmp_path, fake_quantize):
    from quantgate.study import run_study

    out = tmp_path / "out"
    f = _study(tmp_path, variants=[{"name": "bf16", "recipe": "bf16"}, {"name": "b", "recipe": "bf16"}])
    run_study(f, out, log=lambda s: None, stop_after="serve")
    speed = out / "runs" / "b" / "speed.jsonl"
    lines = speed.read_text().splitlines()
    # cut wave 2 of c=4 short and break one request of wave 1, as an interruption and a failure would
    kept = [json.loads(x) for x in lines if not (json.loads(x)["concurrency"] == 4 and json.loads(x)["wave"] == 2)]
    kept += [json.loads(x) for x in lines if json.loads(x)["concurrency"] == 4 and json.loads(x)["wave"] == 2][:2]
    broken = next(r for r in kept if r["concurrency"] == 4 and r["wave"] == 1)
    broken.update(error="boom", error_kind="infrastructure", output=None)
    # written as the client would have: each record chained to the one before it, from the speed file's anchor
    from quantgate.io.chain import Chain
    from quantgate.schema.base import read_record_file
    from quantgate.schema.run import RunManifest
    from quantgate.serve.run import speed_anchor_of

    chain = Chain(speed_anchor_of(read_record_file(RunManifest, out / "runs" / "b" / "run.json")))
    chained = []
    for r in kept:
        chained.append(chain.link({k: v for k, v in r.items() if k != "prev"}))
        chain.advance(chained[-1])
    speed.write_text("".join(json.dumps(r) + "\n" for r in chained))
    before = len(kept)
    run_study(f, out, log=lambda s: None)
    recs = _lines(speed)
    new = recs[before:]
    assert sorted({(r["concurrency"], r["wave"]) for r in new}) == [(4, 1), (4, 2)] and len(new) == 8
    run = json.loads((out / "runs" / "b" / "run.json").read_text())
    assert [len(lv["waves"]) for lv in run["speed"]] == [3, 3]


def test_speed_needs_three_repeats(tmp_path):
    from quantgate.errors import InputError
    from quantgate.study.spec import load_study

    with pytest.raises(InputError, match="repeats"):
        load_study(_study(tmp_path, speed={"repeats": 2}))


def test_speed_waves_are_labelled_and_budgeted_as_speed(tmp_path, fake_quantize):
    """The c=1 waves were counted as accuracy in the time budget (with 0 requests: their records are
    in speed.jsonl), and the baseline's c=4 waves were shown as its "(noise run)"."""
    from quantgate.study import run_study

    out, said = tmp_path / "out", []
    run_study(_study(tmp_path), out, log=said.append)
    text = "\n".join(said)
    assert text.count("(noise run)") == 1 and "bf16: pages at concurrency 4 (noise run)" in text
    for name in ("bf16", "fast"):
        for c in (1, 4):
            assert f"{name}: speed at concurrency {c} (3 waves)" in text
    stages = [(t["stage"], t["variant"], t["concurrency"]) for t in _lines(out / "timings.jsonl")
              if t["stage"] in ("pages_run", "speed_waves")]
    assert sorted(stages) == sorted([("pages_run", "bf16", 1), ("pages_run", "bf16", 4), ("pages_run", "fast", 1),
                                     *(("speed_waves", v, c) for v in ("bf16", "fast") for c in (1, 4))])
    rows = json.loads((out / "summary.json").read_text())["time_budget"]["rows"]
    parts = {}
    for r in rows:
        if r["part"] in ("accuracy", "speed"):
            parts.setdefault((r["part"], r["variant"]), []).append(r["requests"])
    # accuracy: the scored pages (4 at c=1; the baseline's noise run 4 more); speed: 3 waves x (3 at c=1, 4 at c=4)
    assert parts == {("accuracy", "bf16"): [4, 4], ("accuracy", "fast"): [4],
                     ("speed", "bf16"): [9, 12], ("speed", "fast"): [9, 12]}


def test_speed_profile_is_taken_on_each_variants_own_server_after_its_waves(tmp_path, fake_quantize):
    """``speed.profile``: each variant's server is started with vLLM's profiler armed, and after
    its waves profiles its decode step at the listed levels (``speed/<variant>/c<C>.profile.json``); the report's
    Decode step section shows them beside the speed table; the profiles come after every timed request (the
    trace's stamp follows the last wave's last byte); a rerun keeps them and starts no server."""
    from quantgate.schema.speed import load_step_profile
    from quantgate.study import run_study

    out = tmp_path / "out"
    speed = {"repeats": 3, "ignore_eos": True, "profile": [1, 4], "profile_steps": 6, "profile_delay": 2,
             "profile_max_tokens": 24}
    logs: list[str] = []
    run_study(_study(tmp_path, speed=speed), out, log=logs.append)
    # the study fits its prefill table itself; two BF16 recipes give it no format to fit, and the log says so
    assert any("no prefill table: prefill model: no recipe it is built from quantizes anything" in x for x in logs)
    assert not (out / "speed" / "prefill-table.json").exists()
    for name in ("bf16", "fast"):
        cmd = next(x for x in (out / "runs" / name / "server.log").read_text().splitlines() if x.startswith("$ "))
        assert "--profiler-config" in cmd and str(out / "speed" / name / "trace") in cmd
        last_byte = max(r["end"] for r in _lines(out / "runs" / name / "speed.jsonl"))
        for c in (1, 4):
            p = load_step_profile(out / "speed" / name / f"c{c}.profile.json")
            assert (p.variant, p.concurrency, p.decode_steps) == (name, c, 6)
            trace = out / "speed" / name / p.source
            assert trace.is_file() and trace.stat().st_mtime > last_byte
    timings = [t for t in _lines(out / "timings.jsonl") if t["stage"] == "speed_profile"]
    assert sorted((t["variant"], t["count"]) for t in timings) == [("bf16", 2), ("fast", 2)]
    md = (out / "report.md").read_text()
    assert "## Decode step" in md and "the study's `speed.profile`" in md
    rows = [x for x in md.split("## Decode step")[1].splitlines() if x.startswith("| fast |")]
    assert len(rows) == 2 and all("not measured" not in r.split("|")[4] for r in rows)  # GPU ms per step measured
    assert "| decode profile |" in md  # the time budget names the part
    # a rerun: every wave and profile recorded, nothing to send: no server starts, the profiles are the same files
    before = {f: f.stat().st_mtime_ns for f in (out / "speed").glob("*/c*.profile.json")}
    run_study(_study(tmp_path, speed=speed), out, log=lambda s: None)
    assert {f: f.stat().st_mtime_ns for f in (out / "speed").glob("*/c*.profile.json")} == before
    assert (out / "runs" / "fast" / "server.log").read_text().count("--profiler-config") == 1


@pytest.mark.parametrize("over, msg", [
    ({"speed": {"profile": [8]}}, r"speed\.profile\.0.*8 is not one of the speed levels \[1, 4\]"),
    ({"speed": {"profile": [1, 1]}}, "each level once"),
    ({"speed": {"profile": [1], "profile_max_tokens": 40}}, "profile_max_tokens.*at least 56"),
    ({"speed": {"profile": [1]}, "backend": {"name": "transformers"}}, "vLLM's torch profiler; the backend is "
                                                                       "'transformers'"),
])
def test_a_speed_profile_that_cannot_be_taken_is_refused_when_the_study_is_read(tmp_path, over, msg):
    from quantgate.errors import InputError
    from quantgate.study.spec import load_study

    with pytest.raises(InputError, match=msg):
        load_study(_study(tmp_path, **over))


def test_a_server_flag_that_sets_the_profiler_too_is_refused_before_anything_runs(tmp_path, fake_quantize):
    from quantgate.errors import InputError
    from quantgate.study import run_study

    variants = [{"name": "bf16", "recipe": "bf16"},
                {"name": "fast", "recipe": "bf16", "server_args": ["--profiler-config={}"]}]
    with pytest.raises(InputError, match="variant fast: --profiler-config in the server flags"):
        run_study(_study(tmp_path, variants=variants, speed={"profile": [1]}), tmp_path / "out", log=lambda s: None)
    assert not (tmp_path / "out" / "runs").exists()
