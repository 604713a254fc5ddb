"""The package's shape. The design card's top level exists; every module imports on its own in any order; there is no import
cycle (counting imports inside functions); imports go down the floors only — records (``schema``) at the
bottom importing nothing of quantgate, then ``io``, then the stages, which do not import each other, then the
tools built from stages, the study, the tune and the command line; the test scaffolding lives in ``tests/support``
and no runtime module imports it; no public stage function hands a plain dict to the next; and provenance is
read from the running source tree. The verdict's statistics (``judge/``) never reach into the study, and take their
settings as one record rather than a long list of loose arguments. (What the tree around the package must hold —
no code loaded from lab/, no ticket numbers, docs whose links resolve — is tests/test_tree.py.)"""

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.paths import REPO

PKG = REPO / "quantgate"

# The floors, from the ground up (docs/flow.md, "Layout"). A module may import its own package and any package
# on a lower floor; two packages on one floor do not import each other.
FLOORS = {
    "errors": 0, "assets": 0,
    "schema": 1,
    "io": 2,
    "recipes": 3,  # recipe YAML and presets: what quantize, sensitivity, speed and the study all read
    "heldout": 4, "quantize": 4, "serve": 4, "scoring": 4, "judge": 4, "reports": 4,  # the stages
    "lmeval": 5, "speed": 5,  # tools built from stages: lm-eval through a variant's server, the decode cost table
    "sensitivity": 6, "study": 6,  # KL per group (its --speedup reads speed's cost table); the whole study
    "gate": 7, "tune": 7,  # the gate re-makes a finished study's verdicts; the tune runs studies
    "commands": 8,
    "cli": 9,
    "__main__": 10,
}
STAGES = [p for p, f in FLOORS.items() if 4 <= f <= 7]
# Public functions that return another tool's format as that tool reads or writes it, or a YAML document as a
# user writes it — mappings handed to the outside, not records handed to the next stage.
FOREIGN = {
    "quantgate.study.demo.demo_study": "the demo's study YAML",
    "quantgate.tune.study.trial_study": "a trial's study YAML",
    "quantgate.recipes.model.to_llmcompressor": "llmcompressor's recipe",
    "quantgate.quantize.calibrate.calibration_samples": "the processor's tensors, as llmcompressor takes them",
    "quantgate.quantize.verify.read_safetensors_header": "a safetensors header",
    "quantgate.quantize.verify.checkpoint_tensors": "safetensors headers, tensor by tensor",
    "quantgate.serve.numerics.variant_formats": "the checkpoint's quantization_config",
    "quantgate.serve.numerics.measure_transformers_serve": "a measurement table, per module and input",
    "quantgate.serve.client.chat_body": "an OpenAI chat-completions request body",
    "quantgate.serve.backends.derive.backend_flags": "argparse's table of flags",
    "quantgate.scoring.olmocr_checks.prepare": "olmOCR-bench's check objects, kept as given",
    "quantgate.scoring.olmocr_checks.pageset_checks": "olmOCR-bench's check objects as pages.jsonl holds them "
                                                      "(unprepared, with where each lies), for validate_checks",
    "quantgate.speed.profile.profiler_config": "vLLM's --profiler-config JSON",
    "quantgate.speed.trace.load_trace": "a torch-profiler trace (Chrome trace JSON), as torch writes it",
}

# The design card's top level (docs/flow.md, "Layout"): what a new engineer looks for first.
CARD = ["cli.py", "commands", "recipes", "heldout", "scoring", "reports", "quantize", "gate", "schema", "io", "serve",
        "judge", "study", "speed", "sensitivity", "tune", "lmeval"]
# A function of the verdict's statistics takes its settings as one record; more loose parameters than this means
# the record is being unpacked again.
MAX_PARAMETERS = 8


def _modules() -> list[str]:
    mods = []
    for f in sorted(PKG.rglob("*.py")):
        rel = f.relative_to(REPO).with_suffix("")
        parts = list(rel.parts[:-1]) if rel.name == "__init__" else list(rel.parts)
        if parts[-1] != "__main__":  # running it is its import
            mods.append(".".join(parts))
    return mods


