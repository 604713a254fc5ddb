"""benchmarks/parallel_study.py on a hand-made GPU-session results folder: the wall times come from each study's
step (not its own clock), a study that was cut or is incomplete is "not measured", the share and the target
follow from the walls, quantize is split out of the overhead, the load average and the other job's steps are
taken over the study's own window only, and server-log milestones are read as seconds from the log's start."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from quantgate.schema.timings import BudgetRow, TimeBudget
from tests.support.paths import REPO

ROOT = REPO
_spec = importlib.util.spec_from_file_location("parallel_study", ROOT / "benchmarks" / "parallel_study.py")
ps = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ps)

T0 = 1_800_000_000.0
LOG = """(APIServer pid=1) INFO 11-30 23:59:50 [utils.py:1] vLLM API server version 0.26.0
(EngineCore pid=2) INFO 11-30 23:59:58 [core.py:116] Initializing a V1 LLM engine (v0.26.0) with config: x
(EngineCore pid=2) INFO 12-01 00:00:30 [backends.py:391] Compiling a graph for compile range (1, 8192) takes 25 s
(EngineCore pid=2) INFO 12-01 00:01:10 [monitor.py:81] Initial profiling/warmup run took 40.00 s
(EngineCore pid=2) INFO 12-01 00:03:12 [kv_cache_utils.py:2177] GPU KV cache size: 3,702,501 tokens
(EngineCore pid=2) INFO 12-01 00:03:15 [gpu_model_runner.py:6844] Graph capturing finished in 3 secs
(APIServer pid=1) INFO 12-01 00:03:17 [api_server.py:677] Starting vLLM server on http://127.0.0.1:1
"""


def _budget(wall: float, starts: float, gen: float, quantize: float) -> dict:
    rows = [BudgetRow(part="quantize", variant="bf16", wall_s=quantize),
            BudgetRow(part="quantize", variant="x", wall_s=5.0, background=True),  # beside another stage: not counted
            BudgetRow(part="server_start", variant="bf16", wall_s=starts),
            BudgetRow(part="accuracy", variant="bf16", wall_s=gen + 1.0, generation_s=gen, requests=30),
            BudgetRow(part="other", wall_s=wall - quantize - starts - gen - 1.0)]
    return TimeBudget(session="s", wall_s=wall, rows=rows, background_s=5.0, engine_start_s=starts,
                      generation_s=gen, lmeval_s=0.0, overhead_s=wall - starts - gen,
                      overhead_share=(wall - starts - gen) / wall).model_dump()


def _study(root: Path, name: str, *, started: float, wall: float, status: str = "ok", complete: bool = True,
           verdict: str = "within_noise", servers: str = "one_at_a_time", log: str = LOG) -> None:
    sdir = root / "gpu1" / "studies" / name
    (sdir / "runs" / "bf16").mkdir(parents=True)
    (sdir / "runs" / "bf16" / "server.log").write_text(log)
    summary = {"complete": complete, "study": {"servers": servers, "gpus": []},
               "time_budget": _budget(wall - 4.0, 100.0, 20.0, 10.0),
               "verdicts": [{"variant": "fp8", "metric": "ned", "verdict": verdict}],
               "variants": [{"name": "bf16", "files": {"model.safetensors": "aa"}}]}
    (sdir / "summary.json").write_text(json.dumps(summary))
    (sdir / "timings.jsonl").write_text("".join(json.dumps(r) + "\n" for r in [
        {"stage": "quantize", "variant": "bf16", "start": started, "wall_s": 10.0},
        {"stage": "server_start", "variant": "bf16", "start": started + 10, "wall_s": 100.0},
        {"stage": "server_start", "variant": "fp8", "start": started + 12, "wall_s": 90.0}]))
    with open(root / "gpu1" / "status.jsonl", "a") as f:
        f.write(json.dumps({"step": f"study-{name}", "started": started, "status": status, "rc": 0,
                            "wall_s": wall}) + "\n")


@pytest.fixture
def results(tmp_path: Path) -> Path:
    (tmp_path / "gpu0").mkdir()
    (tmp_path / "gpu1").mkdir()
    (tmp_path / "session.json").write_text('{"gpus": 2}')
    _study(tmp_path, "a_parallel_1gpu", started=T0, wall=300.0, servers="all_at_once")
    _study(tmp_path, "b_sequential_1gpu", started=T0 + 400, wall=500.0)
    (tmp_path / "gpu0" / "status.jsonl").write_text("".join(json.dumps(r) + "\n" for r in [
        {"step": "build", "started": T0 - 100, "status": "ok", "wall_s": 150.0},      # overlaps the parallel study
        {"step": "serve", "started": T0 + 600, "status": "ok", "wall_s": 50.0},       # only the sequential one
        {"step": "skipped-one", "started": T0, "status": "skipped", "wall_s": 0.0}]))
    (tmp_path / "gpu1" / "loadavg.jsonl").write_text("".join(
        json.dumps({"t": T0 + t, "load": f"{load} 1.0 1.0"}) + "\n" for t, load in [(10, 2.0), (20, 4.0), (450, 9.0)]))
    return tmp_path


def test_walls_share_and_what_ran_beside(results: Path) -> None:
    r = ps.build(results)
    assert (r["sequential_wall_s"], r["parallel_wall_s"]) == (500.0, 300.0)  # the steps', not the budgets' 296/496
    assert r["parallel_share_of_sequential"] == 0.6 and r["target_met_one_gpu"] is False
    assert r["parallel_2gpu_wall_s"] is None and r["runs"]["parallel_2gpu"]["why_not_measured"] == "not run"
    par, seq = r["runs"]["parallel"], r["runs"]["sequential"]
    assert par["gpu0_steps_beside"] == ["build"] and seq["gpu0_steps_beside"] == ["serve"]
    assert par["load_avg"] == {"mean_1m": 3.0, "max_1m": 4.0, "samples": 2}
    assert seq["load_avg"]["samples"] == 1 and seq["load_avg"]["max_1m"] == 9.0
    assert par["starts"] == {"per_variant_s": {"bf16": 100.0, "fp8": 90.0}, "span_s": 100.0, "sum_s": 190.0}
    assert r["same_verdicts"] is True and r["same_weights"] is True


def test_quantize_is_split_out_of_the_overhead(results: Path) -> None:
    tb = ps.build(results)["runs"]["sequential"]["time_budget"]
    assert tb["quantize_s"] == 10.0  # the background quantize row is not counted
    assert tb["overhead_share_without_quantize"] == pytest.approx((tb["overhead_s"] - 10.0) / tb["wall_s"], abs=1e-4)
    assert tb["overhead_share_without_quantize"] < tb["overhead_share"]


def test_a_cut_or_incomplete_study_is_not_measured(results: Path) -> None:
    _study(results, "c_parallel_2gpu", started=T0 + 1000, wall=200.0, status="timeout", servers="all_at_once")
    r = ps.build(results)
    assert r["parallel_2gpu_wall_s"] is None and r["parallel_2gpu_share_of_sequential"] is None
    assert r["runs"]["parallel_2gpu"]["why_not_measured"] == "step timeout"
    (results / "gpu1" / "studies" / "b_sequential_1gpu" / "summary.json").write_text(json.dumps(
        {**json.loads((results / "gpu1" / "studies" / "b_sequential_1gpu" / "summary.json").read_text()),
         "complete": False}))
    r = ps.build(results)
    assert r["sequential_wall_s"] is None and r["parallel_share_of_sequential"] is None
    assert r["runs"]["sequential"]["why_not_measured"] == "step ok, study incomplete"


def test_different_verdicts_are_reported(results: Path) -> None:
    _study(results, "c_parallel_2gpu", started=T0 + 1000, wall=200.0, verdict="regression", servers="all_at_once")
    r = ps.build(results)
    assert r["parallel_2gpu_share_of_sequential"] == 0.4
    assert r["same_verdicts"] is False


def test_start_phases_from_the_log_span_midnight() -> None:
    ph = ps.start_phases(LOG)
    assert ph == {"engine_init": 8, "compiled": 40, "warmup_done": 80, "kv_cache": 202, "graphs_captured": 205,
                  "api_ready": 207}
    assert ps.start_phases("no timestamps here\n") == dict.fromkeys(ps.MILESTONES)


def test_warmup_to_kv_cache_gap(results: Path) -> None:
    assert ps.build(results)["runs"]["parallel"]["warmup_to_kv_cache_max_s"] == 122


def test_cli_refuses_a_folder_without_gpu1(tmp_path: Path, capsys) -> None:
    assert ps.main([str(tmp_path), "-o", str(tmp_path / "o.json")]) == 2
    assert "no gpu1/" in capsys.readouterr().err and not (tmp_path / "o.json").exists()
