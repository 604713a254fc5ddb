"""What `transformers serve` computes per quantized format, measured on CPU: one variant
per model with every format quantgate produces (tests/data/all-formats.yaml), loaded through serve's
own loader (quantgate.serve.numerics.measure_transformers_serve); per format, the relative error of
each quantized module's output against x @ W_deq.T (weights-only arithmetic) and against the product
with the activations rounded by a by-hand reference of the scheme.

    python benchmarks/numerics_cpu.py [--out benchmarks/results/numerics_cpu.json]

Models: the tiny random-weight Qwen3.5 fixture (tests.support.fixtures) and the bundled trained reader
(quantgate/assets/reader); inputs: one `reader`-profile synthetic page (image + prompt) — the input each
module receives in that forward — and a seeded Gaussian of the same RMS per module.
"""

from __future__ import annotations

import argparse
import importlib.metadata as md
import io
import json
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd
from PIL import Image

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the fixtures live with the tests (tests/support)

from quantgate.heldout.synth import synth_pages
from quantgate.io.pageset import load_pageset
from quantgate.quantize import quantize
from quantgate.serve.numerics import measure_transformers_serve
from quantgate.study.demo import READER
from tests.support import fixtures

RECIPE = Path(__file__).resolve().parent.parent / "tests" / "data" / "all-formats.yaml"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "numerics_cpu.json")
    a = ap.parse_args()
    t0 = time.time()
    frames = []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        synth_pages(tmp / "pages", 6, seed=5, calibration_fraction=0.5, profile="reader")
        ps = load_pageset(tmp / "pages")
        image = Image.open(io.BytesIO(ps.image_bytes(ps.split("heldout")[0]))).convert("RGB")
        models = {"tiny-fixture (random weights)": fixtures.build("qwen3_5", tmp / "tiny"), "reader (trained)": READER}
        for label, src in models.items():
            variant = tmp / f"v-{len(frames)}"
            quantize(src, RECIPE, variant, calibration=tmp / "pages", samples=2, log=lambda s: None)
            df = pd.DataFrame(measure_transformers_serve(variant, image=image))
            df.insert(0, "model", label)
            df.insert(2, "part", ["vision" if ".visual." in m else "decoder" for m in df["module"]])
            frames.append(df)
    df = pd.concat(frames)
    table = (df.groupby(["model", "format", "part", "input"], sort=False)
               .agg(modules=("module", "size"), status=("status", "first"), weight_dtype=("weight_dtype", "first"),
                    rel_err_vs_weight_only_median=("rel_err_vs_weight_only", "median"),
                    rel_err_vs_weight_only_max=("rel_err_vs_weight_only", "max"),
                    rel_err_vs_activation_fake_quant_max=("rel_err_vs_activation_fake_quant", "max"),
                    bit_identical_to_activation_fake_quant=("equals_activation_fake_quant", "all"),
                    bit_identical_to_weight_only=("equals_weight_only", "all"))
               .reset_index())
    with pd.option_context("display.width", 200, "display.max_columns", 20):
        print(table.to_string(index=False, float_format=lambda v: f"{v:.4f}"))
    res = {"packages": {p: md.version(p) for p in ("torch", "transformers", "compressed-tensors", "llmcompressor")},
           "recipe": str(RECIPE.relative_to(RECIPE.parent.parent.parent)), "wall_s": round(time.time() - t0, 1),
           "metric": "||y_module - y_ref|| / ||y_ref|| over all tokens and output channels of one module",
           "per_format": table.to_dict(orient="records")}
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(res, indent=2) + "\n")
    print(f"-> {a.out}")


if __name__ == "__main__":
    main()