def _module_file(name: str) -> Path | None:
    base = REPO.joinpath(*name.split("."))
    for f in (base.with_suffix(".py"), base / "__init__.py"):
        if f.is_file():
            return f
    return None


@pytest.mark.parametrize("order", ["forward", "reverse"])
def test_every_module_imports_in_a_fresh_interpreter(order):
    mods = _modules()
    assert len(mods) > 50 and "quantgate.serve.backends.external" in mods
    if order == "reverse":
        mods = mods[::-1]
    code = "import importlib, sys\nfor m in sys.argv[1:]:\n    importlib.import_module(m)\nprint('ok', len(sys.argv) - 1)"
    r = subprocess.run([sys.executable, "-c", code, *mods], capture_output=True, text=True, cwd=REPO, timeout=600,
                       env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin", "HF_HUB_OFFLINE": "1"})
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.split() == ["ok", str(len(mods))]


def _imports(path: Path, module: str) -> set[str]:
    """Modules (of quantgate, or of the tests' support package) ``module`` imports, anywhere in the file (a
    function-level import that closes a cycle only works by luck of call order)."""
    found = set()
    pkg = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(pkg.split(".")[: len(pkg.split(".")) - node.level + 1] + ([base] if base else []))
            # `from a.b import c`: the submodule a.b.c when there is one, else a name of a.b
            names = [f"{base}.{a.name}" if _module_file(f"{base}.{a.name}") else base for a in node.names]
        else:
            continue
        found.update(n for n in names if n.split(".")[0] in ("quantgate", "tests") and n != module)
    return found


def _graph() -> dict[str, set[str]]:
    return {m: {n for n in _imports(_module_file(m), m) if _module_file(n)} for m in _modules()}


def test_no_import_cycle():
    graph = _graph()
    # a package's __init__ importing its own submodules is how packages work; a submodule importing
    # its package's __init__ back is the cycle this test is for
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(m: str) -> None:
        state[m] = 1
        stack.append(m)
        for n in sorted(graph.get(m, ())):
            if state.get(n) == 1:
                cycle = stack[stack.index(n):] + [n]
                pytest.fail("import cycle: " + " -> ".join(cycle))
            if n not in state:
                visit(n)
        stack.pop()
        state[m] = 2

    for m in graph:
        if m not in state:
            visit(m)


def test_the_detector_sees_a_cycle(tmp_path, monkeypatch):
    # the old cli <-> commands shape: commands import a helper from cli, cli imports commands in a function
    (tmp_path / "quantgate" / "commands").mkdir(parents=True)
    (tmp_path / "quantgate" / "__init__.py").write_text("")
    (tmp_path / "quantgate" / "cli.py").write_text("def build():\n    from quantgate import commands\n")
    (tmp_path / "quantgate" / "commands" / "__init__.py").write_text("from quantgate.cli import existing_path\n")
    monkeypatch.setattr(sys.modules[__name__], "REPO", tmp_path)
    monkeypatch.setattr(sys.modules[__name__], "PKG", tmp_path / "quantgate")
    with pytest.raises(pytest.fail.Exception, match="import cycle: .*quantgate.cli"):
        test_no_import_cycle()


def _floor(module: str) -> tuple[str, int]:
    parts = module.split(".")
    top = parts[1] if len(parts) > 1 else ""
    return top, FLOORS.get(top, -1)


def test_every_package_has_a_floor():
    tops = {_floor(m)[0] for m in _modules()} - {""}
    assert tops <= set(FLOORS), f"packages without a floor (add them to FLOORS and docs/flow.md): {tops - set(FLOORS)}"


def test_imports_go_down_the_floors():
    """``schema`` imports nothing of quantgate but ``errors``; ``io`` only ``schema``; a stage only ``schema``,
    ``io`` and itself (stages do not import each other: ``report`` does not import ``tune``); and so on up."""
    wrong = []
    for m, deps in _graph().items():
        top, floor = _floor(m)
        if not top:  # quantgate/__init__.py: the version only
            assert not deps, deps
            continue
        for n in deps:
            if n.startswith("tests."):
                continue  # test_runtime_package_holds_no_test_scaffolding says what is wrong with that
            ntop, nfloor = _floor(n)
            if ntop != top and nfloor >= floor:
                wrong.append(f"{m} (floor {floor}) imports {n} (floor {nfloor})")
    assert not wrong, "\n".join(sorted(wrong))


def test_the_floor_rule_sees_a_stage_importing_another(tmp_path, monkeypatch):
    # the old reports <-> tune shape: the report imported the tune's records to draw its section
    for pkg in ("reports", "tune"):
        (tmp_path / "quantgate" / pkg).mkdir(parents=True)
        (tmp_path / "quantgate" / pkg / "__init__.py").write_text("")
    (tmp_path / "quantgate" / "__init__.py").write_text("")
    (tmp_path / "quantgate" / "reports" / "tuning.py").write_text("from quantgate.tune.records import TuneFile\n")
    (tmp_path / "quantgate" / "tune" / "records.py").write_text("")
    monkeypatch.setattr(sys.modules[__name__], "REPO", tmp_path)
    monkeypatch.setattr(sys.modules[__name__], "PKG", tmp_path / "quantgate")
    with pytest.raises(AssertionError, match=r"quantgate.reports.tuning \(floor 4\) imports quantgate.tune.records"):
        test_imports_go_down_the_floors()


def test_runtime_package_holds_no_test_scaffolding():
    """Fixtures, the fake vLLM and the stub servers live in tests/support; no runtime module imports them, and
    the runtime package has no test package to import."""
    assert not (PKG / "testing").exists() and not (PKG / "fixtures.py").exists()
    assert (REPO / "tests" / "support" / "fixtures.py").is_file() and (REPO / "tests" / "support" / "stub.py").is_file()
    for m, deps in _graph().items():
        assert not any(n.startswith("tests") for n in deps), m
    code = "import importlib.util, sys; print(importlib.util.find_spec('quantgate.testing') is None)"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd="/", timeout=60,
                       env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})
    assert r.stdout.strip() == "True", r.stderr


