"""The GPU session's step runner: every step of a job script runs under the lesser of its own cap and the
time left before the session's global deadline, in its own process group (killed whole when time is up),
and appends one JSON line to the job's status file the moment it ends, so a later step (and collect.sh)
sees what finished, what failed and why; while it runs, STATUS.running/NAME exists. A step that cannot get its minimum time, or whose inputs are
missing, is recorded as skipped and the job goes on. Standard library only: the runner must work even
when nothing else was installed.

    python steps.py init DEADLINE_FILE BUDGET_S        # the deadline (epoch s), written once per session
    python steps.py left DEADLINE_FILE                 # whole seconds left (0 when past)
    python steps.py run --status F --deadline-file D --name N --cap S [--min S] [--requires PATH]... \\
        [--log FILE] [--skip REASON] -- CMD ARGS...    # exit: the command's code; 124 timeout; 75 skipped
    python steps.py table STATUS.jsonl...              # what ran, as a table
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

SKIPPED_RC = 75  # EX_TEMPFAIL: not run (no time, or an input missing)
TIMEOUT_RC = 124  # as coreutils' timeout
RESERVE_S = 15.0  # kept back from every step for the job's own bookkeeping and the final pack


def step_timeout(now: float, deadline: float | None, cap: float, min_s: float = 0.0,
                 reserve: float = RESERVE_S) -> float | None:
    """Seconds a step may run: its cap, cut to the time left before the deadline (less ``reserve``).
    None when that is below ``min_s`` (or nothing is left): the step is not worth starting."""
    limit = float(cap)
    if deadline is not None:
        limit = min(limit, deadline - now - reserve)
    if limit <= 0 or limit < min_s:
        return None
    return limit


def missing_inputs(requires: list[str]) -> list[str]:
    return [p for p in requires if not Path(p).exists()]


def running_steps(status: Path) -> list[str]:
    d = status.with_name(status.name + ".running")
    return sorted(p.name for p in d.iterdir()) if d.is_dir() else []


def status_of(rc: int | None, timed_out: bool) -> str:
    if timed_out:
        return "timeout"
    if rc is None:
        return "skipped"
    return "ok" if rc == 0 else "failed"


def read_deadline(path: str | None) -> float | None:
    if not path:
        return None
    try:
        return float(Path(path).read_text().strip())
    except (OSError, ValueError):
        return None


def _append(path: Path, rec: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as f:  # one short line per append: readers never see half a record
        f.write(json.dumps(rec) + "\n")
        f.flush()
        os.fsync(f.fileno())


def _write(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def _kill_group(proc: subprocess.Popen, grace_s: float = 15.0) -> None:
    for sig, wait in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 10.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


def run_step(cmd: list[str], *, name: str, status: Path, cap: float, deadline: float | None, min_s: float = 0.0,
             requires: list[str] = (), log: Path | None = None, skip: str | None = None, now=time.time) -> dict:
    """Run one step and append its record to ``status``; the record is also returned. ``skip``: record the
    step as skipped for that reason (a dry run's GPU-only steps) without running it."""
    t0 = now()
    rec = {"step": name, "started": round(t0, 1), "cap_s": cap}
    gone = missing_inputs(list(requires))
    limit = None if gone or skip else step_timeout(t0, deadline, cap, min_s)
    if limit is None:
        rec.update(status="skipped", rc=None, wall_s=0.0,
                   reason=skip or (f"missing {', '.join(gone)}" if gone else
                                   f"{max(0.0, (deadline or t0) - t0):.0f} s left, step needs {min_s:.0f} s"))
        _append(status, rec)
        return rec
    running = status.with_name(status.name + ".running") / name  # one file per running step (steps may overlap)
    running.parent.mkdir(parents=True, exist_ok=True)
    _write(running, f"{t0:.0f}\n")
    rec["limit_s"] = round(limit, 1)
    out = open(log, "ab") if log else None
    timed_out = False
    try:
        if out:
            out.write(f"\n=== {name} (limit {limit:.0f} s) $ {' '.join(cmd)}\n".encode())
            out.flush()
        try:
            proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT if out else None, start_new_session=True)
        except OSError as e:
            rec.update(status="failed", rc=127, wall_s=round(now() - t0, 2), reason=str(e))
            _append(status, rec)
            return rec
        try:
            rc = proc.wait(timeout=limit)
        except subprocess.TimeoutExpired:
            timed_out = True
            _kill_group(proc)
            rc = proc.returncode
    finally:
        if out:
            out.close()
        running.unlink(missing_ok=True)
    rec.update(status=status_of(rc, timed_out), rc=TIMEOUT_RC if timed_out else rc, wall_s=round(now() - t0, 2))
    _append(status, rec)
    return rec


def exit_code(rec: dict) -> int:
    if rec["status"] == "skipped":
        return SKIPPED_RC
    return int(rec["rc"] or 0) if rec["status"] != "ok" else 0


def table(paths: list[Path]) -> str:
    rows = []
    for p in paths:
        if not p.is_file():
            continue
        for line in p.read_text().splitlines():
            try:
                r = json.loads(line)
            except json.JSONDecodeError:
                continue  # a line being written
            limit = "" if r.get("limit_s") is None else f"  (limit {r['limit_s']:.0f} s)"
            reason = f"  {r['reason']}" if r.get("reason") else ""
            rows.append(f"{p.parent.name:<6}{r['step']:<28}{r['status']:<9}{r.get('wall_s', 0):>8.1f} s{limit}{reason}")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["init"]:
        path, budget = Path(argv[1]), float(argv[2])
        if not path.is_file():  # once per session: a relaunch keeps the first deadline
            path.parent.mkdir(parents=True, exist_ok=True)
            _write(path, f"{time.time() + budget:.1f}\n")
        print(f"deadline in {float(path.read_text()) - time.time():.0f} s")
        return 0
    if argv[:1] == ["left"]:
        d = read_deadline(argv[1])
        print(0 if d is None else max(0, int(d - time.time())))
        return 0
    if argv[:1] == ["table"]:
        print(table([Path(p) for p in argv[1:]]))
        return 0
    if argv[:1] != ["run"] or "--" not in argv:
        print(__doc__, file=sys.stderr)
        return 2
    sep = argv.index("--")
    ap = argparse.ArgumentParser(prog="steps.py run")
    ap.add_argument("--status", type=Path, required=True)
    ap.add_argument("--deadline-file")
    ap.add_argument("--name", required=True)
    ap.add_argument("--cap", type=float, required=True)
    ap.add_argument("--min", type=float, default=0.0)
    ap.add_argument("--requires", action="append", default=[])
    ap.add_argument("--log", type=Path)
    ap.add_argument("--skip", help="record the step as skipped for this reason, without running it")
    a = ap.parse_args(argv[1:sep])
    rec = run_step(argv[sep + 1:], name=a.name, status=a.status, cap=a.cap, deadline=read_deadline(a.deadline_file),
                   min_s=a.min, requires=a.requires, log=a.log, skip=a.skip)
    print(f"[{a.name}] {rec['status']} in {rec['wall_s']:.0f} s" + (f" ({rec['reason']})" if rec.get("reason") else ""),
          flush=True)
    return exit_code(rec)


if __name__ == "__main__":
    sys.exit(main())
