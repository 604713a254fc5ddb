"""Chaos resume: a study SIGKILLed at seeded moments, resumed after each kill, and its final summary compared with an
uninterrupted run's — verdicts (every field), score files, and the last record per page and level (output, error,
finish reason), not timings or speeds. After each kill the study's servers must go too (no orphan), and every
requests.jsonl must verify (its chain, a torn tail cut). Writes JSON.

Two studies. The default: the stub server (``tests.support.stub_study``), killed at moments uniform over an
uninterrupted run's length. ``--reader``: what ``quantgate demo`` runs, on fewer pages — the bundled reader
quantized by llmcompressor into 2 variants beside bf16 and served by ``transformers serve`` on CPU with one
thread, lm-eval beside the pages — run as ``quantgate study`` and killed with its whole process group. Each
reader kill aims at one phase in turn (quantize, server start, serving, scoring, report): it waits for the
stage before it to end in this start's ``timings.jsonl``, then for a seeded moment within that phase's length in
the uninterrupted run, so the short phases (scoring, report: under a second here) are hit too; the phase it
landed in is read back from the records and the live servers. Each episode has its own machine cache, so its
variants are built, not linked from an earlier study. Two uninterrupted runs are compared first: a difference
between them is the reader's own nondeterminism, not a resume bug.

    PYTHONPATH=. python benchmarks/chaos_resume.py [--kills 24] [--seed 0] [--out benchmarks/results/chaos_resume.json]
    PYTHONPATH=. python benchmarks/chaos_resume.py --reader --kills 22 --out benchmarks/results/chaos_resume_reader.json
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CANDIDATES = {"same": 0.0, "mid": 0.2, "bad": 0.6}
READER_VARIANTS = ["bf16", "fp8-dynamic", "harmful-int2"]  # a passing and a regressing candidate
PHASES = ("quantize", "server start", "serving", "scoring", "report")
MARK = "QUANTGATE_CHAOS_STUDY"  # set in the study's environment: every process it starts inherits it
GRACE_S = 15.0  # a server SIGTERMed by its parent's death (PR_SET_PDEATHSIG) must be gone within this


def _study(root: Path) -> Path:
    from quantgate.heldout.synth import synth_pages
    from tests.support.stub_study import study_yaml

    synth_pages(root / "pages", 16, seed=7, profile="simple", calibration_fraction=0.0)
    return study_yaml(root / "study.yaml", root / "pages", CANDIDATES, delay=0.05, min_pages=5)


def _reader_study(root: Path, pages: int) -> Path:
    import yaml

    from quantgate.study.demo import demo_study

    path = root / "study.yaml"  # the demo's study as a user would write it, at the smoke-test minimums
    path.write_text(yaml.safe_dump(demo_study(pages, READER_VARIANTS, min_pages=4), sort_keys=False))
    return path


def _start(study: Path, out: Path) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.Popen([sys.executable, "-m", "tests.support.stub_study", str(study), str(out)], cwd=REPO, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)


def _start_reader(study: Path, out: Path, cache: Path) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(REPO), "QUANTGATE_CACHE_DIR": str(cache), MARK: str(out)}
    with open(out.parent / f"{out.name}.console", "ab") as log:  # every start's console, for a failure's tail
        return subprocess.Popen([sys.executable, "-m", "quantgate", "study", str(study), "-o", str(out)], cwd=REPO,
                                env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False


def _marked(out: Path) -> list[tuple[int, str]]:
    """Live processes started by the study writing ``out`` (in any session: servers run in their own), by the
    environment variable they inherited; (pid, command line)."""
    want, found = f"{MARK}={out}".encode(), []
    for d in Path("/proc").iterdir():
        try:
            if d.name.isdigit() and want in (d / "environ").read_bytes().split(b"\0"):
                found.append((int(d.name), (d / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")))
        except OSError:  # gone meanwhile, or not ours to read
            continue
    return found


def _verify_chains(out: Path) -> tuple[list[str], int]:
    """Every run's requests.jsonl verified as the resume will read it, on a copy (the resume itself must cut a
    torn tail): (files whose chain is refused, with the error; how many had a torn tail)."""
    from quantgate.serve.run import load_records

    bad, torn = [], 0
    for f in sorted((out / "runs").glob("*/requests.jsonl")) if (out / "runs").is_dir() else []:
        data = f.read_bytes()
        torn += bool(data) and not data.endswith(b"\n")
        with tempfile.TemporaryDirectory() as tmp:
            (Path(tmp) / f.name).write_bytes(data)
            try:
                load_records(Path(tmp))
            except Exception as e:  # noqa: BLE001 — any refusal is the finding, reported as it reads
                bad.append(f"{f.parent.name}: {e}"[:300])
    return bad, torn


def _timings(out: Path) -> list[dict]:
    """timings.jsonl's whole records (a line torn by the kill left out)."""
    try:
        lines = (out / "timings.jsonl").read_bytes().split(b"\n")[:-1]
    except FileNotFoundError:
        return []
    recs = []
    for line in lines:
        try:
            recs.append(json.loads(line))
        except ValueError:
            continue
    return recs


