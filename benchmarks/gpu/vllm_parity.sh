#!/usr/bin/env bash
# Backend parity on the H200: the tiny reader (BF16) and its fp8-dynamic variant served by vLLM 0.26
# through quantgate's vllm backend, on the same 40 reader pages (seed 1) the CPU demo uses.
# Needs: .gpu/install.sh done (vLLM in /tmp/site), .whl (pydantic, rapidfuzz), .gpu-carry/{pages,reader-fp8}
# (made here: `quantgate pages synth -o .gpu-carry/pages --n 40 --seed 1 --profile reader` and
#  `quantgate quantize quantgate/assets/reader --recipe fp8-dynamic -o .gpu-carry/reader-fp8`).
set -euo pipefail
export PYTHONUNBUFFERED=1
[ -d /tmp/qg/pydantic ] || python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/qg .whl/pydantic*.whl .whl/annotated*.whl .whl/typing_inspection*.whl .whl/rapidfuzz*.whl
export PYTHONPATH=/tmp/qg:$PWD
export QUANTGATE_VLLM="env PYTHONPATH=/tmp/site python3 -m vllm.entrypoints.cli.main"
args=(--backend vllm --pages .gpu-carry/pages --concurrency 1,8 --max-tokens 48 --timeout 120
      --server-arg=--enforce-eager --server-arg=--gdn-prefill-backend=triton --server-arg=--max-model-len=2048)
for which in "${@:-bf16 fp8}"; do
  model=quantgate/assets/reader; [ "$which" = fp8 ] && model=.gpu-carry/reader-fp8
  python3 -m quantgate serve "$model" -o "$OUT/vllm-$which" "${args[@]}" || tail -60 "$OUT/vllm-$which/server.log"
done
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
