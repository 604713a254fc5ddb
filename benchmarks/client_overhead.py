"""The client's own ceiling: quantgate's async client against a local stub server that answers
instantly (tests.support.stub). Target: >= 500 requests/s at concurrency 64 on a
2-core machine, so the client never limits a real server's measured throughput.

    python benchmarks/client_overhead.py [--requests 3000] [--concurrency 64]
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import os
import sys
import tempfile
import time
from pathlib import Path

from PIL import Image

from quantgate.serve.client import RequestSpec, run_level
from quantgate.serve.server import ManagedServer


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=3000)
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "client_overhead.json")
    a = ap.parse_args()
    buf = io.BytesIO()
    Image.new("RGB", (640, 480), "white").save(buf, format="PNG")
    png = buf.getvalue()
    with tempfile.TemporaryDirectory() as tmp:
        srv = ManagedServer("stub", lambda port: [sys.executable, "-m", "tests.support.stub", "--port", str(port)],
                            Path(tmp) / "stub.log", startup_timeout_s=60,
                            env={"PYTHONPATH": str(Path(__file__).resolve().parents[1])})  # tests.support
        with srv:
            spec = RequestSpec(base_url=srv.base_url, model="stub", prompt="Convert to markdown.", max_tokens=16)
            pages = [(f"p{i}", lambda: png) for i in range(a.requests)]
            t0 = time.perf_counter()
            recs = asyncio.run(run_level(spec, pages, a.concurrency, Path(tmp) / "requests.jsonl", "bench"))
            wall = time.perf_counter() - t0
    errors = sum(r.error is not None for r in recs)
    res = {"requests": a.requests, "concurrency": a.concurrency, "errors": errors, "wall_s": wall,
           "requests_per_s": a.requests / wall, "target_requests_per_s": 500, "cpus": os.cpu_count(),
           "note": "client and stub server share the machine's cores; the stub answers each request with a "
                   "7-chunk SSE stream; the request carries a 640x480 PNG as a data URL"}
    print(f"{'concurrency':>12}{'requests':>10}{'errors':>8}{'req/s':>10}{'target':>8}")
    print(f"{a.concurrency:>12}{a.requests:>10}{errors:>8}{res['requests_per_s']:>10.0f}{'>= 500':>8}")
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(res, indent=2) + "\n")
    print(f"-> {a.out}")


if __name__ == "__main__":
    main()
