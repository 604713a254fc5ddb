"""The tree around the package is the product, not its lab notebook: nothing under ``quantgate/``, ``tests/`` or
``benchmarks/`` loads code from ``lab/`` (dated one-off measurements); no runtime module and no test file's header
cites this project's tickets (a comment says why, and an upstream bug is cited by its URL); every test file opens
with what it protects; and every relative link in the docs and the README points at a file that exists."""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

from tests.support.paths import REPO

PKG = REPO / "quantgate"
# "issue 30", "Issues 18 and 29", "issue #7"; a URL (github.com/…/issues/123) has no space and stays allowed
TICKET = re.compile(r"\b[Ii]ssues?\s+#?\d+")
# [text](target) in markdown, the target up to a space, a closing parenthesis or an anchor
LINK = re.compile(r"\[[^\]]*\]\(([^)\s#]+)(?:#[^)\s]*)?\)")
_LOADERS = {"spec_from_file_location", "run_path", "import_module", "insert", "append", "SourceFileLoader"}


def _lab_imports(path: Path) -> list[str]:
    """Where ``path`` imports code from ``lab/``: an ``import lab…`` statement, or a loader call (importlib's
    ``spec_from_file_location``, ``runpy.run_path``, ``sys.path.insert``/``append``) whose arguments name the
    ``lab`` folder. Reading a committed result file from ``lab/`` as test data is not importing it."""
    found = []
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        if isinstance(node, ast.Import) and any(a.name.split(".")[0] == "lab" for a in node.names):
            found.append(f"{path.relative_to(REPO)}:{node.lineno}")
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "lab" and not node.level:
            found.append(f"{path.relative_to(REPO)}:{node.lineno}")
        elif isinstance(node, ast.Call):
            fn = node.func
            name = fn.attr if isinstance(fn, ast.Attribute) else fn.id if isinstance(fn, ast.Name) else ""
            if name in _LOADERS:
                words = [c.value for arg in node.args for c in ast.walk(arg)
                         if isinstance(c, ast.Constant) and isinstance(c.value, str)]
                if any(w == "lab" or w.startswith("lab/") or "/lab/" in w for w in words):
                    found.append(f"{path.relative_to(REPO)}:{node.lineno}")
    return found


def _python(*folders: str) -> list[Path]:
    return [f for d in folders for f in sorted((REPO / d).rglob("*.py")) if "__pycache__" not in f.parts]


def test_nothing_imports_lab():
    found = [hit for f in _python("quantgate", "tests", "benchmarks") for hit in _lab_imports(f)]
    assert not found, ("code loaded from lab/ (one-off measurements: test the product, or make the script a "
                       "reusable benchmark under benchmarks/):\n" + "\n".join(found))


def test_the_lab_rule_sees_an_import_and_a_loader_but_not_a_data_file(tmp_path, monkeypatch):
    f = tmp_path / "t.py"
    f.write_text("import json\nimport importlib.util\nfrom lab import x\n"
                 "spec = importlib.util.spec_from_file_location('s', REPO / 'lab' / '2026-12-03-x' / 's.py')\n"
                 "sys.path.insert(0, str(REPO / 'lab/2026-12-03-x'))\n"
                 "data = json.loads((REPO / 'lab' / 'r.json').read_text())\n")
    monkeypatch.setattr(sys.modules[__name__], "REPO", tmp_path)
    assert _lab_imports(f) == ["t.py:3", "t.py:4", "t.py:5"]


def _header(text: str) -> str:
    """A test file's header: the comments and the docstring before its first statement."""
    lines = []
    for line in text.splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            break
        lines.append(line)
    return "\n".join(lines) + "\n" + (ast.get_docstring(ast.parse(text)) or "")


def _tickets(files: list[Path], header_only: bool) -> list[str]:
    found = []
    for f in files:
        text = f.read_text("utf-8")
        for n, line in enumerate((_header(text) if header_only else text).splitlines(), 1):
            if TICKET.search(line):
                where = f"{f.relative_to(REPO)}" + ("" if header_only else f":{n}")
                found.append(f"{where}: {line.strip()[:100]}")
    return found


def test_no_ticket_numbers_in_the_package_or_the_test_headers():
    found = _tickets(_python("quantgate"), header_only=False)
    found += _tickets([f for f in _python("tests") if f.name.startswith("test_")], header_only=True)
    assert not found, "a comment says why, not which ticket (an upstream bug: its URL):\n" + "\n".join(found)


def test_the_ticket_rule_sees_a_number_but_not_an_upstream_url(tmp_path, monkeypatch):
    monkeypatch.setattr(sys.modules[__name__], "REPO", tmp_path)
    (tmp_path / "a.py").write_text('"""Issue 30: the speed levels."""\n')
    (tmp_path / "b.py").write_text("x = 1  # see https://github.com/vllm-project/vllm/issues/12345\n")
    (tmp_path / "c.py").write_text('"""Issues 18 and 29"""\n')
    assert [h.split(":")[0] for h in _tickets(sorted(tmp_path.glob("*.py")), header_only=False)] == ["a.py", "c.py"]


def test_every_test_file_opens_with_what_it_protects():
    bare = [str(f.relative_to(REPO)) for f in _python("tests") if f.name.startswith("test_")
            and not ast.get_docstring(ast.parse(f.read_text("utf-8")))]
    assert not bare, "test files without a docstring saying what they protect:\n" + "\n".join(bare)


def _broken_links(pages: list[Path]) -> list[str]:
    broken = []
    for page in pages:
        text = re.sub(r"```.*?```", "", page.read_text("utf-8"), flags=re.S)  # code blocks are not links
        for target in LINK.findall(text):
            if re.match(r"^[a-z]+:", target):  # https:, mailto:
                continue
            if not (page.parent / target).exists():
                broken.append(f"{page.relative_to(REPO)}: {target}")
    return broken


def test_relative_links_in_the_docs_resolve():
    pages = [REPO / "README.md", REPO / "benchmarks" / "README.md"] + sorted((REPO / "docs").glob("*.md"))
    broken = _broken_links([p for p in pages if p.is_file()])
    assert not broken, "links to files that do not exist:\n" + "\n".join(broken)


def test_the_link_rule_sees_a_missing_file(tmp_path, monkeypatch):
    monkeypatch.setattr(sys.modules[__name__], "REPO", tmp_path)
    (tmp_path / "there.md").write_text("")
    page = tmp_path / "p.md"
    page.write_text("[ok](there.md) [anchor](there.md#x) [web](https://x.org/a) [gone](gone.md)\n"
                    "```\n[in code](nowhere.md)\n```\n")
    assert _broken_links([page]) == ["p.md: gone.md"]


def test_every_lab_folder_says_what_ran():
    """A dated measurement keeps its command, its machine and what it showed beside its results."""
    folders = [d for d in sorted((REPO / "lab").iterdir()) if d.is_dir()]
    missing = [d.name for d in folders if not (d / "README.md").is_file()]
    assert not missing, f"lab folders without a README.md: {missing}"
    undated = [d.name for d in folders if not re.match(r"\d{4}-\d\d-\d\d-", d.name)]
    assert not undated, f"lab folders are named <date>-<what>: {undated}"