def _dict_returns(path: Path, module: str) -> list[str]:
    """Public module-level functions whose return annotation hands a record over as a dict: ``dict``,
    ``dict[..., Any]``, ``dict[..., dict]`` or a ``list`` of one (a mapping of text cells or of numbers is data)."""

    def recordish(node: ast.expr) -> bool:
        if isinstance(node, ast.Name):
            return node.id in ("dict", "Any")
        if isinstance(node, ast.Subscript):
            outer = node.value.id if isinstance(node.value, ast.Name) else ""
            args = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
            if outer == "dict":
                return recordish(args[-1]) or (isinstance(args[-1], ast.Name) and args[-1].id == "Any")
            if outer in ("list", "tuple", "Iterator"):
                return any(recordish(a) for a in args)
        if isinstance(node, ast.BinOp):  # X | None
            return recordish(node.left) or recordish(node.right)
        return False

    found = []
    for node in ast.parse(path.read_text("utf-8")).body:
        if isinstance(node, ast.FunctionDef) and not node.name.startswith("_") and node.returns is not None:
            if recordish(node.returns) and f"{module}.{node.name}" not in FOREIGN:
                found.append(f"{module}.{node.name} -> {ast.unparse(node.returns)}")
    return found


def test_no_public_stage_function_returns_a_dict():
    found = [x for m in _modules() if _floor(m)[0] in STAGES for x in _dict_returns(_module_file(m), m)]
    assert not found, "\n".join(found)


def test_the_dict_rule_sees_one(tmp_path):
    f = tmp_path / "m.py"
    f.write_text("from typing import Any\n\ndef a() -> dict:\n    pass\n\ndef b() -> list[dict[str, Any]] | None:\n"
                 "    pass\n\ndef c() -> dict[str, float]:\n    pass\n\ndef _d() -> dict:\n    pass\n")
    assert _dict_returns(f, "m") == ["m.a -> dict", "m.b -> list[dict[str, Any]] | None"]


def _no_pythonpath() -> dict[str, str]:
    # the tests' own PYTHONPATH (conftest: the repository, for tests.support) would put a checkout's
    # quantgate.egg-info — an installed distribution's metadata — on the path
    return {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}


