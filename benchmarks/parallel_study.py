"""Parallel variants: the same 4-variant reader study run with its servers one at a time and all at
once (lab/2026-12-03-h200-session-scripts/session/studies-parallel/*.yaml, run by the GPU session's gpu1.sh), read into one JSON with
the keys ``sequential_wall_s`` and ``parallel_wall_s`` (one GPU) and ``parallel_2gpu_wall_s`` (two GPUs), each
run's time budget (engine starts, generation, quantgate's own overhead share), its server starts, verdicts and
weight fingerprints, and what else the machine was doing meanwhile (load average, the other GPU job's steps).

A study's wall time is its step's wall time in the session (the whole ``quantgate study`` process, imports and
report included); the time budget's ``wall_s`` (from the study's own clock) is given beside it. A study that was
cut short or failed gives ``null`` for its wall time ("not measured") and says why.

    python benchmarks/parallel_study.py SESSION_RESULTS [-o benchmarks/results/parallel_study.json]

SESSION_RESULTS: the session's results folder (``gpu1/studies/<name>``, ``gpu1/status.jsonl``,
``gpu1/loadavg.jsonl``, ``gpu0/status.jsonl``, ``session.json``), e.g. an unpacked ``gpu1.tar.gz`` +
``gpu0.tar.gz``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import re
import sys
from pathlib import Path

import pandas as pd

from quantgate.io.fileio import atomic_write_json

sys.path.insert(0, str(Path(__file__).resolve().parent))  # a sibling benchmark, also when loaded by path (tests)
from serving_options import other_steps  # noqa: E402 — the other GPU job's steps that overlapped a window

SCHEMA_VERSION = 1
STUDIES = {"sequential": "b_sequential_1gpu", "parallel": "a_parallel_1gpu", "parallel_2gpu": "c_parallel_2gpu"}
TARGET_SHARE = 0.5  # parallel <= 50 % of sequential on one GPU
# vLLM 0.26's start-up milestones in a server log, in order (log lines carry whole seconds)
MILESTONES = {"engine_init": "Initializing a V1 LLM engine", "compiled": "Compiling a graph for compile range",
              "warmup_done": "Initial profiling/warmup run took", "kv_cache": "GPU KV cache size",
              "graphs_captured": "Graph capturing finished", "api_ready": "Starting vLLM server on"}
LOG_TIME = re.compile(r"\b(\d\d)-(\d\d) (\d\d):(\d\d):(\d\d)\b")


def _jsonl(path: Path) -> list[dict]:
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text("utf-8").splitlines() if line.strip()]


def _step(status: list[dict], name: str) -> dict | None:
    found = [r for r in status if r.get("step") == f"study-{name}"]
    return found[-1] if found else None


def _load(samples: list[dict], t0: float, t1: float) -> dict | None:
    one = [float(s["load"].split()[0]) for s in samples if t0 <= s["t"] <= t1]
    if not one:
        return None
    return {"mean_1m": round(sum(one) / len(one), 2), "max_1m": max(one), "samples": len(one)}


def _starts(timings: list[dict]) -> dict:
    """Per variant, its server start's seconds; and the span from the first start's begin to the last one's end."""
    rows = [t for t in timings if t.get("stage") == "server_start"]
    if not rows:
        return {"per_variant_s": {}, "span_s": None, "sum_s": None}
    span = max(t["start"] + t["wall_s"] for t in rows) - min(t["start"] for t in rows)
    return {"per_variant_s": {t["variant"]: round(t["wall_s"], 1) for t in rows}, "span_s": round(span, 1),
            "sum_s": round(sum(t["wall_s"] for t in rows), 1)}


def start_phases(log_text: str) -> dict[str, int | None]:
    """Seconds from a server log's first timestamped line to each start-up milestone (first occurrence; None
    when absent). Whole seconds: vLLM's log lines carry no finer time."""
    t0, found = None, dict.fromkeys(MILESTONES)
    for line in log_text.splitlines():
        m = LOG_TIME.search(line)
        if not m:
            continue
        mo, d, h, mi, se = map(int, m.groups())
        t = dt.datetime(2000, mo, d, h, mi, se)  # the year is not logged; a start never spans New Year here
        t0 = t0 or t
        for key, text in MILESTONES.items():
            if found[key] is None and text in line:
                found[key] = int((t - t0).total_seconds())
    return found


