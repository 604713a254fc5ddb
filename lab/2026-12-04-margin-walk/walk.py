"""Follow one margin from a study YAML to the gate's exit code: every call of a function in ``quantgate/`` whose
arguments carry the margin, counted as stays (such calls), rooms (distinct modules among them) and returns (entries
into a module the walk had left before).

A small real study on the stub server (``tests.support.stub_study``: the stub answers each page with its truth, a
candidate's ``--corrupt`` share of pages badly; quantize is its stand-in, everything else is the study's own code)
runs with a distinctive margin (``margins: {ned: 0.0137}``) through ``quantgate.cli.main(["study", ...])``, then
``quantgate.cli.main(["gate", OUT])`` on its folder, both in this process under ``sys.setprofile`` (and
``threading.setprofile`` for threads they start). The tree measured is whatever ``quantgate`` imports: point
PYTHONPATH at a checkout (a ``git worktree`` of the commit) to measure that commit.

    PYTHONPATH=/tmp/walk-before .venv/bin/python lab/2026-12-04-margin-walk/walk.py --label before

What carries the margin (written here because no profiler we keep matches values inside arguments): an argument
(positional, keyword, ``*args`` item, ``**kwargs`` value, ``self`` included) that is the float ±margin, or a pydantic
record, dataclass, dict, list or tuple holding it directly (depth 1) — and, reported beside it, holding it one
container further (depth 2: a ``Study`` holds it in its ``margins`` dict, the way the YAML spells it). A generator
or coroutine counts on its first entry, not on each resume.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import dis
import gzip
import io
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from itertools import pairwise
from pathlib import Path
from typing import NamedTuple

from pydantic import BaseModel

HERE = Path(__file__).resolve().parent
MARGIN = 0.0137  # distinctive: no default margin, bound or constant in quantgate has this value
CANDIDATES = {"same": 0.0, "bad": 0.6}  # one candidate that passes, one that regresses: both verdict paths walked
# Fixed: 16 single-page documents (a smoke-test size, the minima lowered so the verdicts decide). Sequential: 40
# pages, looks at 20 and 40, the path where the whole study record was handed into judge/ (judge.replay).
FIXED = {"pages": 16, "min_pages": 5, "min_documents": 5}
SEQUENTIAL = {"pages": 40, "min_pages": 10, "min_documents": 10, "sequential": {"looks": 2, "first_look": 10}}
# Packages renamed by the design card's layout (d3c77cb, git mv only), named as today so that the package-level
# view compares like with like across it; module-level rooms are counted under each commit's own names.
MOVED = {"quantgate.study.gate": "quantgate.gate", "quantgate.study.attest": "quantgate.gate",
         "quantgate.pages": "quantgate.heldout", "quantgate.score": "quantgate.scoring",
         "quantgate.report": "quantgate.reports", "quantgate.cli": "quantgate.commands"}
_GEN = 0x20 | 0x80 | 0x200  # CO_GENERATOR | CO_COROUTINE | CO_ASYNC_GENERATOR


def carries(v, depth: int, margin: float) -> bool:
    """Whether ``v`` is ±margin, or holds it within ``depth`` levels of records, dataclasses, dicts, lists, tuples."""
    if isinstance(v, float):
        return v == margin or v == -margin
    if depth <= 0 or isinstance(v, (str, bytes, int, type(None))):
        return False
    if isinstance(v, BaseModel):
        items = v.__dict__.values()
    elif dataclasses.is_dataclass(v) and not isinstance(v, type):
        items = [getattr(v, f.name, None) for f in dataclasses.fields(v)]
    elif isinstance(v, dict):
        items = v.values()
    elif isinstance(v, (list, tuple)):
        items = v
    else:
        return False
    return any(carries(x, depth - 1, margin) for x in items)


class Stay(NamedTuple):
    """One call whose arguments carry the margin."""

    module: str
    function: str
    depth: int  # the least depth at which an argument carries it: 1 or 2
    phase: str  # study or gate
    carrier: str  # the type of the first argument carrying it (float, dict, Study, VerdictSettings, …)


_NONE = object()


class Walk:
    """The profile function: records, in call order, the module of each quantgate call that carries the margin."""

    def __init__(self, package_dir: Path, margin: float):
        self.prefix = str(package_dir) + os.sep
        self.margin = margin
        self.codes: dict = {}  # code object -> (module, argument names, *args, **kwargs, first RESUME) or None
        self.calls: list[Stay] = []
        self.phase = ""
        self.lock = threading.Lock()

    def _info(self, frame):
        code = frame.f_code
        if not code.co_filename.startswith(self.prefix):
            return None
        n = code.co_argcount + code.co_kwonlyargcount
        names = list(code.co_varnames[:n])
        star = code.co_varnames[n] if code.co_flags & 0x04 else None  # CO_VARARGS
        kw = code.co_varnames[n + (star is not None)] if code.co_flags & 0x08 else None  # CO_VARKEYWORDS
        first = None
        if code.co_flags & _GEN:
            first = next((i.offset for i in dis.get_instructions(code) if i.opname == "RESUME"), 0)
        return frame.f_globals.get("__name__", "?"), names, star, kw, first

    def __call__(self, frame, event, arg):
        if event != "call":
            return
        code = frame.f_code
        info = self.codes.get(code, False)
        if info is False:
            info = self.codes[code] = self._info(frame)
        if info is None:
            return
        module, names, star, kw, first = info
        if first is not None and frame.f_lasti > first:
            return  # a generator or coroutine resumed, not called
        loc = frame.f_locals
        args = [loc.get(a) for a in names]
        if star:
            args.extend(loc.get(star) or ())
        if kw:
            args.extend((loc.get(kw) or {}).values())
        for depth in (1, 2):
            carrier = next((a for a in args if carries(a, depth, self.margin)), _NONE)
            if carrier is not _NONE:
                with self.lock:
                    self.calls.append(Stay(module, code.co_qualname, depth, self.phase, type(carrier).__name__))
                return


def package(module: str) -> str:
    """A module's package under today's names (``MOVED``)."""
    for old, new in MOVED.items():
        if module == old or module.startswith(old + "."):
            return new
    return ".".join(module.split(".")[:2])


def summarize(calls: list[Stay], depth: int) -> dict:
    """Stays, rooms, returns of the calls that carry the margin within ``depth``; the same at package level, and how
    often the walk crosses between study/ and judge/."""
    calls = [c for c in calls if c.depth <= depth]
    mods = [c.module for c in calls]

    def rooms_returns(seq):
        visits = [x for i, x in enumerate(seq) if i == 0 or seq[i - 1] != x]  # consecutive stays in a room: one visit
        seen, returns = set(), 0
        for x in visits:
            returns += x in seen
            seen.add(x)
        return visits, len(seen), returns

    visits, rooms, returns = rooms_returns(mods)
    pkgs = [package(m) for m in mods]
    pvisits, prooms, preturns = rooms_returns(pkgs)
    crossings = sum({a, b} == {"quantgate.study", "quantgate.judge"} for a, b in pairwise(pvisits))
    # the same with the records' floor (schema/, which every floor calls into) left out: the stage-to-stage walk
    stages, _, _ = rooms_returns([p for p in pkgs if p != "quantgate.schema"])
    stage_crossings = sum({a, b} == {"quantgate.study", "quantgate.judge"} for a, b in pairwise(stages))
    short = lambda seq: " → ".join(x.removeprefix("quantgate.") for x in seq)  # noqa: E731
    return {"stays": len(mods), "functions": len({(c.module, c.function) for c in calls}), "rooms": rooms,
            "returns": returns, "visits": len(visits), "packages": prooms, "package_returns": preturns,
            "study_judge_crossings": crossings, "study_judge_crossings_without_schema": stage_crossings,
            "carriers_into_judge": dict(Counter(c.carrier for c in calls if package(c.module) == "quantgate.judge")),
            "per_module": dict(Counter(mods).most_common()),
            "per_function": dict(Counter(f"{c.module}.{c.function} ({c.carrier})" for c in calls).most_common()),
            "module_sequence": short(visits), "package_sequence": short(pvisits)}


def _tree_commit(tree: Path) -> dict:
    git = lambda *a: subprocess.run(["git", "-C", str(tree), *a], capture_output=True, text=True).stdout.strip()  # noqa: E731
    return {"commit": git("rev-parse", "HEAD"), "subject": git("log", "-1", "--format=%s")[:120],
            "dirty": bool(git("status", "--porcelain", "--", "quantgate"))}


def run(label: str, work: Path, sequential: bool, control: bool = False) -> dict:
    import quantgate
    import quantgate.quantize as qz
    from quantgate.cli import main
    from tests.support.stub_study import fake_quantize, study_yaml

    try:
        from quantgate.heldout.synth import synth_pages
    except ImportError:  # the layout before the design card's: pages/ for heldout/
        from quantgate.pages.synth import synth_pages  # type: ignore[no-redef]

    pkg = Path(quantgate.__file__).resolve().parent
    tree = pkg.parent
    os.environ["PYTHONPATH"] = os.pathsep.join([str(tree), os.environ.get("PYTHONPATH", "")])  # the stub server's
    os.environ["QUANTGATE_CACHE_DIR"] = str(work / "cache")
    size = dict(SEQUENTIAL if sequential else FIXED)
    synth_pages(work / "pages", size.pop("pages"), seed=7, profile="simple", calibration_fraction=0.0)
    margins = {} if control else {"ned": MARGIN}  # the control: the margin left out, the walk must find nothing
    study = study_yaml(work / "study.yaml", work / "pages", CANDIDATES, concurrency=[1], margins=margins, **size)
    out = work / "out"

    walk = Walk(pkg, MARGIN)
    codes: dict[str, int] = {}
    console = io.StringIO()  # the verbs' own output, kept for walk.json (the gate's last line says its outcome)
    qz.quantize = fake_quantize  # the stand-in quantize, as tests.support.stub_study.run does
    t0 = time.perf_counter()
    threading.setprofile(walk)
    sys.setprofile(walk)
    try:
        for phase, argv in (("study", ["study", str(study), "-o", str(out)]), ("gate", ["gate", str(out)])):
            walk.phase = phase
            try:
                with contextlib.redirect_stdout(console):
                    codes[phase] = main(argv)
            except SystemExit as e:
                codes[phase] = e.code if isinstance(e.code, int) else 1
    finally:
        sys.setprofile(None)
        threading.setprofile(None)  # type: ignore[arg-type]
    wall = time.perf_counter() - t0
    calls = walk.calls
    short = ("module_sequence", "package_sequence", "per_module", "per_function")
    by_phase = {f"depth{d}": {p: {k: v for k, v in summarize([c for c in calls if c.phase == p],
                                                              d).items() if k not in short}
                              for p in ("study", "gate")} for d in (1, 2)}
    return {"label": label, "command": " ".join([f"PYTHONPATH={tree}", sys.executable, *sys.argv]),
            **_tree_commit(tree), "quantgate": str(pkg), "margin": MARGIN, "candidates": CANDIDATES,
            "study": {"sequential": sequential, **(SEQUENTIAL if sequential else FIXED), "margins": margins},
            "exit_codes": codes, "gate_says": console.getvalue().strip().splitlines()[-1:],
            "profiled_wall_s": round(wall, 1),
            "depth1": summarize(calls, 1), "depth2": summarize(calls, 2),
            "by_phase": by_phase}


SELF_CHECK = {  # a package whose walk is known by reading it: the instrument checked before it is trusted
    "a.py": """
