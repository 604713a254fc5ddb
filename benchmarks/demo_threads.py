"""The demo's servers with 1 and with 2 torch threads: seconds and server CPU seconds per
page, and whether the outputs change. Serves every variant of a finished demo again with transformers
serve (OMP_NUM_THREADS=1, then 2; two warm-up pages first), every held-out page at concurrency 1, and
compares the two runs' outputs page by page (pages whose output differs, change in mean `ned`). This
backs two things: the demo's `threads: 1`, and the README's note that the thread count (like the CPU)
can change a near-tie between two tokens, so a variant may differ by a page on another machine.
Prints a table and writes benchmarks/results/demo_threads.json.

    python benchmarks/demo_threads.py DEMO_OUT
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

from quantgate.io.pageset import load_pageset
from quantgate.scoring import get_metric
from quantgate.scoring.metrics import score_one
from quantgate.serve.client import RequestSpec, run_level
from quantgate.serve.server import ManagedServer

ROOT = Path(__file__).resolve().parent.parent


def _cpu_s(pid: int) -> float:
    f = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime of the server process


def serve_pages(vdir: Path, ps, pages, study: dict, threads: int) -> tuple[dict[str, str], float, float]:
    exe = shutil.which("transformers", path=os.path.dirname(sys.executable))
    with tempfile.TemporaryDirectory() as tmp:
        srv = ManagedServer(f"transformers serve {vdir.name}", lambda port: [
            exe, "serve", str(vdir), "--host", "127.0.0.1", "--port", str(port), "--device", "cpu"],
            Path(tmp) / "server.log", env={"OMP_NUM_THREADS": str(threads), "HF_HUB_OFFLINE": "1"})
        with srv:
            spec = RequestSpec(base_url=srv.base_url, model=str(vdir), prompt=study["prompt"],
                               max_tokens=study["max_tokens"])
            items = [(p.id, (lambda p=p: ps.image_bytes(p))) for p in pages]
            asyncio.run(run_level(spec, items[:2], 1, Path(tmp) / "warmup.jsonl", "warmup"))
            c0, t0 = _cpu_s(srv.proc.pid), time.perf_counter()
            recs = asyncio.run(run_level(spec, items, 1, Path(tmp) / "requests.jsonl", "threads"))
            wall, cpu = time.perf_counter() - t0, _cpu_s(srv.proc.pid) - c0
    return {r.page_id: r.output for r in recs}, wall / len(pages), cpu / len(pages)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("demo_out", type=Path)
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "demo_threads.json")
    a = ap.parse_args()
    study = json.loads((a.demo_out / "study.json").read_text())
    ps = load_pageset(a.demo_out / "pages")
    pages = ps.split("heldout")
    ned = get_metric("ned")
    load0 = os.getloadavg()[0]
    rows = []
    for v in study["variants"]:
        vdir = a.demo_out / "variants" / v["name"]
        runs = {t: serve_pages(vdir, ps, pages, study, t) for t in (1, 2)}
        o1, o2 = runs[1][0], runs[2][0]
        changed = [p.id for p in pages if o1.get(p.id) != o2.get(p.id)]
        dned = sum(score_one(ned, o1[p.id], ps.truth_text(p), []) - score_one(ned, o2[p.id], ps.truth_text(p), [])
                   for p in pages) / len(pages)
        rows.append({"variant": v["name"], "pages": len(pages),
                     "s_per_page": {str(t): round(r[1], 3) for t, r in runs.items()},
                     "server_cpu_s_per_page": {str(t): round(r[2], 3) for t, r in runs.items()},
                     "changed_pages": changed, "ned_delta_1_minus_2": dned})
    res = {"cpus": os.cpu_count(), "load_avg_1m_before": round(load0, 2), "load_avg_1m_after": round(os.getloadavg()[0], 2),
           "date": time.strftime("%Y-%m-%d %H:%M"), "rows": rows}
    print(f"transformers serve, 1 vs 2 torch threads, {len(pages)} held-out pages at concurrency 1; "
          f"load average {load0:.2f} → {res['load_avg_1m_after']:.2f} on {os.cpu_count()} CPUs")
    print(f"{'variant':<16}{'s/page 1':>9}{'s/page 2':>9}{'cpu/pg 1':>9}{'cpu/pg 2':>9}{'changed':>9}{'Δ ned':>9}")
    for r in rows:
        s, c = r["s_per_page"], r["server_cpu_s_per_page"]
        print(f"{r['variant']:<16}{s['1']:>9.3f}{s['2']:>9.3f}{c['1']:>9.3f}{c['2']:>9.3f}"
              f"{len(r['changed_pages']):>9}{r['ned_delta_1_minus_2']:>+9.4f}")
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(res, indent=1) + "\n")
    print(f"-> {a.out}")


if __name__ == "__main__":
    main()