def test_provenance_from_a_source_tree_without_an_installed_dist(tmp_path):
    """Run from a checkout on PYTHONPATH with no installed distribution (python -S: no
    site-packages), quantgate's version and commit still come from the running source tree."""
    import quantgate

    code = ("import json, sys; sys.path.insert(0, sys.argv[1])\n"
            "import importlib.metadata as md\n"
            "from quantgate.io.provenance import git_commit, package_versions\n"
            "try:\n    md.version('quantgate'); installed = True\n"
            "except md.PackageNotFoundError:\n    installed = False\n"
            "print(json.dumps({'installed': installed, 'versions': package_versions(['quantgate', 'torch']),"
            " 'commit': git_commit()}))")
    # A clone, not REPO itself: an editable install leaves quantgate.egg-info (dist metadata) in REPO.
    src = tmp_path / "checkout"
    subprocess.run(["git", "clone", "-q", str(REPO), str(src)], check=True, timeout=120)
    r = subprocess.run([sys.executable, "-S", "-c", code, str(src)], capture_output=True, text=True, cwd=tmp_path,
                       timeout=60, env=_no_pythonpath())
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    head = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, cwd=src).stdout.strip()
    assert not got["installed"]  # the case of the bug: no dist metadata to read
    assert got["versions"] == {"quantgate": quantgate.__version__, "torch": None}
    assert got["commit"] == head and len(head) == 40


def test_provenance_refuses_another_repositorys_commit(tmp_path):
    # a copy of the package inside some other git repository (a vendored tree): no commit, not theirs
    import shutil

    other = tmp_path / "other"
    subprocess.run(["git", "init", "-q", str(other)], check=True)
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "x"],
                   cwd=other, check=True)
    (tmp_path / "other" / "vendor").mkdir()
    shutil.copytree(PKG, tmp_path / "other" / "vendor" / "quantgate",
                    ignore=shutil.ignore_patterns("assets", "__pycache__"))
    code = "import sys; sys.path.insert(0, sys.argv[1]); from quantgate.io.provenance import git_commit; print(git_commit())"
    r = subprocess.run([sys.executable, "-S", "-c", code, str(tmp_path / "other" / "vendor")], capture_output=True,
                       text=True, timeout=60, env=_no_pythonpath())
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "None"


# --- no code carried in from the oracles ----------------------------------------------------------------

CODE_WINDOW = 8  # consecutive code lines (whitespace folded; blank, comment, import and docstring-quote lines out)
CODE_SUFFIXES = (".py", ".js", ".css")


def _code_lines(text: str) -> list[str]:
    out = []
    for line in text.splitlines():
        s = " ".join(line.split())
        # imports left out too: two files may well import the same things in the same order
        if len(s) >= 4 and not s.startswith(("#", "import ", "from ")) and s not in ('"""', "'''"):
            out.append(s)
    return out


def carried_in(files: dict[str, bytes], ref: Path) -> list[str]:
    """Which of ``files`` (name -> bytes) are byte-identical to a file under ``ref``, or share CODE_WINDOW
    consecutive code lines with a .py/.js/.css there (a copied function, even re-indented)."""
    import hashlib

    # an empty file (a package's __init__.py, a .gitkeep) carries nothing of anyone's
    refs = [p for p in ref.rglob("*") if p.is_file() and p.stat().st_size > 0]
    digests = {hashlib.sha256(p.read_bytes()).hexdigest(): p for p in refs}
    windows: dict[tuple[str, ...], Path] = {}
    for p in refs:
        if p.suffix in CODE_SUFFIXES:
            lines = _code_lines(p.read_text("utf-8", errors="replace"))
            for i in range(len(lines) - CODE_WINDOW + 1):
                windows.setdefault(tuple(lines[i:i + CODE_WINDOW]), p)
    found = []
    for name, data in files.items():
        digest = hashlib.sha256(data).hexdigest()
        if digest in digests:
            found.append(f"{name} is {digests[digest].relative_to(ref)}")
        elif name.endswith(CODE_SUFFIXES):
            lines = _code_lines(data.decode("utf-8", errors="replace"))
            same = next((windows[k] for i in range(len(lines) - CODE_WINDOW + 1)
                         if (k := tuple(lines[i:i + CODE_WINDOW])) in windows), None)
            if same is not None:
                found.append(f"{name} repeats {CODE_WINDOW} lines of {same.relative_to(ref)}")
    return found