import dataclasses
from . import b

@dataclasses.dataclass
class Holder:
    margin: float

def start(margins):                # stay 1 (a dict holding it)
    m = margins["ned"]
    b.take(m)                      # stay 2 (the float), b
    b.nothing(0.5)                 # not a stay
    again(Holder(m))               # stay 3 (a dataclass), back in a: a return
    list(b.gen(-m))                # stay 4 once (a generator's resumes are not calls), b again: a return
    b.deep({"x": {"y": m}})        # depth 2 only (stay 5, still in b)
    return m

def again(h):
    return h.margin
""",
    "b.py": """
def take(m):
    return m

def nothing(x):
    return x

def gen(m):
    yield m
    yield m

def deep(d):
    return d
""",
}


def self_check() -> None:
    """The instrument on ``SELF_CHECK``: stays 4, rooms 2, returns 2 at depth 1; at depth 2 one more stay (in b, where the walk already is)."""
    with tempfile.TemporaryDirectory() as tmp:
        pkg = Path(tmp) / "walkcheck"
        pkg.mkdir()
        (pkg / "__init__.py").write_text("")
        for name, text in SELF_CHECK.items():
            (pkg / name).write_text(text)
        sys.path.insert(0, tmp)
        try:
            import walkcheck.a

            walk = Walk(pkg.resolve(), MARGIN)
            sys.setprofile(walk)
            try:
                walkcheck.a.start({"ned": MARGIN, "other": 0.5})
            finally:
                sys.setprofile(None)
        finally:
            sys.path.remove(tmp)
    got = [(summarize(walk.calls, d)[k]) for d in (1, 2) for k in ("stays", "rooms", "returns")]
    assert got == [4, 2, 2, 5, 2, 2], f"the instrument miscounts its own check: {got} ({walk.calls})"


def table(runs: dict) -> str:
    cols = {"stays": "stays", "functions": "functions", "rooms": "rooms", "returns": "returns",
            "study_judge_crossings": "study↔judge", "study_judge_crossings_without_schema": "…w/o schema"}
    lines = [f"{'run':<14} {'commit':<8} {'depth':>5} " + " ".join(f"{v:>11}" for v in cols.values())
             + f" {'Study→judge':>11}  exit codes (study, gate)"]
    for label, r in runs.items():
        for d in ("depth1", "depth2"):
            s = r[d]
            lines.append(f"{label:<14} {r['commit'][:8]:<8} {d[-1]:>5} " + " ".join(f"{s[k]:>11}" for k in cols)
                         + f" {s['carriers_into_judge'].get('Study', 0):>11}  {r['exit_codes']['study']}, "
                         f"{r['exit_codes']['gate']}")
    return "\n".join(lines)


def _read(path: Path) -> dict:
    """walk.json, kept gzipped (its module sequences make it ~380 KB as text)."""
    data = path.read_bytes()
    return json.loads(gzip.decompress(data) if path.suffix == ".gz" else data)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--label", help="the run's name in walk.json (before, after, …); without it, the table of "
                    "walk.json's runs")
    ap.add_argument("--sequential", action="store_true", help="a sequential study (looks replayed by judge.replay)")
    ap.add_argument("--control", action="store_true", help="leave the margin out of the YAML (the registry's margin "
                    "is used): a walk that still finds the value would be counting something else")
    ap.add_argument("--out", type=Path, default=HERE / "walk.json.gz")
    a = ap.parse_args()
    if a.label is None:
        print(table(_read(a.out)["runs"]))
        return 0
    self_check()
    with tempfile.TemporaryDirectory(prefix=f"walk-{a.label}-") as tmp:
        r = run(a.label, Path(tmp), a.sequential, a.control)
    runs = _read(a.out)["runs"] if a.out.is_file() else {}
    runs[a.label] = r
    tmp_out = a.out.with_name(a.out.name + ".tmp")
    text = (json.dumps({"runs": runs}, indent=1) + "\n").encode()
    tmp_out.write_bytes(gzip.compress(text, 9, mtime=0) if a.out.suffix == ".gz" else text)
    tmp_out.replace(a.out)
    print(table(runs))
    print(f"\n{a.label} module sequence (depth 1): {r['depth1']['module_sequence']}")
    print(f"wrote {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
