"""OmniDocBench v1.5's own evaluation (upstream's code at 523fd1d, ../shared/reference/omnidocbench-v1.5) run on the
18 demo pages and predictions (../shared/reference/omnidocbench/demo_data), beside the v1.0 values quantgate
reproduces: the target numbers an ``omnidoc15_*`` family must equal, and proof the oracle runs on this machine.

Run from the repository root: ``.venv/bin/python lab/2026-12-04-omnidoc15-oracle/run.py``. Writes result.json here.

Upstream's files are copied to a temporary folder and run there (nothing of them enters the tree). Three stand-ins,
both outside what is measured: ``func_timeout`` (not installed; upstream wraps each page's matching in a 30 s
timeout, here the call is made directly) ``mmeval`` (layout detection's, imported at load, unused end to end) and ``metrics.cdm_metric`` (CDM renders formulas with a LaTeX toolchain
this machine lacks — no latex/pdflatex/gs — so only the formula pairs CDM would score are counted; upstream's
config asks for ``CDM_plain``, which only exports them)."""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import types
from pathlib import Path

REF = Path(__file__).resolve().parents[3] / "shared" / "reference"
V15, DEMO = REF / "omnidocbench-v1.5", REF / "omnidocbench" / "demo_data"
V10_RESULT = REF / "omnidocbench" / "result" / "end2end_quick_match_metric_result.json"
HERE = Path(__file__).resolve().parent


def stand_ins() -> None:
    ft = types.ModuleType("func_timeout")

    class FunctionTimedOut(Exception):
        pass

    ft.FunctionTimedOut = FunctionTimedOut
    ft.func_timeout = lambda _t, f, args=(), kwargs=None: f(*args, **(kwargs or {}))
    sys.modules["func_timeout"] = ft
    cdm = types.ModuleType("metrics.cdm_metric")
    cdm.CDM = None  # never called: the demo config's CDM_plain does not render
    sys.modules["metrics.cdm_metric"] = cdm
    mm = types.ModuleType("mmeval")  # layout detection's metric, imported by dataset/ at load, not used here
    mm.COCODetection = None
    sys.modules["mmeval"] = mm


def main() -> None:
    work = Path(tempfile.mkdtemp(prefix="omnidoc15-"))
    for d in ("utils", "metrics", "dataset", "registry", "task"):
        shutil.copytree(V15 / d, work / d, ignore=shutil.ignore_patterns("cdm"))
    (work / "demo_data").symlink_to(DEMO)
    os.chdir(work)
    (work / "result").mkdir()
    sys.path.insert(0, str(work))
    stand_ins()
    import dataset  # noqa: F401  (registers the datasets)
    import metrics  # noqa: F401  (registers the metrics)
    import task.end2end_run_eval  # noqa: F401  (registers the task)
    from registry.registry import DATASET_REGISTRY, EVAL_TASK_REGISTRY

    cfg = {"metrics": {"text_block": {"metric": ["Edit_dist"]}, "display_formula": {"metric": ["Edit_dist"]},
                       "table": {"metric": ["TEDS", "Edit_dist"]}, "reading_order": {"metric": ["Edit_dist"]}},
           "dataset": {"dataset_name": "end2end_dataset",
                       "ground_truth": {"data_path": "./demo_data/omnidocbench_demo/OmniDocBench_demo.json"},
                       "prediction": {"data_path": "./demo_data/end2end"}, "match_method": "quick_match"}}
    ds = DATASET_REGISTRY.get("end2end_dataset")(cfg)
    EVAL_TASK_REGISTRY.get("end2end_eval")(ds, cfg["metrics"], cfg["dataset"]["ground_truth"]["data_path"], "demo")
    v15 = json.loads((work / "result" / "demo_metric_result.json").read_text())
    v10 = json.loads(V10_RESULT.read_text())
    keys = {"text_edit": ("text_block", "Edit_dist", "ALL_page_avg"),
            "formula_edit": ("display_formula", "Edit_dist", "ALL_page_avg"),
            "table_teds": ("table", "TEDS", "all"), "table_teds_struct": ("table", "TEDS_structure_only", "all"),
            "table_edit": ("table", "Edit_dist", "ALL_page_avg"),
            "reading_order_edit": ("reading_order", "Edit_dist", "ALL_page_avg")}

    def get(r, cat, metric, agg):
        try:
            return r[cat]["all"][metric][agg]
        except (KeyError, TypeError):
            return None

    rows = {k: {"v1.5": get(v15, *x), "v1.0": get(v10, *x)} for k, x in keys.items()}
    out = {"pages": 18, "whole_set": rows, "overall": None,
           "overall_why": "Overall = ((1 - text edit)*100 + table TEDS + formula CDM) / 3 needs CDM, which needs a "
                          "LaTeX toolchain this machine lacks"}
    # per page (upstream's per_page_edit files): what a per-page omnidoc15_* value must equal
    out["per_page"] = {cat: json.loads((work / "result" / f"demo_{cat}_per_page_edit.json").read_text())
                       for cat in ("text_block", "display_formula", "table", "reading_order")}
    (HERE / "result.json").write_text(json.dumps(out, indent=2) + "\n")
    os.chdir(HERE)
    shutil.rmtree(work)
    print(f"{'whole-set value':<20}{'v1.5':>10}{'v1.0':>10}")
    for k, r in rows.items():
        print(f"{k:<20}" + "".join(f"{'–' if v is None else f'{v:.4f}':>10}" for v in (r["v1.5"], r["v1.0"])))
    print("Overall: not computable here (formula CDM needs a LaTeX toolchain)")


if __name__ == "__main__":
    main()
