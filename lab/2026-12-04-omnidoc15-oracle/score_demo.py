"""quantgate's own omnidoc15_* family on the same 18 demo pages and predictions: the committed example of the v1.5
family in use (`pages import --truth OmniDocBench_demo.json`, then `quantgate score --metrics omnidoc15`).

Run from the repository root: ``.venv/bin/python lab/2026-12-04-omnidoc15-oracle/score_demo.py``. The demo's page
images are not in the reference (the block metrics do not read them): blank stand-ins under upstream's names give the
pages their ids. Everything is written to a temporary folder; the summary goes to stdout."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

from PIL import Image

DEMO = Path(__file__).resolve().parents[3] / "shared" / "reference" / "omnidocbench" / "demo_data"
TRUTH = DEMO / "omnidocbench_demo" / "OmniDocBench_demo.json"


def qg(*args: str) -> str:
    return subprocess.run([sys.executable, "-m", "quantgate", *args], check=True, capture_output=True, text=True).stdout


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="omnidoc15-demo-") as tmp:
        images = Path(tmp) / "images"
        images.mkdir()
        for page in json.loads(TRUTH.read_text(encoding="utf-8")):
            Image.new("RGB", (120, 160), "white").save(images / page["page_info"]["image_path"])
        qg("pages", "import", str(images), "-o", f"{tmp}/pages", "--truth", str(TRUTH), "--calibration-fraction", "0")
        print(qg("score", "--pages", f"{tmp}/pages", "--predictions", str(DEMO / "end2end"), "-o",
                 f"{tmp}/scores.jsonl", "--metrics", "omnidoc15").replace(tmp, "$TMP"), end="")


if __name__ == "__main__":
    main()