def _windows(recs: list[dict]) -> dict[str, float]:
    """Each phase's length in the uninterrupted run (from its timings.jsonl): where after its trigger a kill may land."""
    by = lambda s: [r for r in recs if r["stage"] == s]  # noqa: E731
    starts, evals, score = by("server_start"), by("lmeval"), by("score")[0]
    return {"quantize": sum(r["wall_s"] for r in by("quantize")), "server start": starts[0]["wall_s"],
            "serving": max(r["end"] for r in evals) - starts[0]["end"],
            "scoring": score["end"] - max(r["end"] for r in evals), "report": by("report")[0]["wall_s"]}


def _served(every: list[dict]) -> set:
    """The variants whose serving ended (their lm-eval, the last of it), in any start of this folder."""
    return {r.get("variant") for r in every if r["stage"] == "lmeval"}


def _armed(phase: str, recs: list[dict], every: list[dict], n: int) -> bool:
    """Whether this start (``recs``; ``every``: all starts' records) reached the stage a kill aimed at ``phase``
    waits for."""
    stages = [r["stage"] for r in recs]
    return {"quantize": "pages" in stages, "server start": stages.count("quantize") >= n,
            "serving": "server_start" in stages, "scoring": len(_served(every)) >= n and "quantize" in stages,
            "report": "score" in stages}[phase]


def _phases_left(out: Path, n: int) -> set[str]:
    """The phases a start of the study writing ``out`` still goes through (the report: always)."""
    every, built = _timings(out), len(list((out / "variants").glob("*/quantgate.json")))
    left = {"report"} | ({"quantize"} if built < n else set())
    if len(_served(every)) < n:
        left |= {"server start", "serving"}
    return left | ({"scoring"} if "score" not in [r["stage"] for r in every] else set())


def _phase_at(recs: list[dict], every: list[dict], n: int) -> str:
    """The phase a kill landed in: the stage this start's records (``recs``) had not finished, serving done when
    every variant's ended in any start (``every``); a variant whose server started in this start and whose
    serving has not ended is being served (its successor's server may be starting beside it)."""
    stages = [r["stage"] for r in recs]
    if "report" in stages:
        return "after report"
    if "score" in stages:
        return "report"
    if "pages" not in stages:
        return "pages"
    if stages.count("quantize") < n:
        return "quantize"
    if len(_served(every)) >= n:
        return "scoring"
    started = {r.get("variant") for r in recs if r["stage"] == "server_start"}
    return "serving" if started - _served(recs) else "server start"


def _facts(out: Path) -> dict:
    """What must not differ: verdicts, the score files, the last record per (page, level), completeness; with
    lm-eval, its verdicts, runs and per-sample answers; each variant's weight files by hash."""
    from quantgate.serve.run import load_records

    summary = json.loads((out / "summary.json").read_text())
    records = {}
    for run in sorted((out / "runs").iterdir()):
        for r in load_records(run):  # verifies the chain, cuts a torn tail
            records[f"{run.name}/{r.page_id}@{r.concurrency}"] = [r.output, r.error, r.finish_reason, r.truncated]
    scores = {p.name: p.read_text() for p in sorted((out / "scores").iterdir())}
    facts = {"verdicts": summary["verdicts"], "complete": summary["complete"], "scores": scores, "records": records,
             "worst_pages": summary["worst_pages"]}
    if summary.get("lm_eval"):
        samples = {f"{p.parent.name}/{p.name}": [json.loads(line) for line in p.read_text().splitlines()]
                   for p in sorted((out / "lmeval").glob("*/samples-*.jsonl"))}
        facts["lm_eval"] = {"verdicts": summary["lm_eval"]["verdicts"], "runs": summary["lm_eval"]["runs"],
                            "samples": samples}
    if (out / "variants").is_dir():
        facts["weights"] = {m.parent.name: json.loads(m.read_text()).get("files")
                            for m in sorted((out / "variants").glob("*/quantgate.json"))}
    return facts