def one_run(results: Path, name: str) -> dict:
    sdir = results / "gpu1" / "studies" / name
    step = _step(_jsonl(results / "gpu1" / "status.jsonl"), name)
    summary = json.loads((sdir / "summary.json").read_text("utf-8")) if (sdir / "summary.json").is_file() else None
    run: dict = {"folder": f"gpu1/studies/{name}", "step": step}
    if step is None or step.get("status") != "ok" or summary is None or not summary.get("complete"):
        why = "not run" if step is None else f"step {step.get('status')}"
        if summary is not None and not summary.get("complete"):
            why += ", study incomplete"
        run.update(wall_s=None, why_not_measured=why)
    else:
        run["wall_s"] = step["wall_s"]
    study = summary["study"] if summary else None
    run["servers"] = study.get("servers") if study else None
    run["gpus"] = study.get("gpus") if study else None
    tb = (summary or {}).get("time_budget")
    run["time_budget"] = None if tb is None else {
        k: tb[k] for k in ("wall_s", "engine_start_s", "generation_s", "lmeval_s", "overhead_s", "overhead_share",
                           "background_s")} | {"rows": tb["rows"]}
    if tb is not None:  # quantize is a stage of its own in the split; what is left is the harness
        q = sum(r["wall_s"] for r in tb["rows"] if r["part"] == "quantize" and not r["background"])
        run["time_budget"]["quantize_s"] = round(q, 3)
        run["time_budget"]["overhead_share_without_quantize"] = round((tb["overhead_s"] - q) / tb["wall_s"], 4)
    run["starts"] = _starts(_jsonl(sdir / "timings.jsonl"))
    run["start_phases_s"] = {p.parent.name: start_phases(p.read_text("utf-8", errors="replace"))
                             for p in sorted((sdir / "runs").glob("*/server.log"))}
    gaps = [ph["kv_cache"] - ph["warmup_done"] for ph in run["start_phases_s"].values()
            if ph["kv_cache"] is not None and ph["warmup_done"] is not None]
    run["warmup_to_kv_cache_max_s"] = max(gaps) if gaps else None  # the phase the one-GPU parallel starts lost
    run["verdicts"] = {f"{v['variant']} {v['metric']}": v["verdict"] for v in (summary or {}).get("verdicts", [])}
    run["weights"] = {v["name"]: v.get("files", {}).get("model.safetensors") for v in (summary or {}).get("variants", [])}
    if step is not None and step.get("wall_s"):
        t0, t1 = step["started"], step["started"] + step["wall_s"]
        run["load_avg"] = _load(_jsonl(results / "gpu1" / "loadavg.jsonl"), t0, t1)
        run["gpu0_steps_beside"] = other_steps(results, (t0, t1))
    return run


def build(results: Path) -> dict:
    runs = {key: one_run(results, name) for key, name in STUDIES.items()}
    seq, par, par2 = (runs[k]["wall_s"] for k in ("sequential", "parallel", "parallel_2gpu"))
    share = round(par / seq, 3) if seq and par else None
    share2 = round(par2 / seq, 3) if seq and par2 else None
    measured = [r for r in runs.values() if r["wall_s"] is not None]
    same_verdicts = (len({json.dumps(r["verdicts"], sort_keys=True) for r in measured}) == 1) if len(measured) > 1 else None
    same_weights = (len({json.dumps(r["weights"], sort_keys=True) for r in measured}) == 1) if len(measured) > 1 else None
    session = json.loads((results / "session.json").read_text("utf-8")) if (results / "session.json").is_file() else {}
    return {
        "schema_version": SCHEMA_VERSION, "session": session,
        "sequential_wall_s": seq, "parallel_wall_s": par, "parallel_2gpu_wall_s": par2,
        "parallel_share_of_sequential": share, "parallel_2gpu_share_of_sequential": share2,
        "target_share": TARGET_SHARE, "target_met_one_gpu": None if share is None else share <= TARGET_SHARE,
        "overhead_share": {k: (r["time_budget"] or {}).get("overhead_share") for k, r in runs.items()},
        "overhead_share_without_quantize": {k: (r["time_budget"] or {}).get("overhead_share_without_quantize")
                                            for k, r in runs.items()},
        "same_verdicts": same_verdicts, "same_weights": same_weights,
        "runs": runs,
    }


def table(result: dict) -> pd.DataFrame:
    rows = []
    for key, r in result["runs"].items():
        tb = r["time_budget"] or {}
        rows.append({"run": key, "servers": r["servers"], "gpus": r["gpus"], "wall_s": r["wall_s"],
                     "starts_span_s": r["starts"]["span_s"], "starts_sum_s": r["starts"]["sum_s"],
                     "engine_start_s": tb.get("engine_start_s"), "generation_s": tb.get("generation_s"),
                     "overhead_share": tb.get("overhead_share"), "load_mean": (r.get("load_avg") or {}).get("mean_1m")})
    return pd.DataFrame(rows)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("results", type=Path, help="the GPU session's results folder")
    ap.add_argument("-o", "--out", type=Path, default=Path("benchmarks/results/parallel_study.json"))
    a = ap.parse_args(argv)
    if not (a.results / "gpu1").is_dir():
        print(f"error: {a.results}: no gpu1/ folder; give the session's results folder (unpacked gpu1.tar.gz)",
              file=sys.stderr)
        return 2
    result = build(a.results)
    atomic_write_json(a.out, result)
    print(table(result).to_string(index=False))
    print(f"sequential {result['sequential_wall_s']} s, parallel {result['parallel_wall_s']} s "
          f"(share {result['parallel_share_of_sequential']}), two GPUs {result['parallel_2gpu_wall_s']} s; "
          f"same verdicts: {result['same_verdicts']}; wrote {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
