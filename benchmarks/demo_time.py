"""Where the demo's wall time goes: runs `quantgate demo` in a fresh folder and reports
wall time per part — quantize per variant, server starts, page requests per level, lm-eval, scoring
and report — then prints a table and writes benchmarks/results/demo_time.json.gz (or --out).

    python benchmarks/demo_time.py [--pages 40] [--label after] [--src DIR] [--out FILE]

The parts come from the study's own timing records (`timings.jsonl`, one line per stage, written by
`quantgate study`). A quantgate from before those records existed (`--src` pointing at an older
checkout) is timed from what its files say instead: each variant's `quantgate.json` (its quantize
wall time), each request record's start and end (page requests per level; the gap before the first
request is the server start), the times the files were written, and the console's marker lines.

The machine's load average is recorded before and after: on a shared 2-core machine the numbers
depend on what else runs, so the JSON says how loaded it was.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from pathlib import Path

from results_io import read_json, write_json

ROOT = Path(__file__).resolve().parent.parent


def run_demo(src: Path, out: Path, pages: int, variants: str | None):
    """Run the demo; return its start and end (unix time), the console lines with the time each arrived,
    the exit code, and the CPU seconds it and its servers used (a number other load on the machine
    changes much less than the wall time)."""
    env = {**os.environ, "PYTHONPATH": str(src)}
    cmd = [sys.executable, "-m", "quantgate", "demo", "-o", str(out), "--pages", str(pages)]
    if variants:
        cmd += ["--variants", variants]
    lines: list[tuple[float, str]] = []
    import resource

    cpu0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.time()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=src)

    def pump(stream):
        buf = b""
        while chunk := stream.read1(4096):
            buf += chunk
            *whole, buf = buf.replace(b"\r", b"\n").split(b"\n")
            now = time.time()
            lines.extend((now, x.decode("utf-8", "replace")) for x in whole if x.strip())
        if buf.strip():
            lines.append((time.time(), buf.decode("utf-8", "replace")))

    threads = [threading.Thread(target=pump, args=(s,), daemon=True) for s in (p.stdout, p.stderr)]
    for t in threads:
        t.start()
    rc = p.wait()
    for t in threads:
        t.join()
    cpu1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (cpu1.ru_utime - cpu0.ru_utime) + (cpu1.ru_stime - cpu0.ru_stime)
    return t0, time.time(), sorted(lines, key=lambda x: x[0]), rc, cpu


def parts_from_timings(out: Path) -> list[dict]:
    """The study's own records: one line per stage with its wall time."""
    return [json.loads(x) for x in (out / "timings.jsonl").read_text("utf-8").splitlines() if x.strip()]


def parts_from_files(out: Path, t0: float, t1: float, lines: list[tuple[float, str]]) -> list[dict]:
    """For a quantgate without timing records: the same parts, from the files the study wrote."""
    study = json.loads((out / "study.json").read_text("utf-8"))
    names = [v["name"] for v in study["variants"]]
    rows: list[dict] = []
    mtime = lambda p: p.stat().st_mtime  # noqa: E731
    # quantize: the manifest's own wall time (model load, calibration, save, verification)
    for n in names:
        man = json.loads((out / "variants" / n / "quantgate.json").read_text("utf-8"))
        rows.append({"stage": "quantize", "variant": n, "wall_s": man["wall_s"]})
    # serve: marker line "[serve] NAME" → first request = server start (and setup); levels from the records
    marks = {}
    for t, s in lines:
        for tag in ("[serve]", "[lm-eval]"):
            if s.startswith(tag):
                marks[(tag, s[len(tag):].split()[0].rstrip(":"))] = t
    for n in names:
        recs = [json.loads(x) for x in (out / "runs" / n / "requests.jsonl").read_text("utf-8").splitlines()]
        start = marks.get(("[serve]", n))
        if start is not None:
            rows.append({"stage": "server_start", "variant": n, "purpose": "pages",
                         "wall_s": min(r["start"] for r in recs) - start})
        by_c = defaultdict(list)
        for r in recs:
            by_c[r["concurrency"]].append(r)
        for c, rs in sorted(by_c.items()):
            rows.append({"stage": "pages_run", "variant": n, "concurrency": c, "count": len(rs),
                         "wall_s": max(r["end"] for r in rs) - min(r["start"] for r in rs)})
        # after the last request: stopping the server, writing run.json
        rows.append({"stage": "server_stop", "variant": n, "wall_s": mtime(out / "runs" / n / "run.json")
                     - max(r["end"] for r in recs)})
    # lm-eval: marker line → lmeval.json written; its server start is not in any file (estimated as the
    # serve stage's start of the same variant, which is the same command on the same weights)
    starts = {r["variant"]: r["wall_s"] for r in rows if r["stage"] == "server_start"}
    for n in names:
        start, f = marks.get(("[lm-eval]", n)), out / "lmeval" / n / "lmeval.json"
        if start is None or not f.is_file():
            continue
        total = mtime(f) - start
        est = starts.get(n, 0.0)
        rows.append({"stage": "server_start", "variant": n, "purpose": "lm-eval", "wall_s": est, "estimated": True})
        rows.append({"stage": "lmeval", "variant": n, "wall_s": total - est})
    # scoring and compare: from the last stage before them to the last score file; then the report
    last = max([mtime(out / "lmeval" / n / "lmeval.json") for n in names if (out / "lmeval" / n / "lmeval.json").is_file()]
               + [mtime(out / "runs" / n / "run.json") for n in names])
    scores = max(mtime(f) for f in (out / "scores").glob("*.jsonl"))
    rows.append({"stage": "score", "wall_s": scores - last})
    rows.append({"stage": "report", "wall_s": mtime(out / "report.html") - scores})
    return rows


