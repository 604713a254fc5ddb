"""Runs OmniDocBench v1.5's own end-to-end evaluation (upstream's code at 523fd1d, ../shared/reference/omnidocbench-v1.5)
in this process on the 18 demo pages, as a test oracle; lab/2026-12-04-omnidoc15-oracle/run.py does the same from the
command line. Upstream's folders are copied to a temp folder (nothing of them enters the tree) and imported with it
first on sys.path; sys.modules, sys.path and the working directory (upstream writes ./result/) are put back
afterwards, so upstream's generic package names (utils, metrics, dataset, …) shadow nothing.

Stand-ins, each outside what is measured: ``func_timeout`` (each page's matching is called directly instead of under a
30 s timeout), ``evaluate`` (BLEU/METEOR, imported at load, ~10 s, unused by the metrics run), ``mmeval`` (layout
detection's, imported at load) and ``metrics.cdm_metric`` (CDM renders with LaTeX; the formulas are scored by edit
distance here, as quantgate's fallback does)."""

from __future__ import annotations

import contextlib
import functools
import importlib
import io
import json
import os
import shutil
import sys
import tempfile
import types
import warnings
from pathlib import Path

from tests.support.paths import REPO, SHARED, oracle_missing
from tests.support.upstream_omnidoc import DEMO_PREDICTIONS, DEMO_TRUTH

REFERENCE = Path(os.environ.get("QUANTGATE_OMNIDOC15_REFERENCE") or SHARED / "reference" / "omnidocbench-v1.5")
RECORDED = REPO / "lab" / "2026-12-04-omnidoc15-oracle" / "result.json"
_FOLDERS = ("utils", "metrics", "dataset", "registry", "task")
_PACKAGES = (*_FOLDERS, "func_timeout", "evaluate", "mmeval")

# quantgate metric -> upstream (category, metric, aggregate key) in the metric result; per page: the category
SET_VALUES = {
    "omnidoc15_text_edit": ("text_block", "Edit_dist", "ALL_page_avg"),
    "omnidoc15_formula_edit": ("display_formula", "Edit_dist", "ALL_page_avg"),
    "omnidoc15_table_teds": ("table", "TEDS", "all"),
    "omnidoc15_table_teds_struct": ("table", "TEDS_structure_only", "all"),
    "omnidoc15_table_edit": ("table", "Edit_dist", "ALL_page_avg"),
    "omnidoc15_reading_order": ("reading_order", "Edit_dist", "ALL_page_avg"),
}
PER_PAGE = {"omnidoc15_text_edit": "text_block", "omnidoc15_formula_edit": "display_formula",
            "omnidoc15_table_edit": "table", "omnidoc15_reading_order": "reading_order"}


def demo_pageset(folder: Path) -> Path:
    """The demo's 18 pages imported as a page set, ``folder / "ps"``, with their OmniDocBench truth: the demo's page
    images are not in the reference, so blank stand-ins under upstream's names give the pages their ids."""
    from PIL import Image

    from quantgate.cli import main

    (folder / "images").mkdir(parents=True)
    for page in json.loads(DEMO_TRUTH.read_text(encoding="utf-8")):
        Image.new("RGB", (120, 160), "white").save(folder / "images" / page["page_info"]["image_path"])
    assert main(["pages", "import", str(folder / "images"), "-o", str(folder / "ps"), "--truth", str(DEMO_TRUTH),
                 "--calibration-fraction", "0"]) == 0
    return folder / "ps"


def missing_reason() -> str | None:
    missing = oracle_missing(DEMO_TRUTH, DEMO_PREDICTIONS, *(REFERENCE / d for d in _FOLDERS))
    if missing:
        return missing
    for module in ("Levenshtein", "pylatexenc", "loguru", "tabulate", "tqdm", "apted", "lxml", "bs4", "pandas"):
        try:
            importlib.import_module(module)
        except ImportError as e:
            return f"upstream OmniDocBench v1.5 code needs {e.name}"
    return None


def _stand_ins() -> None:
    ft = types.ModuleType("func_timeout")
    ft.FunctionTimedOut = type("FunctionTimedOut", (Exception,), {})  # type: ignore[attr-defined]
    ft.func_timeout = lambda _t, f, args=(), kwargs=None: f(*args, **(kwargs or {}))  # type: ignore[attr-defined]
    sys.modules["func_timeout"] = ft
    sys.modules["evaluate"] = types.ModuleType("evaluate")
    mm = types.ModuleType("mmeval")
    mm.COCODetection = None  # type: ignore[attr-defined]
    sys.modules["mmeval"] = mm
    cdm = types.ModuleType("metrics.cdm_metric")
    cdm.CDM = None  # type: ignore[attr-defined]
    sys.modules["metrics.cdm_metric"] = cdm


