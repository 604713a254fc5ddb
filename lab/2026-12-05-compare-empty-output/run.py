"""`quantgate compare --pages … --metric checks` on olmOCR-bench's sample: each system's outputs as the baseline,
judged against what an empty output scores on the same pages (the command scores it from the page set).

Run from the repository root (needs ../shared/data/olmocr-bench-sample):
    .venv/bin/python lab/2026-12-05-compare-empty-output/run.py > lab/2026-12-05-compare-empty-output/output.txt
Writes result.json beside this file. Each system's first repeat, renamed to the page id; `nothing` is an empty file
for every page. compare --pages judges the pages both folders cover, so a system that wrote no file for a page
(marker, mistral, chatgpt, gemini_flash2 skip 8 of 23) is judged with olmOCR's pipeline on the pages it wrote."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

SAMPLE = Path(__file__).resolve().parents[3] / "shared" / "data" / "olmocr-bench-sample"
SYSTEMS = ["olmocr_pipeline", "marker", "mistral", "chatgpt", "gemini_flash2"]
HERE = Path(__file__).resolve().parent
KEEP = ("verdict", "reason", "n", "documents", "baseline_score", "baseline_floor", "empty_output_mean")


def qg(*args: object) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "quantgate", *map(str, args)], capture_output=True, text=True)


def outputs(system: str, folder: Path, only: set[str] | None = None) -> set[str]:
    folder.mkdir()
    for f in (SAMPLE / system).rglob("*_repeat1.md"):
        pid = f.name.removesuffix("_repeat1.md")
        if only is None or pid in only:
            shutil.copy(f, folder / f"{pid}.md")
    return {f.stem for f in folder.iterdir()}


def compare(pages: Path, base: Path, cand: Path) -> dict:
    r = qg("compare", "--pages", pages, base, cand, "--metric", "checks", "--json")
    if not r.stdout.lstrip().startswith("{"):
        raise SystemExit(f"compare {base.name} {cand.name}: exit {r.returncode}\n{r.stderr}")
    v = json.loads(r.stdout)
    return {k: v[k] for k in KEEP} | {"exit": r.returncode}


def main() -> None:
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        t, pages = Path(tmp), Path(tmp) / "pages"
        r = qg("pages", "import", SAMPLE / "pdfs", "-o", pages, "--checks", SAMPLE / "dataset.jsonl",
               "--checks", SAMPLE / "blanks.jsonl", "--calibration-fraction", "0", "--megapixels", "0.3")
        if r.returncode:
            raise SystemExit(r.stderr)
        every = outputs("olmocr_pipeline", t / "olmocr_pipeline")
        nothing = t / "nothing"
        nothing.mkdir()
        for pid in every:
            (nothing / f"{pid}.md").write_text("")
        rows.append({"baseline": "nothing", "candidate": "olmocr_pipeline"}
                    | compare(pages, nothing, t / "olmocr_pipeline"))
        rows.append({"baseline": "olmocr_pipeline", "candidate": "nothing"}
                    | compare(pages, t / "olmocr_pipeline", nothing))
        for s in SYSTEMS[1:]:
            wrote = outputs(s, t / s)
            pipe = t / f"olmocr_pipeline-{s}"
            outputs("olmocr_pipeline", pipe, wrote)
            rows.append({"baseline": s, "candidate": "olmocr_pipeline"} | compare(pages, t / s, pipe))
    (HERE / "result.json").write_text(json.dumps(rows, indent=1) + "\n")
    print(f"{'baseline':<16}{'candidate':<16}{'pages':>6}{'baseline':>10}{'empty':>8}  verdict (reason)")
    for x in rows:
        print(f"{x['baseline']:<16}{x['candidate']:<16}{x['n']:>6}{x['baseline_score']:>10.4f}"
              f"{x['empty_output_mean']:>8.4f}  {x['verdict']} ({x['reason']})")


if __name__ == "__main__":
    main()