def _reference() -> Path:
    from tests.support.paths import ORACLE_ABSENT, SHARED, oracle_missing

    ref = SHARED / "reference"
    if not (ref.is_dir() and any(ref.rglob("*.py"))):
        pytest.skip(oracle_missing(ref) or f"{ORACLE_ABSENT}: no Python files under {ref}")
    return ref


def test_no_tracked_file_carries_the_reference_oracles_code():
    """The upstream olmOCR-bench and OmniDocBench trees under ../shared/reference are oracles the differential tests
    import from there; their facts and behaviour carry over, their files and code do not."""
    ref = _reference()
    tracked = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True).stdout
    files = {n: (REPO / n).read_bytes() for n in filter(None, tracked.decode().split("\0")) if (REPO / n).is_file()}
    assert not carried_in(files, ref)


def test_the_copy_check_finds_a_pasted_function_and_a_copied_file_but_not_shared_imports():
    ref = _reference()
    src = max(ref.rglob("*.py"), key=lambda p: len(_code_lines(p.read_text("utf-8", errors="replace"))))
    lines = [x for x in src.read_text("utf-8").splitlines() if x.strip()]
    body = [x for x in lines if not x.lstrip().startswith(("import ", "from "))][10:10 + CODE_WINDOW + 4]
    pasted = "def mine():\n    return 1\n\n" + "\n".join("    " + x for x in body) + "\n"  # re-indented
    imports = "\n".join(x for x in lines if x.startswith(("import ", "from "))) + "\nx = 1\n"
    got = carried_in({"a/pasted.py": pasted.encode(), "a/copy.txt": src.read_bytes(), "a/imports.py": imports.encode()},
                     ref)
    assert [g.split()[0] for g in got] == ["a/pasted.py", "a/copy.txt"], got


def test_the_design_cards_top_level_exists():
    missing = [n for n in CARD if not (PKG / n).exists()]
    assert not missing, f"the design card names {missing}, which quantgate/ does not have"
    old = [n for n in ("pages", "score", "report", "cli") if (PKG / n).is_dir()]
    assert not old, f"the old layout's packages are back: {old} (heldout/, scoring/, reports/, cli.py)"
    assert set(CARD) - {"cli.py"} <= set(FLOORS), "every package of the card has a floor"


def test_judge_does_not_reach_into_the_study():
    """The statistics are a function of scores and one settings record: ``judge/`` imports neither the study
    (``study/``, which calls it) nor the study's YAML model (``schema/study.py``)."""
    wrong = sorted(f"{m} imports {n}" for m, deps in _graph().items() if m.startswith("quantgate.judge")
                   for n in deps if n.startswith(("quantgate.study", "quantgate.schema.study")))
    assert not wrong, "\n".join(wrong)


def _long_signatures(paths: list[Path]) -> list[str]:
    long = []
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                a = node.args
                names = [x.arg for x in a.posonlyargs + a.args + a.kwonlyargs if x.arg not in ("self", "cls")]
                if len(names) > MAX_PARAMETERS or a.kwarg is not None:
                    rel = path.relative_to(REPO)
                    hidden = " and **" + a.kwarg.arg if a.kwarg is not None else ""
                    long.append(f"{rel}:{node.lineno} {node.name}: {len(names)} parameters{hidden}")
    return long


def test_verdict_functions_take_their_settings_as_one_record():
    paths = sorted((PKG / "judge").rglob("*.py")) + [PKG / "schema" / "verdict.py", PKG / "schema" / "settings.py"]
    long = _long_signatures(paths)
    assert not long, f"more than {MAX_PARAMETERS} parameters (or **kwargs):\n" + "\n".join(long)


