#!/usr/bin/env bash
# GPU step 1 (issue 7 + issue 9 part 1): the tiny reader (BF16) and its fp8-dynamic variant served by
# vLLM 0.26 through quantgate's vllm backend on 200 held-out reader pages at concurrency 1 and 8, to
# compare with transformers serve on CPU (same pages, same variant). Meanwhile, in the background,
# build the Qwen3.5-4B-class checkpoint and quantize it for the speed sweep (speed_sweep.sh).
# Carried: .whl, .gpu-carry/{q200,reader-fp8,p4mp}. Made here with:
#   quantgate pages synth -o .gpu-carry/q200 --n 250 --seed 7 --profile reader
#   quantgate quantize quantgate/assets/reader --recipe fp8-dynamic -o .gpu-carry/reader-fp8
#   quantgate pages synth -o .gpu-carry/p4mp --n 100 --seed 11 --page-size 1700x2400 --noise 0
set -uo pipefail
source lab/2026-12-03-h200-session-scripts/env.sh
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$W/results/gpu.txt"
(
  set -e
  t0=$SECONDS
  python3 lab/2026-12-03-h200-session-scripts/build_qwen3_5_4b.py "$W/q4b-bf16"
  echo "built in $((SECONDS - t0)) s"
  for r in fp8-dynamic nvfp4 mixed; do
    $QGQ quantize "$W/q4b-bf16" --recipe $r --calibration .gpu-carry/p4mp --samples 16 --max-seq-len 8192 \
      -o "$W/q4b-$r" 2>&1 | grep -v "it/s]"
    cp "$W/q4b-$r/quantgate.json" "$W/results/q4b-$r.quantgate.json"
  done
  echo "build+quantize done in $((SECONDS - t0)) s"
) > "$W/results/build-4b.log" 2>&1 &
bg=$!
args=(--backend vllm --pages .gpu-carry/q200 --concurrency 1,8 --max-tokens 48 --timeout 120
      --gpu-memory-utilization 0.12 --server-arg=--enforce-eager --server-arg=--gdn-prefill-backend=triton
      --server-arg=--max-model-len=2048 --server-arg=--no-enable-prefix-caching
      --server-arg=--kv-cache-memory-bytes=2147483648)  # skips the memory profile the 4B build would disturb
for which in bf16 fp8; do
  model=quantgate/assets/reader; [ "$which" = fp8 ] && model=.gpu-carry/reader-fp8
  t0=$SECONDS
  $QG serve "$model" -o "$W/results/reader-vllm-$which" "${args[@]}" || tail -40 "$W/results/reader-vllm-$which/server.log"
  echo "reader $which: $((SECONDS - t0)) s" | tee -a "$W/results/timing.txt"
done
wait $bg; echo "background build: exit $?"; tail -20 "$W/results/build-4b.log"
pack reader
