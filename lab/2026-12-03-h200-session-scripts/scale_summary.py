"""Issue 31, item 4: the numbers of a scale session (lab/2026-12-03-h200-session-scripts/session/scale.sh) from the files it wrote —
per layout of the BF16 4B model (TP=1, TP=2, DP=2) the start seconds, tok/s per request at c=1 and output tok/s
at c=32 and 64; the two fp8-dynamic builds (one GPU; two under --max-memory) with their peaks per device and
whether their weights are byte-identical; the reader study's wall time, placement and verdicts. A part whose
step did not finish is written as not measured, with the step's status.

    python lab/2026-12-03-h200-session-scripts/scale_summary.py RESULTS/scale -o RESULTS/scale/scale.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def _load(p: Path):
    try:
        return json.loads(p.read_text())
    except (OSError, ValueError):
        return None


def _steps(d: Path) -> dict[str, dict]:
    out = {}
    f = d / "status.jsonl"
    if f.is_file():
        for line in f.read_text().splitlines():
            if line.strip():
                r = json.loads(line)
                out[r.get("step")] = r
    return out


def _not_measured(steps: dict, name: str) -> dict:
    s = steps.get(name) or {}
    return {"measured": False, "why": f"step {name}: {s.get('status', 'did not run')}"}


def layout(run: dict) -> dict:
    cmd = run.get("server_command") or []

    def flag(f: str) -> int:
        return int(cmd[cmd.index(f) + 1]) if f in cmd else 1

    lv = {x["concurrency"]: x for x in run.get("levels", [])}
    eng = run.get("engine") or {}
    return {"measured": True, "tensor_parallel_size": flag("--tensor-parallel-size"),
            "data_parallel_size": flag("--data-parallel-size"), "start_s": eng.get("start_s"),
            "compile_start": eng.get("compile_start"),
            "tok_s_per_request_c1": (lv.get(1) or {}).get("per_request_tokens_per_s_p50"),
            "out_tok_s": {str(c): round(lv[c]["output_tokens_per_s"], 1) for c in (1, 32, 64) if c in lv},
            "ttft_p50_s": {str(c): lv[c]["ttft_s"]["p50"] for c in (1, 32, 64) if c in lv},
            "errors": sum(x["n_errors"] for x in lv.values()), "env": eng.get("env", {})}


def build(man: dict) -> dict:
    return {"measured": True, "wall_s": man.get("wall_s"), "peak_gpu_mb_per_device": man.get("peak_gpu_mb_per_device"),
            "devices": (man.get("devices") or {}).get("devices"),
            "max_memory": (man.get("devices") or {}).get("max_memory"),
            "bytes_per_device": (man.get("devices") or {}).get("bytes_per_device"),
            "weights": {k: f["sha256"] for k, f in man.get("files", {}).items() if k.endswith(".safetensors")}}


def study(d: Path) -> dict:
    summ = _load(d / "summary.json")
    if summ is None:
        return {"measured": False}
    runs = {}
    for r in sorted((d / "runs").glob("*/run.json")):
        run = _load(r) or {}
        placed = (run.get("layout") or {}).get("placement") or {}
        runs[r.parent.name] = {"gpus": placed.get("gpus"), "wave": placed.get("wave"),
                               "tensor_parallel_size": (placed.get("parallel") or {}).get("tensor_parallel_size"),
                               "shares_gpu_with": placed.get("shares_gpu_with"),
                               "start_s": (run.get("engine") or {}).get("start_s")}
    tb = summ.get("time_budget") or {}
    return {"measured": True, "wall_s": tb.get("wall_s"), "engine_start_s": tb.get("engine_start_s"),
            "generation_s": tb.get("generation_s"), "placement": runs,
            "verdicts": [{k: v.get(k) for k in ("variant", "metric", "verdict", "reason", "delta", "noise_floor",
                                                "noise_layout")} for v in summ.get("verdicts", [])]}


def summarize(d: Path) -> dict:
    steps = _steps(d)
    out: dict = {"schema_version": 1, "gpus": (d / "gpu.txt").read_text().strip().splitlines()
                 if (d / "gpu.txt").is_file() else None, "steps": {k: v.get("status") for k, v in steps.items()}}
    out["serve_4b_bf16"] = {}
    for name in ("tp1", "tp2", "dp2"):
        run = _load(d / f"serve-{name}" / "run.json")
        ok = run is not None and (steps.get(f"serve-{name}") or {}).get("status") == "ok"
        out["serve_4b_bf16"][name] = layout(run) if ok else _not_measured(steps, f"serve-{name}")
    base = out["serve_4b_bf16"]["tp1"]
    for name in ("tp2", "dp2"):
        r = out["serve_4b_bf16"][name]
        if base.get("measured") and r.get("measured") and base["tok_s_per_request_c1"] and r["tok_s_per_request_c1"]:
            r["vs_tp1"] = {"tok_s_per_request_c1": round(r["tok_s_per_request_c1"] / base["tok_s_per_request_c1"], 3),
                           **{f"out_tok_s_c{c}": round(r["out_tok_s"][c] / base["out_tok_s"][c], 3)
                              for c in ("32", "64") if c in r["out_tok_s"] and c in base["out_tok_s"]}}
    builds = {}
    for v in ("1gpu", "2gpu"):
        man = _load(d / f"q4b-fp8-{v}.quantgate.json")
        ok = man is not None and (steps.get(f"quantize-{v}") or {}).get("status") == "ok"
        builds[v] = build(man) if ok else _not_measured(steps, f"quantize-{v}")
    if builds["1gpu"].get("measured") and builds["2gpu"].get("measured"):
        builds["same_weights"] = builds["1gpu"]["weights"] == builds["2gpu"]["weights"]
    out["quantize_fp8_dynamic"] = builds
    out["reader_study_tp2"] = study(d / "study-reader-tp2")
    if not out["reader_study_tp2"]["measured"]:
        out["reader_study_tp2"] = _not_measured(steps, "study-reader-tp2")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("results", type=Path)
    ap.add_argument("-o", "--out", type=Path, required=True)
    a = ap.parse_args(argv)
    s = summarize(a.results)
    a.out.write_text(json.dumps(s, indent=2) + "\n")
    print(json.dumps(s, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