def test_the_signature_rule_sees_a_long_one_and_hidden_keywords(tmp_path, monkeypatch):
    f = tmp_path / "m.py"
    f.write_text("def ok(self, a, b, c, d, e, f, g, h):\n    pass\n\n\ndef long(a, b, c, d, e, f, g, h, *, i):\n"
                 "    pass\n\n\ndef hides(a, **kw):\n    pass\n")
    monkeypatch.setattr(sys.modules[__name__], "REPO", tmp_path)
    assert _long_signatures([f]) == ["m.py:5 long: 9 parameters", "m.py:9 hides: 1 parameters and **kw"]


# What marks a test file as one that reads the reference oracles beside the clone (tests.support.paths).
ORACLE_NAMES = {"SHARED", "OLMOCR_SAMPLE"}


def _literal_skips(path: Path) -> list[str]:
    """Skips in a file that reads ../shared whose reason is written in the file (a string, or a name bound to one)
    or missing, rather than got from ``oracle_missing`` (directly or through a helper built on it): such a reason
    lacks the mark ``QUANTGATE_REQUIRE_ORACLES`` turns into a failure, so CI would pass with the test skipped."""
    text = path.read_text("utf-8")
    tree = ast.parse(text)
    if "../shared" not in text and not any(isinstance(n, ast.Name) and n.id in ORACLE_NAMES or
                                           isinstance(n, ast.alias) and n.name in ORACLE_NAMES for n in ast.walk(tree)):
        return []
    bound = {t.id: n.value for n in tree.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)}

    def written(e: ast.expr | None) -> bool:  # a reason no helper made
        if isinstance(e, ast.Name) and e.id in bound:
            e = bound[e.id]
        if isinstance(e, ast.BoolOp):  # `helper() or "…"`: the helper's reason whenever it skips
            return written(e.values[0])
        return e is None or isinstance(e, (ast.Constant, ast.JoinedStr)) or (
            isinstance(e, ast.BinOp) and not any(isinstance(x, ast.Call) for x in ast.walk(e)))

    found = []
    for node in ast.walk(tree):
        name = node.func.attr if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) else None
        if name in ("skip", "skipif"):
            kw = {k.arg: k.value for k in node.keywords}
            pos = node.args[1:2] if name == "skipif" else node.args[:1]
            if written(kw.get("reason", kw.get("msg", pos[0] if pos else None))):
                found.append(f"{path.relative_to(REPO)}:{node.lineno} {name} with its own reason")
    return found


def test_oracle_tests_skip_only_through_oracle_missing():
    """A test file that reads ../shared (``SHARED``, ``OLMOCR_SAMPLE``, a ``../shared`` path) skips only with the
    reason ``tests.support.paths.oracle_missing`` gives: the one CI fails on (tests/conftest.py)."""
    found = [x for f in sorted((REPO / "tests").rglob("*.py")) for x in _literal_skips(f)]
    assert not found, "skip through tests.support.paths.oracle_missing instead:\n" + "\n".join(found)


def test_the_oracle_skip_rule_sees_a_reason_of_its_own(tmp_path, monkeypatch):
    monkeypatch.setattr(sys.modules[__name__], "REPO", tmp_path)
    head = "import pytest\nfrom tests.support.paths import OLMOCR_SAMPLE, oracle_missing\n"
    cases = {"own.py": 'm = pytest.mark.skipif(not OLMOCR_SAMPLE.is_dir(), reason="sample " "absent")\n',
             "bound.py": 'WHY = f"{OLMOCR_SAMPLE} absent"\nm = pytest.mark.skipif(True, reason=WHY)\n',
             "call.py": 'def test():\n    pytest.skip("no sample")\n',
             "none.py": "m = pytest.mark.skipif(not OLMOCR_SAMPLE.is_dir())\n",
             "helper.py": "m = pytest.mark.skipif(True, reason=oracle_missing(OLMOCR_SAMPLE) or '')\n",
             "other.py": 'import pytest\nm = pytest.mark.skipif(True, reason="no Chromium")\n'}
    for name, body in cases.items():
        (tmp_path / name).write_text(body if name == "other.py" else head + body)
    got = {name: bool(_literal_skips(tmp_path / name)) for name in cases}
    assert got == {"own.py": True, "bound.py": True, "call.py": True, "none.py": True, "helper.py": False,
                   "other.py": False}
