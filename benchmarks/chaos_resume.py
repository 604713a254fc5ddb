"""Chaos resume: a small study on the stub server (``tests.support.stub_study``) SIGKILLed at
seeded random moments, resumed after each kill, and its final summary compared with an uninterrupted run's —
verdicts (every field), score files, and the last record per page and level (output, error, finish reason),
not timings or speeds. After each kill the stub server must go too (no orphan), and every requests.jsonl must
verify (its chain, a torn tail cut). Writes JSON.

    PYTHONPATH=. python benchmarks/chaos_resume.py [--kills 24] [--seed 0] [--out benchmarks/results/chaos_resume.json]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CANDIDATES = {"same": 0.0, "mid": 0.2, "bad": 0.6}


def _study(root: Path) -> Path:
    from quantgate.heldout.synth import synth_pages
    from tests.support.stub_study import study_yaml

    synth_pages(root / "pages", 16, seed=7, profile="simple", calibration_fraction=0.0)
    return study_yaml(root / "study.yaml", root / "pages", CANDIDATES, delay=0.05, min_pages=5)


def _start(study: Path, out: Path) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.Popen([sys.executable, "-m", "tests.support.stub_study", str(study), str(out)], cwd=REPO, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False


def _facts(out: Path) -> dict:
    """What must not differ: verdicts, the score files, the last record per (page, level), completeness."""
    from quantgate.serve.run import load_records

    summary = json.loads((out / "summary.json").read_text())
    records = {}
    for run in sorted((out / "runs").iterdir()):
        for r in load_records(run):  # verifies the chain, cuts a torn tail
            records[f"{run.name}/{r.page_id}@{r.concurrency}"] = [r.output, r.error, r.finish_reason, r.truncated]
    scores = {p.name: p.read_text() for p in sorted((out / "scores").iterdir())}
    return {"verdicts": summary["verdicts"], "complete": summary["complete"], "scores": scores, "records": records,
            "worst_pages": summary["worst_pages"]}


def _differences(a, b, path="") -> list[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        return [d for k in sorted(set(a) | set(b)) for d in _differences(a.get(k), b.get(k), f"{path}.{k}")]
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [d for i, (x, y) in enumerate(zip(a, b, strict=True)) for d in _differences(x, y, f"{path}[{i}]")]
    return [] if a == b else [path]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--kills", type=int, default=24)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "chaos_resume.json")
    a = ap.parse_args()
    rng = random.Random(a.seed)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        study = _study(root)
        t0 = time.time()
        ref = _start(study, root / "reference")
        if ref.wait(timeout=600) != 0:
            raise SystemExit(f"the uninterrupted study failed: {ref.stderr.read().decode()[-2000:]}")
        wall = time.time() - t0
        reference = _facts(root / "reference")
        kills, orphans, failures, moments, diffs, episodes = 0, 0, [], [], [], 0
        while kills < a.kills:  # episodes: a fresh folder, killed and resumed until a run finishes it
            episodes += 1
            out = root / f"chaos-{episodes}"
            while True:
                at = rng.uniform(0.3, wall)  # a moment within an uninterrupted run's length, from this start
                p = _start(study, out)
                try:
                    code = p.wait(timeout=at)
                except subprocess.TimeoutExpired:
                    code = None
                if code is not None:
                    moments.append({"episode": episodes, "at_s": round(at, 2), "killed": False, "exit": code})
                    if code != 0:  # a resume that failed on what a kill left: the benchmark's finding
                        failures.append(p.stderr.read().decode()[-500:])
                        break
                    diffs += [f"episode {episodes}: {d}" for d in _differences(reference, _facts(out))]
                    break
                os.kill(p.pid, signal.SIGKILL)
                p.wait()
                kills += 1
                deadline = time.time() + 5
                while _group_alive(p.pid) and time.time() < deadline:  # the stub server dies with quantgate
                    time.sleep(0.05)
                if _group_alive(p.pid):
                    orphans += 1
                    os.killpg(p.pid, signal.SIGKILL)
                moments.append({"episode": episodes, "at_s": round(at, 2), "killed": True})
        survived = kills - len(failures)  # a kill whose resume failed is not survived
    result = {"kills": kills, "kills_survived": survived, "episodes": episodes, "differences": len(diffs), "differing": diffs[:20],
              "orphaned_servers": orphans, "failed_resumes": len(failures), "failures": failures[:5],
              "uninterrupted_wall_s": round(wall, 1), "seed": a.seed, "moments": moments,
              "compared": "verdicts (every field), score files, the last record per page and level (output, error, "
                          "finish_reason, truncated), complete, worst pages; not timings or speeds",
              "command": f"PYTHONPATH=. python benchmarks/chaos_resume.py --kills {a.kills} --seed {a.seed}"}
    print(json.dumps({k: v for k, v in result.items() if k != "moments"}, indent=2))
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
