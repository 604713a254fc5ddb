"""NVFP4 as each path runs it: the reader's nvfp4 variant served on CPU by `transformers serve`
(which computes W4A4: docs/recipes.md) beside the H200's vLLM outputs of the same study pages — Marlin
(weights-only) and `--linear-backend emulation` (W4A4) — and BF16 on both backends; which paths give the
same text page by page.

    python lab/2026-11-30-nvfp4-paths/nvfp4_paths.py [--study DIR] [--out lab/2026-11-30-nvfp4-paths/nvfp4_paths.json]

DIR: the serving-options study folder from the GPU session (default: extracted from
lab/2026-11-30-h200-serving-options/serving_options_study.tar.xz). The CPU variants are built here with the
study's own recipe, calibration pages and sample count; their weights are compared with the GPU-built
ones by fingerprint (llmcompressor calibrates on another device there, so the bytes may differ — the
JSON says whether they do)."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TARBALL = ROOT / "lab/2026-11-30-h200-serving-options/serving_options_study.tar.xz"


def texts(run_dir: Path, c: int = 1) -> dict[str, str]:
    from quantgate.serve.run import load_records

    return {r.page_id: r.output for r in load_records(run_dir) if r.concurrency == c and r.error is None}


def agree(a: dict[str, str], b: dict[str, str]) -> dict:
    common = sorted(set(a) & set(b))
    same = sum(a[p].strip() == b[p].strip() for p in common)  # scoring normalises whitespace; vLLM streams a final \n
    return {"pages": len(common), "identical": same, "rate": round(same / len(common), 4) if common else None,
            "differ": [p for p in common if a[p].strip() != b[p].strip()][:5]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--study", type=Path)
    ap.add_argument("--out", type=Path, default=ROOT / "lab/2026-11-30-nvfp4-paths/nvfp4_paths.json")
    a = ap.parse_args()
    from quantgate.io.fingerprint import weights_fingerprint

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        study = a.study
        if study is None:
            with tarfile.open(TARBALL) as t:
                t.extractall(tmp / "x", filter="data")
            study = next((tmp / "x").glob("**/studies/serving_options"))
        st = json.loads((study / "study.json").read_text())
        pages = ROOT / ".gpu-carry/q200"
        if not (pages / "pages.jsonl").is_file():  # the session's page set, rebuilt exactly as prepare_carry.sh does
            pages = tmp / "q200"
            subprocess.run([sys.executable, "-m", "quantgate", "pages", "synth", "-o", str(pages), "--n", "250",
                            "--seed", "7", "--profile", "reader"], check=True)
        gpu = {name: texts(study / "runs" / name) for name in ("bf16", "nvfp4", "nvfp4-emulation")}
        gpu_fp = {name: json.loads((study / "runs" / name / "run.json").read_text())["variant_fingerprint"]
                  for name in ("bf16", "nvfp4")}
        cpu, cpu_fp, timing = {}, {}, {}
        for recipe in ("bf16", "nvfp4"):
            t0 = time.time()
            v = tmp / f"v-{recipe}"
            subprocess.run([sys.executable, "-m", "quantgate", "quantize", str(ROOT / "quantgate/assets/reader"),
                            "--recipe", recipe, "--calibration", str(pages), "--calibration-samples", str(st["calibration_samples"]),
                            "-o", str(v)], check=True, capture_output=True)
            run = tmp / f"run-{recipe}"
            subprocess.run([sys.executable, "-m", "quantgate", "serve", str(v), "--pages", str(pages), "--split",
                            st["split"], "--limit", str(st["limit"]), "--max-tokens", str(st["max_tokens"]),
                            "--concurrency", "1", "--threads", "1", "-o", str(run)], check=True, capture_output=True)
            cpu[recipe], cpu_fp[recipe] = texts(run), weights_fingerprint(v)
            timing[recipe] = round(time.time() - t0, 1)
    pairs = {
        "vllm marlin nvfp4 vs vllm emulation nvfp4 (same weights)": agree(gpu["nvfp4"], gpu["nvfp4-emulation"]),
        "transformers nvfp4 (CPU) vs vllm marlin nvfp4": agree(cpu["nvfp4"], gpu["nvfp4"]),
        "transformers nvfp4 (CPU) vs vllm emulation nvfp4": agree(cpu["nvfp4"], gpu["nvfp4-emulation"]),
        "transformers bf16 (CPU) vs vllm bf16": agree(cpu["bf16"], gpu["bf16"]),
        "transformers nvfp4 vs transformers bf16 (CPU)": agree(cpu["nvfp4"], cpu["bf16"]),
        "vllm marlin nvfp4 vs vllm bf16": agree(gpu["nvfp4"], gpu["bf16"]),
    }
    result = {
        "command": "python lab/2026-11-30-nvfp4-paths/nvfp4_paths.py", "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "pages": st["limit"], "max_tokens": st["max_tokens"], "concurrency": 1,
        "weights_same_as_gpu": {r: cpu_fp[r] == gpu_fp[r] for r in cpu_fp},
        "fingerprints": {"cpu": cpu_fp, "gpu": gpu_fp}, "cpu_wall_s": timing, "pairs": pairs,
    }
    a.out.write_text(json.dumps(result, indent=1) + "\n")
    for k, v in pairs.items():
        print(f"{k:60s} {v['identical']}/{v['pages']}")
    print("weights as on the GPU:", result["weights_same_as_gpu"], "->", a.out)


if __name__ == "__main__":
    main()