@functools.cache
def run(predictions: Path = DEMO_PREDICTIONS) -> dict:
    """Upstream's whole-set result (``metric``), its per-page edit files (``per_page``: category -> image -> value)
    and its per-table TEDS (``per_table``: '<image>_<gt index>' -> {TEDS, TEDS_structure_only}) for the demo truth
    and the predictions in ``predictions`` (default: the demo's)."""
    work = Path(tempfile.mkdtemp(prefix="omnidoc15-upstream-"))
    saved_modules, saved_path, saved_cwd = dict(sys.modules), list(sys.path), os.getcwd()
    try:
        for d in _FOLDERS:
            shutil.copytree(REFERENCE / d, work / d, ignore=shutil.ignore_patterns("cdm", "__pycache__"))
        (work / "result").mkdir()
        for name in [n for n in sys.modules if n.split(".")[0] in _PACKAGES]:
            del sys.modules[name]
        sys.path.insert(0, str(work))
        os.chdir(work)
        _stand_ins()
        cfg = {"text_block": {"metric": ["Edit_dist"]}, "display_formula": {"metric": ["Edit_dist"]},
               "table": {"metric": ["TEDS", "Edit_dist"]}, "reading_order": {"metric": ["Edit_dist"]}}
        data = {"dataset_name": "end2end_dataset", "ground_truth": {"data_path": str(DEMO_TRUTH)},
                "prediction": {"data_path": str(predictions)}, "match_method": "quick_match"}
        quiet = io.StringIO()  # upstream prints progress bars and notes
        with warnings.catch_warnings(), contextlib.redirect_stdout(quiet), contextlib.redirect_stderr(quiet):
            warnings.simplefilter("ignore")
            importlib.import_module("dataset")
            importlib.import_module("metrics")
            importlib.import_module("task.end2end_run_eval")
            registry = importlib.import_module("registry.registry")
            ds = registry.DATASET_REGISTRY.get("end2end_dataset")({"metrics": cfg, "dataset": data})
            registry.EVAL_TASK_REGISTRY.get("end2end_eval")(ds, cfg, str(DEMO_TRUTH), "demo")
        read = lambda name: json.loads((work / "result" / name).read_text(encoding="utf-8"))  # noqa: E731
        return {"metric": read("demo_metric_result.json"),
                "per_page": {c: read(f"demo_{c}_per_page_edit.json") if (work / "result" / f"demo_{c}_per_page_edit.json")
                             .is_file() else {} for c in set(PER_PAGE.values())},
                "per_table": read("demo_table_per_table_TEDS.json")}
    finally:
        os.chdir(saved_cwd)
        for name in [n for n in sys.modules if n.split(".")[0] in _PACKAGES]:
            del sys.modules[name]
        sys.modules.update({k: v for k, v in saved_modules.items() if k.split(".")[0] in _PACKAGES})
        sys.path[:] = saved_path
        shutil.rmtree(work, ignore_errors=True)


@functools.cache
def load() -> types.SimpleNamespace:
    """Upstream v1.5's extract, data_preprocess, table_utils and match_quick modules, for the differential tests of
    the pieces (imported as run() does, with the same stand-ins)."""
    work = Path(tempfile.mkdtemp(prefix="omnidoc15-pieces-"))
    shutil.copytree(REFERENCE / "utils", work / "utils", ignore=shutil.ignore_patterns("__pycache__"))
    saved_modules, saved_path = dict(sys.modules), list(sys.path)
    try:
        for name in [n for n in sys.modules if n.split(".")[0] in _PACKAGES]:
            del sys.modules[name]
        sys.path.insert(0, str(work))
        _stand_ins()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return types.SimpleNamespace(**{m: importlib.import_module(f"utils.{m}") for m in
                                            ("extract", "data_preprocess", "table_utils", "match_quick")})
    finally:
        for name in [n for n in sys.modules if n.split(".")[0] in _PACKAGES]:
            del sys.modules[name]
        sys.modules.update({k: v for k, v in saved_modules.items() if k.split(".")[0] in _PACKAGES})
        sys.path[:] = saved_path
