"""Issue 18: the package's shape — every module imports on its own in any order, no import cycle
(counting imports inside functions), the runtime package free of test scaffolding, and provenance
read from the running source tree."""

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.paths import REPO

PKG = REPO / "quantgate"


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
    """quantgate modules ``module`` imports, anywhere in the file (a function-level import that closes a
    cycle only works by luck of call order)."""
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
        found.update(n for n in names if n.split(".")[0] in ("quantgate", "tests") and _module_file(n) and n != module)
    return found


def test_no_import_cycle():
    graph = {m: _imports(_module_file(m), m) for m in _modules()}
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


def test_runtime_package_holds_no_test_scaffolding():
    # fixtures and the stub server live in tests.support; no stage imports them
    assert not (PKG / "fixtures.py").exists() and not (PKG / "serve" / "stub.py").exists()
    for m in _modules():
        if m.startswith("tests.support"):
            continue
        assert not any(n.startswith("tests.support") for n in _imports(_module_file(m), m)), m


def test_provenance_from_a_source_tree_without_an_installed_dist(tmp_path):
    """Issue 20: run from a checkout on PYTHONPATH with no installed distribution (python -S: no
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
                       timeout=60)
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
                       text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "None"
