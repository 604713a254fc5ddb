"""time.json for one study folder, from the study's own records: summary.json's time budget (the wall time of
`quantgate study` from its start to the verdict and speed table, split by part), the variants, pages and levels it
judged, and the GPU it ran on; `command_wall_s` is the session's own clock around the command, for comparison.
`servers`: per variant, the folder its server was handed (the machine's variant store, the same path in every study,
when the store holds it) and whether vLLM's compile cache was hit (`compile_start`), from its run.json — what shows
a warm study really started warm. `--cold TIME_JSON`: the warm study's servers compared with the cold one's.

    python lab/2026-12-04-ten-minutes/time_json.py STUDY_DIR --gpu-file gpu.txt --command-wall-s S -o time.json
"""

from __future__ import annotations

import argparse
import gzip
import json
from pathlib import Path


def load(p: Path) -> dict:
    if p.is_file():
        return json.loads(p.read_text())
    return json.loads(gzip.decompress(p.with_suffix(".json.gz").read_bytes()))


def time_json(study: Path, gpu: str, command_wall_s: float | None) -> dict:
    s, st = load(study / "summary.json"), load(study / "study.json")
    tb = s["time_budget"]
    parts: dict[str, float] = {}
    for r in tb["rows"]:
        parts[r["part"]] = round(parts.get(r["part"], 0.0) + r["wall_s"], 1)
    quantize = {r["variant"]: {"wall_s": r["wall_s"], "reused": r["reused"]} for r in tb["rows"]
                if r["part"] == "quantize"}
    speed = st.get("speed") or {}
    servers = {}
    for v in st["variants"]:
        run = load(study / "runs" / v["name"] / "run.json")
        cmd, engine = run.get("server_command") or [], run.get("engine") or {}
        servers[v["name"]] = {"served_from": cmd[cmd.index("serve") + 1] if "serve" in cmd[:-1] else None,
                              **{k: engine.get(k) for k in ("compile_start", "compile_s", "start_s")}}
    return {"wall_s": tb["wall_s"], "gpu": gpu, "variants": [v["name"] for v in st["variants"]],
            "pages": st.get("limit"), "levels": {"accuracy": st["concurrency"][:1],
                                                  "speed": speed.get("levels") or st["concurrency"],
                                                  "waves": speed.get("repeats")},
            "command_wall_s": command_wall_s, "parts_s": parts, "quantize": quantize,
            "engine_start_s": tb["engine_start_s"], "server_starts_beside_s": tb["background_s"],
            "generation_s": tb["generation_s"], "overhead_s": tb["overhead_s"], "servers": servers}


def warm_check(warm: dict, cold: dict) -> dict:
    """Whether each variant of the warm study was served from the path the cold one used (vLLM keys its compile
    cache by that path among the rest) and started with its compile cache hit."""
    rows = {v: {"same_path": s["served_from"] == cold["servers"].get(v, {}).get("served_from"),
                "compile_warm": s["compile_start"] == "warm"} for v, s in warm["servers"].items()}
    return {"variants": rows, "all_warm": all(r["same_path"] and r["compile_warm"] for r in rows.values())}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("study", type=Path)
    ap.add_argument("--gpu-file", type=Path)
    ap.add_argument("--command-wall-s", type=float)
    ap.add_argument("--cold", type=Path, help="the cold study's time.json: add warm_check against it")
    ap.add_argument("-o", type=Path, required=True)
    a = ap.parse_args()
    gpu = a.gpu_file.read_text().strip().split(",")[1].strip() if a.gpu_file and a.gpu_file.is_file() and \
        "," in a.gpu_file.read_text() else "none (CPU dry run)"
    out = time_json(a.study, gpu, a.command_wall_s)
    if a.cold is not None:
        out["warm_check"] = warm_check(out, json.loads(a.cold.read_text()))
    a.o.write_text(json.dumps(out, indent=1) + "\n")
    print(json.dumps(out))


if __name__ == "__main__":
    main()
