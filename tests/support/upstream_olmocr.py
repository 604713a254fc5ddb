"""Imports upstream olmOCR-bench's check code from ../shared/reference/olmocr-bench (SOURCE.md there says
which commit) as a private ``olmocr`` package, without touching the ``olmocr`` from PyPI that may be
installed: the files are laid out in a temp folder, imported with that folder first on sys.path, and
sys.modules / sys.path are put back afterwards (the imported module keeps its own references).

``tests.py`` imports ``.katex.render`` (Playwright) at load. Where the reference folder has upstream's
``katex/`` (render.py with KaTeX's katex.min.js and katex.min.css) and Playwright is installed, the
real one is used, launching the system Chromium (upstream launches Playwright's own browser build,
which cannot be downloaded here); otherwise a stand-in whose ``render_equation`` raises, so every
non-math check type still runs."""

from __future__ import annotations

import importlib
import os
import shutil
import sys
import tempfile
import types
from pathlib import Path

from tests.support.paths import SHARED, oracle_missing

# QUANTGATE_OLMOCR_REFERENCE: another folder laid out like the shared one (e.g. a newer upstream commit)
REFERENCE = Path(os.environ.get("QUANTGATE_OLMOCR_REFERENCE")
                 or SHARED / "reference" / "olmocr-bench")
KATEX_FILES = ("render.py", "katex.min.js", "katex.min.css")  # upstream's renderer and the KaTeX beside it

_STUB_RENDER = '''
def render_equation(*a, **k):
    raise RuntimeError("upstream math rendering needs Playwright and katex/render.py in the reference folder")


def compare_rendered_equations(*a, **k):
    raise RuntimeError("upstream math rendering is not available")
'''


def reference_missing_reason() -> str | None:
    return oracle_missing(*(REFERENCE / n for n in ("tests.py", "table_parsing.py", "repeatdetect.py")))


def chromium_path() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


def upstream_math_reason() -> str | None:
    """None when upstream's own math rendering can run here; else why not."""
    missing = oracle_missing(*(REFERENCE / "katex" / n for n in KATEX_FILES))  # upstream's KaTeX renderer
    if missing:
        return missing
    try:
        importlib.import_module("playwright.sync_api")
    except ImportError:
        return "Playwright (upstream's browser driver) is not installed"
    if not chromium_path():
        return "no chromium on PATH"
    return None


def _system_chromium_playwright(real_sync_playwright):
    """sync_playwright() whose chromium.launch() uses the system Chromium. Only the launch changes."""
    exe = chromium_path()

    class _Chromium:
        def __init__(self, inner):
            self._inner = inner

        def launch(self, **kw):
            kw.setdefault("executable_path", exe)
            kw.setdefault("args", ["--no-sandbox"])
            return self._inner.launch(**kw)

    class _P:
        def __init__(self, inner):
            self._inner = inner
            self.chromium = _Chromium(inner.chromium)

        def stop(self):
            return self._inner.stop()

    class _Ctx:
        def __init__(self):
            self._cm = real_sync_playwright()

        def start(self):
            return _P(self._cm.start())

    return _Ctx


def load(cache_dir: Path | None = None) -> types.ModuleType:
    """Upstream ``olmocr.bench.tests``. ``cache_dir``: where upstream's equation cache (sqlite) goes."""
    reason = reference_missing_reason()
    if reason:
        raise FileNotFoundError(reason)
    math_ok = upstream_math_reason() is None
    tmp = Path(tempfile.mkdtemp(prefix="olmocr-upstream-"))
    pkg = tmp / "olmocr"
    (pkg / "bench" / "katex").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "bench" / "__init__.py").write_text("")
    shutil.copy(REFERENCE / "repeatdetect.py", pkg / "repeatdetect.py")
    shutil.copy(REFERENCE / "tests.py", pkg / "bench" / "tests.py")
    shutil.copy(REFERENCE / "table_parsing.py", pkg / "bench" / "table_parsing.py")
    katex = pkg / "bench" / "katex"
    (katex / "__init__.py").write_text("from .render import compare_rendered_equations, render_equation\n")
    if math_ok:
        for name in KATEX_FILES:
            shutil.copy(REFERENCE / "katex" / name, katex / name)
    else:
        (katex / "render.py").write_text(_STUB_RENDER)

    saved = {k: v for k, v in sys.modules.items() if k == "olmocr" or k.startswith("olmocr.")}
    for k in saved:
        del sys.modules[k]
    sys.path.insert(0, str(tmp))
    try:
        if math_ok:
            home = os.environ.get("HOME")
            os.environ["HOME"] = str(tmp)  # its module-level equation cache goes under ~/.cache at import
            try:
                render = importlib.import_module("olmocr.bench.katex.render")
            finally:
                if home is None:
                    os.environ.pop("HOME", None)
                else:
                    os.environ["HOME"] = home
            render.sync_playwright = _system_chromium_playwright(render.sync_playwright)
            render.equation_cache = render.EquationCache(str((cache_dir or tmp) / "upstream-equations.db"))
        return importlib.import_module("olmocr.bench.tests")
    finally:
        sys.path.remove(str(tmp))
        for k in [k for k in sys.modules if k == "olmocr" or k.startswith("olmocr.")]:
            del sys.modules[k]
        sys.modules.update(saved)
