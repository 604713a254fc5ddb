"""OmniDocBench v1.5's own end-to-end evaluation (upstream 523fd1d, ../shared/reference/omnidocbench-v1.5) with its
real ``CDM`` metric on the display formulas of the 18 demo pages, under the numeric stack upstream pins
(numpy 1.24.4, scipy 1.10.1, scikit-image 0.20.0: see README.md for the throwaway venv), so the values quantgate's
own CDM must equal come from upstream's code as its authors run it.

Run from the repository root with that venv's python: ``VENV/bin/python lab/2026-12-05-cdm/upstream_run.py``.
Writes upstream.json.gz here: the whole-set values, CDM per formula (upstream's per_sample file, with each formula's
page and its truth/prediction LaTeX), CDM per page (the mean over the page's formulas) and Overall.

Stand-ins, outside what is measured: ``evaluate`` and ``mmeval`` (BLEU/METEOR's and layout detection's, imported at
load, unused here) and ``magick`` (this folder's script: Ghostscript called with the arguments ImageMagick's PDF
reader passes it; Debian 12 has ImageMagick 6 only). Upstream's files are copied to a temp folder and run there.
One string of the copy is changed: its LaTeX template names the CJK font "Source Han Sans SC" (Adobe's release);
Debian ships the same glyphs as "Noto Sans CJK SC" (fonts-noto-cjk), and without the swap XeLaTeX finds no font
for a CJK character (a full-width comma in a demo formula) and leaves it out. ``--cjk-font NAME`` sets the name
the copy uses, and the output file: ``--cjk-font "Source Han Sans SC"`` runs upstream's template untouched."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import sys
import tempfile
import types
from pathlib import Path

HERE = Path(__file__).resolve().parent
REF = HERE.parents[2] / "shared" / "reference"
V15, DEMO = REF / "omnidocbench-v1.5", REF / "omnidocbench" / "demo_data"


def main() -> None:
    work = Path(tempfile.mkdtemp(prefix="omnidoc15-cdm-"))
    for d in ("utils", "metrics", "dataset", "registry", "task"):
        shutil.copytree(V15 / d, work / d, ignore=shutil.ignore_patterns("__pycache__"))
    (work / "result").mkdir()
    font = sys.argv[sys.argv.index("--cjk-font") + 1] if "--cjk-font" in sys.argv else "Noto Sans CJK SC"
    template = work / "metrics" / "cdm" / "modules" / "latex2bbox_color.py"
    template.write_text(template.read_text(encoding="utf-8").replace("Source Han Sans SC", font), encoding="utf-8")
    os.environ["PATH"] = f"{HERE}:{os.environ['PATH']}"
    sys.path.insert(0, str(work))
    os.chdir(work)
    sys.modules["evaluate"] = types.ModuleType("evaluate")
    mm = types.ModuleType("mmeval")
    mm.COCODetection = None
    sys.modules["mmeval"] = mm
    import dataset  # noqa: F401  (registers the datasets)
    import metrics  # noqa: F401
    import task.end2end_run_eval  # noqa: F401
    from registry.registry import DATASET_REGISTRY, EVAL_TASK_REGISTRY

    truth = DEMO / "omnidocbench_demo" / "OmniDocBench_demo.json"
    cfg = {"text_block": {"metric": ["Edit_dist"]}, "display_formula": {"metric": ["Edit_dist", "CDM"]},
           "table": {"metric": ["TEDS", "Edit_dist"]}, "reading_order": {"metric": ["Edit_dist"]}}
    data = {"dataset_name": "end2end_dataset", "ground_truth": {"data_path": str(truth)},
            "prediction": {"data_path": str(DEMO / "end2end")}, "match_method": "quick_match"}
    ds = DATASET_REGISTRY.get("end2end_dataset")({"metrics": cfg, "dataset": data})
    EVAL_TASK_REGISTRY.get("end2end_eval")(ds, cfg, str(truth), "demo")
    read = lambda name: json.loads((work / "result" / name).read_text(encoding="utf-8"))  # noqa: E731
    metric = read("demo_metric_result.json")
    per_sample = read("demo_display_formula_per_sample_CDM.json")
    samples = read("demo_display_formula_result.json")
    # the samples as upstream's CDM worker left them: gt/pred with $, $$ and ```latex fences stripped
    formulas = [{"page": s["img_id"], "gt_idx": s["gt_idx"], "cdm_id": s["img_id_cdm"], "gt": s["gt"], "pred": s["pred"],
                 "cdm": per_sample[f"{s['img_id']}_{s['gt_idx']}"]} for s in samples]
    # what upstream's renderer made of each formula, kept so quantgate's matching can be checked on the very boxes
    # upstream matched: the token boxes of truth and prediction (upstream's bbox/*.jsonl, empty boxes dropped as
    # its loader drops them), the cropped image sizes, and the tokenizer's normalised LaTeX
    from PIL import Image
    from metrics.cdm.modules.tokenize_latex.tokenize_latex import tokenize_latex

    cdm_dir = work / "result" / "demo_display_formula" / "CDM"
    for f in formulas:
        k = f["cdm_id"]
        for side in ("gt", "pred"):
            lines = (cdm_dir / side / "bbox" / f"{k}.jsonl").read_text(encoding="utf-8").splitlines()
            f[f"{side}_boxes"] = [b for b in map(json.loads, lines) if b["bbox"]]
            f[f"{side}_size"] = list(Image.open(cdm_dir / side / "vis" / f"{k}_base.png").size)
            latex = f[side].replace("\n", " ").replace("\\%", "<PERCENTAGETOKEN>")
            f[f"{side}_tokenized"] = tokenize_latex(latex, middle_file=str(work / f"tok-{k}-{side}.txt"))[1]
    pages: dict[str, list[float]] = {}
    for f in formulas:
        pages.setdefault(f["page"], []).append(f["cdm"])
    text = metric["text_block"]["all"]["Edit_dist"]["ALL_page_avg"]
    teds = metric["table"]["all"]["TEDS"]["all"]
    cdm = metric["display_formula"]["all"]["CDM"]["all"]
    out = {"cjk_font": font, "set": {"text_edit": text, "table_teds": teds, "formula_cdm": cdm,
                   "formula_edit": metric["display_formula"]["all"]["Edit_dist"]["ALL_page_avg"],
                   "overall": ((1 - text) * 100 + teds * 100 + cdm * 100) / 3},
           "per_page_cdm": {p: sum(v) / len(v) for p, v in sorted(pages.items())},
           "formulas": formulas}
    name = "upstream.json.gz" if font == "Noto Sans CJK SC" else f"upstream-{font.replace(' ', '-').lower()}.json.gz"
    (HERE / name).write_bytes(gzip.compress((json.dumps(out, indent=1, ensure_ascii=False) + "\n").encode(), mtime=0))
    print(json.dumps(out["set"], indent=1))
    print(json.dumps(out["per_page_cdm"], indent=1))
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
