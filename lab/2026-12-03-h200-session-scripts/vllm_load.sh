#!/usr/bin/env bash
# Do quantgate's checkpoints (its own target patterns) load and serve in vLLM 0.26? Tiny Qwen2.5-VL
# fixture in BF16, fp8-dynamic and mixed (FP8 attention + NVFP4 MLP), served through quantgate's
# vllm backend on 6 pages at concurrency 1 and 4. Needs vLLM in /tmp/site (.gpu/install.sh), .whl, .gpu-carry.
set -uo pipefail
export PYTHONUNBUFFERED=1
[ -d /tmp/qg/pydantic ] || python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/qg .whl/pydantic*.whl .whl/annotated*.whl .whl/typing_inspection*.whl .whl/rapidfuzz*.whl
export PYTHONPATH=/tmp/qg:$PWD
export QUANTGATE_VLLM="env PYTHONPATH=/tmp/site python3 -m vllm.entrypoints.cli.main"
for v in bf16 fp8-dynamic mixed; do
  python3 -m quantgate serve .gpu-carry/q25-$v -o "$OUT/q25-$v" --backend vllm --pages .gpu-carry/pages --limit 6 \
    --concurrency 1,4 --max-tokens 8 --timeout 120 --server-arg=--enforce-eager --server-arg=--max-model-len=2048 \
    || grep -m5 -i "error" "$OUT/q25-$v/server.log"
  { echo "== $v"; grep -i "kernel\|quantiz\|version" "$OUT/q25-$v/server.log" | cut -c1-300 | head -12; } >> "$OUT/server-excerpts.txt"
  rm -f "$OUT/q25-$v/server.log"
done
