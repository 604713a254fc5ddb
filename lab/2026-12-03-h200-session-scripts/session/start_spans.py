"""Item 6 of issue 30: each vLLM start's span between its ``Initial profiling/warmup run took`` line and its
KV-cache line (``Initial free memory`` / ``GPU KV cache size``) — where the first sampler call of a machine
JIT-builds FlashInfer's sampling module — read from the server logs a study wrote (runs/<variant>/server.log),
with quantgate's own launch-to-healthy seconds from run.json.

    python lab/2026-12-03-h200-session-scripts/session/start_spans.py STUDY_OUT -o spans.json
"""

from __future__ import annotations

import argparse
import json
import re
from datetime import datetime
from pathlib import Path

# vLLM 0.26's log prefix: "(EngineCore pid=123) INFO 12-02 01:40:00 [gpu_worker.py:479] ..."
STAMP = re.compile(r"(\d\d-\d\d \d\d:\d\d:\d\d)")
WARMUP = "Initial profiling/warmup run took"
KV = ("Initial free memory", "GPU KV cache size")


def _at(line: str) -> datetime | None:
    m = STAMP.search(line)
    return datetime.strptime("2026-" + m.group(1), "%Y-%m-%d %H:%M:%S") if m else None


def spans(log: Path) -> list[dict]:
    """One entry per start in the log (the file is appended across starts)."""
    out, warm = [], None
    for line in log.read_text("utf-8", "replace").splitlines():
        if WARMUP in line:
            warm = _at(line)
        elif warm is not None and any(k in line for k in KV):
            kv = _at(line)
            out.append({"warmup_line": warm.strftime("%H:%M:%S"), "kv_line": kv.strftime("%H:%M:%S") if kv else None,
                        "span_s": (kv - warm).total_seconds() if kv else None})
            warm = None
    return out


def main() -> None:
    a = argparse.ArgumentParser()
    a.add_argument("study_out", type=Path)
    a.add_argument("-o", type=Path, required=True)
    args = a.parse_args()
    res = {}
    for run in sorted((args.study_out / "runs").glob("*/run.json")):
        m = json.loads(run.read_text())
        log = run.parent / "server.log"
        res[run.parent.name] = {"spans": spans(log) if log.is_file() else [],
                                "start_s": (m.get("engine") or {}).get("start_s"),
                                "compile_s": (m.get("engine") or {}).get("compile_s"),
                                "init_engine_s": (m.get("engine") or {}).get("init_engine_s"),
                                "compile_start": (m.get("engine") or {}).get("compile_start"),
                                "kernels": m.get("kernels")}
    args.o.write_text(json.dumps(res, indent=1))
    print(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