LABELS = {"pages": "page synthesis", "quantize": "quantize (every variant)", "lmeval": "lm-eval (setup and requests)",
          "score": "score", "report": "compare and report", "server_stop": "server stops"}


def summarize(rows: list[dict], wall: float) -> dict:
    """Wall seconds per part. A stage that ran beside another (a server started during the previous
    variant's lm-eval) is listed on its own and not counted again in "other"."""
    agg: dict[str, float] = defaultdict(float)
    beside = 0.0
    for r in rows:
        if r["stage"] == "pages_run":
            key = f"page requests at concurrency {r['concurrency']}"
        elif r["stage"] == "server_start":
            bg = r.get("background", False)
            n = sum(1 for x in rows if x["stage"] == "server_start" and x.get("background", False) == bg)
            key = f"server starts ({n}{', during the previous lm-eval' if bg else ''})"
            beside += r["wall_s"] if bg else 0.0
        else:
            key = LABELS.get(r["stage"], r["stage"])
        agg[key] += r["wall_s"]
    agg["other (imports, hashing, gaps)"] = wall - sum(agg.values()) + beside
    return dict(agg)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pages", type=int, default=40)
    ap.add_argument("--variants", default=None, help="comma list (default: the demo's five)")
    ap.add_argument("--src", type=Path, default=ROOT, help="the quantgate checkout to time (default: this one)")
    ap.add_argument("--label", default="after", help="key of this run in the JSON (before / after)")
    ap.add_argument("--keep", type=Path, help="run the demo in this folder and keep it (default: a temporary one)")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "demo_time.json.gz")
    a = ap.parse_args()
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        out = a.keep or Path(tmp) / "demo-out"
        t0, t1, lines, rc, cpu = run_demo(a.src.resolve(), out.resolve(), a.pages, a.variants)
        if rc != 0:
            sys.exit("demo failed:\n" + "\n".join(s for _, s in lines[-30:]))
        own = (out / "timings.jsonl").is_file()
        rows = parts_from_timings(out) if own else parts_from_files(out, t0, t1, lines)
        console = [s for _, s in lines]
        raw_chars = sum(len(s) for s in console)
    wall = t1 - t0
    parts = summarize(rows, wall)
    res = {"label": a.label, "wall_s": round(wall, 1), "cpu_s": round(cpu, 1), "pages": a.pages, "variants": a.variants,
           "source": "timings.jsonl" if own else "inferred from the files and the console",
           "parts_s": {k: round(v, 1) for k, v in parts.items()}, "rows": rows,
           "console_lines": len(console), "console_chars": raw_chars, "console": console,
           "load_avg_1m_before": round(load_before[0], 2), "load_avg_1m_after": round(os.getloadavg()[0], 2),
           "cpus": os.cpu_count(), "cpu": platform.processor() or platform.machine(),
           "date": time.strftime("%Y-%m-%d %H:%M")}
    print(f"demo ({a.label}): {wall:.1f} s wall, {cpu:.1f} s CPU (demo and its servers), {a.pages} pages; load average {load_before[0]:.2f} → "
          f"{res['load_avg_1m_after']:.2f} on {os.cpu_count()} CPUs; parts from {res['source']}")
    print(f"{'part':<44}{'wall s':>9}{'share':>8}")
    for k, v in sorted(parts.items(), key=lambda kv: -kv[1]):
        print(f"{k:<44}{v:>9.1f}{v / wall:>8.0%}")
    print(f"console: {len(console)} lines, {raw_chars} characters")
    results = read_json(a.out) if a.out.is_file() else {}
    results[a.label] = res
    a.out.parent.mkdir(parents=True, exist_ok=True)
    write_json(a.out, results)
    print(f"-> {a.out}")


if __name__ == "__main__":
    main()