def _differences(a, b, path="") -> list[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        return [d for k in sorted(set(a) | set(b)) for d in _differences(a.get(k), b.get(k), f"{path}.{k}")]
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [d for i, (x, y) in enumerate(zip(a, b, strict=True)) for d in _differences(x, y, f"{path}[{i}]")]
    return [] if a == b else [path]


def _after_kill(out: Path, found: dict) -> float:
    """What a kill must leave: no process of the study alive within GRACE_S (one left is an orphan, named and
    killed), every chain verifying. Returns how long the study's last process took to go."""
    t0 = time.time()
    while (left := _marked(out)) and time.time() - t0 < GRACE_S:
        time.sleep(0.1)
    gone_s = time.time() - t0
    for pid, cmd in left:
        found["orphans"].append(f"{out.name}: pid {pid}: {cmd[:200]}")
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    bad, torn = _verify_chains(out)
    found["broken_chains"] += bad
    found["torn_tails"] += torn
    return gone_s


def _commit() -> str | None:
    """The quantgate commit the study ran (the benchmark is best run from a clean clone: a shared working tree
    changing under a long run would be measured instead)."""
    r = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True)
    return r.stdout.strip() or None


def reader(a) -> dict:
    rng, n = random.Random(a.seed), len(READER_VARIANTS)
    wanted: list[str] = []
    with tempfile.TemporaryDirectory(dir=a.tmp) as tmp:
        root = Path(tmp)
        study = _reader_study(root, a.pages)
        refs, walls = [], []
        for i in (1, 2):  # twice: what differs between two uninterrupted runs is the reader's, not the resume's
            t0 = time.time()
            p = _start_reader(study, root / f"reference-{i}", root / f"cache-reference-{i}")
            if p.wait(timeout=1800) != 0:
                raise SystemExit(f"the uninterrupted study failed: {(root / f'reference-{i}.console').read_text()[-2000:]}")
            walls.append(time.time() - t0)
            refs.append(_facts(root / f"reference-{i}"))
        reference, windows = refs[0], _windows(_timings(root / "reference-1"))
        found: dict = {"orphans": [], "broken_chains": [], "torn_tails": 0}
        kills, failures, moments, diffs, episodes, gone = 0, [], [], [], 0, []
        while kills < a.kills:  # episodes: a fresh folder and cache, killed and resumed until a run finishes it
            episodes += 1
            out, cache = root / f"chaos-{episodes}", root / f"cache-{episodes}"
            # a kill aims at a stage, so a resume would be killed again and again: an episode has a seeded
            # number of kills, then its next start is left to finish (and compared)
            budget, killed = min(rng.randint(1, 4), a.kills - kills), 0
            while True:
                aim, delay = "", 0.0
                if killed < budget:
                    if not wanted:  # every phase once in each round, in a seeded order
                        wanted = rng.sample(PHASES, len(PHASES))
                    # the first phase wanted that this start still has ahead; none (a resume past it: the
                    # quantized variants are reused, the pages served): this start finishes the episode, and
                    # the next fresh folder has every phase ahead
                    left = _phases_left(out, n)
                    aim = next((ph for ph in wanted if ph in left), "")
                    if aim:
                        wanted.remove(aim)
                        delay = rng.uniform(0, windows[aim])
                    else:
                        budget = killed
                sessions = {r["session"] for r in _timings(out)}
                t0, armed_at = time.time(), None
                p = _start_reader(study, out, cache)
                while p.poll() is None and (killed >= budget or armed_at is None or time.time() < armed_at + delay):
                    if time.time() - t0 > 3 * walls[0] + 300:  # a hang: killed, and the finding
                        failures.append(f"episode {episodes}: no end after {time.time() - t0:.0f} s")
                        break
                    every = _timings(out)
                    recs = [r for r in every if r["session"] not in sessions]
                    if armed_at is None and killed < budget and _armed(aim, recs, every, n):
                        armed_at = time.time()
                    time.sleep(0.005 if armed_at else 0.05)
                code = p.poll()
                if code is not None:
                    moments.append({"episode": episodes, "killed": False, "exit": code,
                                    "at_s": round(time.time() - t0, 2)})
                    if code != 0:  # a resume that failed on what a kill left: the benchmark's finding
                        failures.append(f"episode {episodes}: exit {code}: "
                                        + (root / f"{out.name}.console").read_text(errors="replace")[-500:])
                        break
                    diffs += [f"episode {episodes}: {d}" for d in _differences(reference, _facts(out))]
                    break
                servers = sum(" serve " in cmd for _, cmd in _marked(out))
                os.killpg(p.pid, signal.SIGKILL)  # the study's whole process group: quantgate and its helpers
                p.wait()
                kills, killed = kills + 1, killed + 1
                every = _timings(out)
                recs = [r for r in every if r["session"] not in sessions]
                landed = _phase_at(recs, every, n)
                gone.append(_after_kill(out, found))
                moments.append({"episode": episodes, "aimed_at": aim, "landed_in": landed, "killed": True,
                                "at_s": round(time.time() - t0, 2), "after_trigger_s": round(delay, 3),
                                "servers_alive": servers, "last_stage_done": recs[-1]["stage"] if recs else None})
                if failures and failures[-1].startswith(f"episode {episodes}: no end"):
                    break
            shutil.rmtree(cache, ignore_errors=True)  # a few built variants an episode: the disk is shared
        landed = [m["landed_in"] for m in moments if m["killed"]]
        return {"study": f"the demo's study on {a.pages} synthetic reader pages, variants {', '.join(READER_VARIANTS)}; "
                         "transformers serve on CPU, 1 thread; lm-eval page task",
                "commit": _commit(),
                "kills": kills, "kills_survived": kills - len(failures), "episodes": episodes,
                "differences": len(diffs), "differing": diffs[:20],
                "reference_runs_differ": _differences(refs[0], refs[1])[:20],
                "orphaned_servers": len(found["orphans"]), "orphans": found["orphans"][:5],
                "broken_chains": found["broken_chains"][:5], "torn_tails_left_by_kills": found["torn_tails"],
                "failed_resumes": len(failures), "failures": failures[:5],
                "kills_by_phase": {ph: landed.count(ph) for ph in ("pages", *PHASES, "after report")},
                "processes_gone_after_kill_s": {"max": round(max(gone, default=0), 2),
                                                "median": round(sorted(gone)[len(gone) // 2], 2) if gone else 0},
                "uninterrupted_wall_s": [round(w, 1) for w in walls],
                "phase_windows_s": {k: round(v, 3) for k, v in windows.items()}, "seed": a.seed, "moments": moments,
                "compared": "verdicts (every field), score files byte for byte, the last record per page and level "
                            "(output, error, finish_reason, truncated), complete, worst pages, lm-eval verdicts "
                            "(every field), runs and per-sample answers, each variant's weight files (sha256); "
                            "not timings or speeds",
                "command": f"PYTHONPATH=. python benchmarks/chaos_resume.py --reader --kills {a.kills} "
                           f"--pages {a.pages} --seed {a.seed}"}


def stub(a) -> dict:
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
    return {"kills": kills, "kills_survived": survived, "episodes": episodes, "differences": len(diffs), "differing": diffs[:20],
            "orphaned_servers": orphans, "failed_resumes": len(failures), "failures": failures[:5],
            "uninterrupted_wall_s": round(wall, 1), "seed": a.seed, "moments": moments,
            "compared": "verdicts (every field), score files, the last record per page and level (output, error, "
                        "finish_reason, truncated), complete, worst pages; not timings or speeds",
            "command": f"PYTHONPATH=. python benchmarks/chaos_resume.py --kills {a.kills} --seed {a.seed}"}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reader", action="store_true", help="the bundled reader served by transformers serve, not the stub")
    ap.add_argument("--kills", type=int, default=24)
    ap.add_argument("--pages", type=int, default=10, help="--reader: synthetic pages (a fifth for calibration)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--tmp", type=Path, default=None, help="where the study folders go (default: the system's)")
    ap.add_argument("--out", type=Path, default=None, help="default benchmarks/results/chaos_resume[_reader].json")
    a = ap.parse_args()
    result = reader(a) if a.reader else stub(a)
    print(json.dumps({k: v for k, v in result.items() if k != "moments"}, indent=2))
    out = a.out or Path(__file__).parent / "results" / ("chaos_resume_reader.json" if a.reader else "chaos_resume.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
