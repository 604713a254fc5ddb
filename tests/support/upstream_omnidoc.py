"""Imports upstream OmniDocBench's evaluation code from ../shared/reference/omnidocbench (SOURCE.md there:
commit 24e6428) as a test oracle: its ``utils/`` and ``metrics/table_metric.py`` are laid out in a temp
folder and imported with that folder first on sys.path; sys.modules and sys.path are put back afterwards
(the imported modules keep their own references), so upstream's generic package names (``utils``,
``metrics``) shadow nothing. ``evaluate`` (BLEU/METEOR, imported at load by match_quick.py and unused by
the functions called here) is a stand-in. Needs python-Levenshtein (dev dependency), as upstream does."""

from __future__ import annotations

import functools
import importlib
import os
import shutil
import sys
import tempfile
import types
import warnings
from pathlib import Path

from tests.support.paths import SHARED, oracle_missing

REFERENCE = Path(os.environ.get("QUANTGATE_OMNIDOC_REFERENCE")
                 or SHARED / "reference" / "omnidocbench")
DEMO_TRUTH = REFERENCE / "demo_data" / "omnidocbench_demo" / "OmniDocBench_demo.json"
DEMO_TRUTH_MD = REFERENCE / "demo_data" / "omnidocbench_demo" / "mds"
DEMO_PREDICTIONS = REFERENCE / "demo_data" / "end2end"
RESULT = REFERENCE / "result"
_CODE = ("utils/match_quick.py", "utils/match.py", "utils/extract.py", "utils/data_preprocess.py",
         "utils/table_utils.py", "metrics/table_metric.py")


def demo_missing_reason() -> str | None:
    return oracle_missing(DEMO_TRUTH, DEMO_PREDICTIONS, RESULT / "end2end_quick_match_metric_result.json")


def code_missing_reason() -> str | None:
    missing = oracle_missing(*(REFERENCE / p for p in _CODE))
    if missing:
        return missing
    try:
        importlib.import_module("Levenshtein")
        importlib.import_module("pylatexenc")
    except ImportError as e:
        return f"upstream OmniDocBench code needs {e.name} (pip install Levenshtein pylatexenc)"
    return None


@functools.cache
def load() -> types.SimpleNamespace:
    """extract, data_preprocess, match_quick and table_metric modules of upstream."""
    root = Path(tempfile.mkdtemp(prefix="omnidoc-upstream-"))
    for rel in _CODE:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(REFERENCE / rel, root / rel)
    (root / "metrics" / "__init__.py").write_text("")
    saved_modules, saved_path = dict(sys.modules), list(sys.path)
    sys.modules["evaluate"] = types.ModuleType("evaluate")
    sys.path.insert(0, str(root))
    try:
        for name in ("utils", "metrics"):
            sys.modules.pop(name, None)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # upstream's regex strings have stray escapes
            return types.SimpleNamespace(
                extract=importlib.import_module("utils.extract"),
                preprocess=importlib.import_module("utils.data_preprocess"),
                match_quick=importlib.import_module("utils.match_quick"),
                table_metric=importlib.import_module("metrics.table_metric"),
            )
    finally:
        for name in set(sys.modules) - set(saved_modules):
            if name.split(".")[0] in ("utils", "metrics", "evaluate"):
                del sys.modules[name]
        sys.modules.update({k: v for k, v in saved_modules.items() if k.split(".")[0] in ("utils", "metrics")})
        sys.path[:] = saved_path


# quantgate metric -> upstream (category, metric, aggregate key) in end2end_quick_match_metric_result.json
SET_VALUES = {
    "omnidoc_text_edit": ("text_block", "Edit_dist", "ALL_page_avg"),
    "omnidoc_formula_edit": ("display_formula", "Edit_dist", "ALL_page_avg"),
    "omnidoc_table_teds": ("table", "TEDS", "all"),
    "omnidoc_table_teds_struct": ("table", "TEDS_structure_only", "all"),
    "omnidoc_table_edit": ("table", "Edit_dist", "ALL_page_avg"),
    "omnidoc_reading_order_edit": ("reading_order", "Edit_dist", "ALL_page_avg"),
}
