#!/usr/bin/env bash
# Issue 31 on ONE H200 (no multi-GPU kind was lent): `quantize --devices` on real CUDA. Each model built twice —
# whole on GPU 0 (--device cuda), then spread by the --devices path under a GPU-0 cap that cannot hold it, the
# rest in host memory (--devices 0 --max-memory 0=CAP,cpu=SIZE): fp8-dynamic of the Qwen3.5-4B class (random
# weights; no calibration data) and nvfp4 of the bundled reader (calibrated on 8 reader pages). Weights compared
# byte for byte; peaks per device and wall seconds from each quantgate.json; and the refusals the flags give on a
# one-GPU machine. Writes $OUT/devices_1gpu.json, each quantgate.json, the logs.
#   run(kind="nvidia-h200", carry=[".gpuq"], timeout_s=600, command="bash lab/2026-12-03-h200-session-scripts/quantize_devices_1gpu.sh")
# .gpuq/q: the wheels of ../shared/gpu/quantize-deps.txt; .gpuq/w: pydantic, rapidfuzz, beautifulsoup4, soupsieve,
# apted (py3.12, `pip download`, as lab/2026-12-03-h200-session-scripts/session/prepare_carry.sh does).
set -uo pipefail
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
OUT=${OUT:-/tmp/qgdev-out}
W=/tmp/qgdev
mkdir -p "$W" "$OUT/logs"
[ -d /tmp/siteq/llmcompressor ] || python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/siteq \
  .gpuq/q/*.whl .gpuq/w/*.whl 2>&1 | tail -2
export PYTHONPATH=/tmp/siteq:$PWD
QG="python3 -m quantgate"
nvidia-smi --query-gpu=index,name,memory.total --format=csv,noheader > "$OUT/gpu.txt" 2>&1
python3 -c "import torch, transformers, accelerate, llmcompressor, compressed_tensors as ct; print('torch', torch.__version__, \
'transformers', transformers.__version__, 'accelerate', accelerate.__version__, 'llmcompressor', llmcompressor.__version__, \
'compressed-tensors', ct.__version__)" > "$OUT/versions.txt" 2>&1
cat "$OUT/versions.txt" "$OUT/gpu.txt"
t() {  # t NAME CMD...: run, log, record rc and seconds
  local name=$1 t0=$SECONDS
  shift
  "$@" > "$OUT/logs/$name.log" 2>&1
  local rc=$?
  echo "{\"step\": \"$name\", \"rc\": $rc, \"s\": $((SECONDS - t0))}" >> "$OUT/steps.jsonl"
  echo "$name rc=$rc $((SECONDS - t0)) s: $(grep -v 'it/s\]' "$OUT/logs/$name.log" | tail -1 | cut -c1-300)"
}
R=quantgate/assets/reader
[ -d "$W/pages" ] || $QG pages synth -o "$W/pages" --n 20 --profile reader --seed 3 > /dev/null
t reader-nvfp4-1gpu $QG quantize $R --recipe nvfp4 --calibration "$W/pages" --samples 8 --device cuda -o "$W/r-1gpu" --overwrite
t reader-nvfp4-cap $QG quantize $R --recipe nvfp4 --calibration "$W/pages" --samples 8 --devices 0 \
  --max-memory 0=6MB,cpu=2GiB -o "$W/r-cap" --overwrite
[ -d "$W/q4b-bf16" ] || t build-4b python3 lab/2026-12-03-h200-session-scripts/build_qwen3_5_4b.py "$W/q4b-bf16"
t q4b-fp8-1gpu $QG quantize "$W/q4b-bf16" --recipe fp8-dynamic --device cuda -o "$W/q-1gpu" --overwrite
t q4b-fp8-cap $QG quantize "$W/q4b-bf16" --recipe fp8-dynamic --devices 0 --max-memory 0=5GiB,cpu=64GiB \
  -o "$W/q-cap" --overwrite
t refuse-no-host $QG quantize "$W/q4b-bf16" --recipe fp8-dynamic --devices 0 --max-memory 0=5GiB -o "$W/q-refused"
t refuse-two $QG quantize "$W/q4b-bf16" --recipe fp8-dynamic --devices 0,1 -o "$W/q-refused"
for v in r-1gpu r-cap q-1gpu q-cap; do cp "$W/$v/quantgate.json" "$OUT/$v.quantgate.json" 2>/dev/null; done
python3 - "$W" "$OUT" <<'PY'
import json, sys
from pathlib import Path
w, out = Path(sys.argv[1]), Path(sys.argv[2])
def man(v):
    p = w / v / "quantgate.json"
    return json.loads(p.read_text()) if p.is_file() else None
res = {"refused": {n: (out / "logs" / f"{n}.log").read_text().strip().splitlines()[-1:]
                   for n in ("refuse-no-host", "refuse-two")}, "pairs": {}}
for name, a, b in (("reader-nvfp4", "r-1gpu", "r-cap"), ("q4b-fp8-dynamic", "q-1gpu", "q-cap")):
    ma, mb = man(a), man(b)
    if not (ma and mb):
        res["pairs"][name] = {"measured": False}
        continue
    wa = {k: f["sha256"] for k, f in ma["files"].items() if k.endswith(".safetensors")}
    wb = {k: f["sha256"] for k, f in mb["files"].items() if k.endswith(".safetensors")}
    dv = mb.get("devices") or {}
    res["pairs"][name] = {"measured": True, "same_weights": wa == wb, "one_gpu": {
        "wall_s": ma["wall_s"], "peak_gpu_mb_per_device": ma.get("peak_gpu_mb_per_device"), "peak_rss_mb": ma["peak_rss_mb"]},
        "capped": {"wall_s": mb["wall_s"], "peak_gpu_mb_per_device": mb.get("peak_gpu_mb_per_device"),
                   "peak_rss_mb": mb["peak_rss_mb"], "max_memory": dv.get("max_memory"),
                   "bytes_per_device": dv.get("bytes_per_device"),
                   "modules_per_device": {d: sum(1 for x in (dv.get("device_map") or {}).values() if x == d)
                                          for d in sorted(set((dv.get("device_map") or {}).values()))}}}
(out / "devices_1gpu.json").write_text(json.dumps(res, indent=2) + "\n")
print(json.dumps(res, indent=2))
PY
