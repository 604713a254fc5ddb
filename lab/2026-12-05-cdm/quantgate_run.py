"""quantgate's own formula CDM (quantgate/scoring/omnidoc/cdm.py) on the 18 demo pages, beside upstream's (upstream.json.gz).

Run from the repository root after `make setup-cdm`: ``.venv/bin/python lab/2026-12-05-cdm/quantgate_run.py``.
Writes quantgate.json here and prints both per page, over the set, and Overall, with the wall time."""

from __future__ import annotations

import gzip
import json
import time
from pathlib import Path

from quantgate.scoring.omnidoc import cdm, load_truth, v15

HERE = Path(__file__).resolve().parent
DEMO = HERE.parents[2] / "shared" / "reference" / "omnidocbench" / "demo_data"


def main() -> None:
    truth = load_truth(DEMO / "omnidocbench_demo" / "OmniDocBench_demo.json")
    preds = {p.page_id: (DEMO / "end2end" / f"{p.page_id}.md").read_text(encoding="utf-8") for p in truth.values()}
    pairs = {p.page_id: v15.formula_pairs(preds[p.page_id], p) for p in truth.values()}
    start = time.perf_counter()
    per_page, whole, notes = cdm.set_cdm(pairs, workers=2)
    took = time.perf_counter() - start
    values = v15.aggregate([v15.score_page(preds[p.page_id], p) for p in truth.values()])
    out = {"formula_cdm": whole, "overall": cdm.overall(values[v15.TEXT], values[v15.TEDS], whole),
           "per_page_cdm": {k: v for k, v in sorted(per_page.items()) if v is not None}, "notes": notes,
           "formulas": sum(map(len, pairs.values())), "seconds": round(took, 1)}
    (HERE / "quantgate.json").write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    up = json.loads(gzip.decompress((HERE / "upstream.json.gz").read_bytes()))
    print(f"{'':<40}{'quantgate':>10}{'upstream':>10}")
    for page, value in out["per_page_cdm"].items():
        print(f"{page[:38]:<40}{value:>10.4f}{up['per_page_cdm'][page + '.jpg']:>10.4f}")
    print(f"{'formula CDM (mean over formulas)':<40}{whole:>10.4f}{up['set']['formula_cdm']:>10.4f}")
    print(f"{'Overall':<40}{out['overall']:>10.2f}{up['set']['overall']:>10.2f}")
    print(f"{out['formulas']} formulas rendered and matched in {out['seconds']} s on 2 threads")


if __name__ == "__main__":
    main()
