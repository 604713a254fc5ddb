#!/usr/bin/env bash
# GPU session, job on GPU0 (issues 20, 22, 17), started by launch.sh; every step is timed and recorded by steps.py
# (results under $R/gpu0, status.jsonl), a failed step does not stop the job, and nothing starts after the deadline.
#   1. HBM copy bandwidth (idle GPU)
#   2. build the Qwen3.5-4B-class checkpoint (random weights)
#   3. quantize fp8-dynamic, fp8-all, nvfp4, mixed (llmcompressor, --device cuda, 16 calibration pages of the
#      4-MP page set) in two lanes; meanwhile `quantgate sensitivity` of the BF16 model (fp8, nvfp4) and its wall time
#   4. serve4b.py: the five servers at once (cold starts), speed levels one variant at a time, profiles of bf16,
#      fp8-dynamic, fp8-all at c=1, warm restarts one at a time, speed.json (+ profile.json)
#   5. if time remains: batch_invariance.py on the Qwen2.5-VL fixture + the Qwen3.5 reader's refusal
# What runs is chosen by the environment (defaults: the 2026-11-30 session):
#   QG_QUANTIZE="fp8-dynamic nvfp4;fp8-all mixed"   recipes quantized, lanes split by ';' (each lane in order)
#   QG_4B_VARIANTS / QG_PROFILE / QG_RESTART_ORDER   serve4b.py's --variants / --profile / --restart-order
#   QG_WAVES=1   serve4b.py --waves;  QG_SENS=0 skips the sensitivity run;  QG_BI=0 skips step 5
set -uo pipefail
source lab/2026-12-03-h200-session-scripts/session/common.sh
JOB=gpu0
STATUS=$R/gpu0/status.jsonl
export CUDA_VISIBLE_DEVICES=${QG_GPU0:-0}
trap 'touch "$SES/gpu0.done"' EXIT
O=$R/gpu0
mkdir -p "$O"
CAL=.gpu-carry/p4mp
VARIANTS=${QG_4B_VARIANTS:-bf16,fp8-dynamic,fp8-all,nvfp4,mixed}
nvidia-smi --query-gpu=index,name,memory.total --format=csv,noheader > "$O/gpu.txt" 2>&1 || echo "no nvidia-smi" > "$O/gpu.txt"

# 1. bandwidth of a 4 GiB device-to-device copy, before anything else runs on this GPU
if dry; then
  step hbm 60 5 --skip "dry run: no GPU" -- true
else
  step hbm 120 10 -- $PY -c "import json, sys; sys.path.insert(0, 'benchmarks/gpu'); from speed_sweep import \
copy_bandwidth_gbs as c; json.dump({'hbm_copy_gbs': round(c(), 1)}, open('$O/hbm.json', 'w')); print(open('$O/hbm.json').read())"
fi

# 2. the checkpoint (dry run: the tiny Qwen2.5-VL fixture stands in for every 4B variant)
if dry; then
  step build-4b 60 5 -- cp -a .gpu-carry/q25-bf16 "$W/q4b-bf16"
else
  step build-4b 300 60 -- $PY lab/2026-12-03-h200-session-scripts/build_qwen3_5_4b.py "$W/q4b-bf16"
fi

# 3. sensitivity in the background, quantization in two lanes beside it (three processes on one GPU, ~20 GB each)
if dry; then
  SENS=(--calibration .gpu-carry/q200 --samples 2 --max-new-tokens 8 --batch-pages 2 --device cpu)
else
  SENS=(--calibration "$CAL" --samples "${QG_SENS_SAMPLES:-2}" --max-new-tokens "${QG_SENS_TOKENS:-32}"
        --max-seq-len 8192 --batch-pages 2 --device cuda)
fi
if [ "${QG_SENS:-1}" = 1 ]; then
  step sensitivity "${QG_SENS_CAP_S:-330}" 90 --requires "$W/q4b-bf16" -- \
    $QQPY -m quantgate sensitivity "$W/q4b-bf16" --formats fp8,nvfp4 "${SENS[@]}" -o "$O/sensitivity/sensitivity.json" &
else
  step sensitivity 1 0 --skip "QG_SENS=0" -- true &
fi
sens=$!

quantize() {  # quantize RECIPE
  if dry; then
    local src=.gpu-carry/q25-$1
    [ -d "$src" ] || src=.gpu-carry/q25-bf16
    step "quantize-$1" 60 5 --requires "$W/q4b-bf16" -- cp -a "$src" "$W/q4b-$1"
  else
    step "quantize-$1" 300 40 --requires "$W/q4b-bf16" -- $QQPY -m quantgate quantize "$W/q4b-bf16" --recipe "$1" \
      --calibration "$CAL" --samples 16 --max-seq-len 8192 --device cuda -o "$W/q4b-$1"
    cp "$W/q4b-$1/quantgate.json" "$O/q4b-$1.quantgate.json" 2>/dev/null
  fi
}
lanes=()
IFS=';' read -ra LANES <<< "${QG_QUANTIZE:-fp8-dynamic nvfp4;fp8-all mixed}"
for lane in "${LANES[@]}"; do
  ( for r in $lane; do quantize "$r"; done ) &
  lanes+=($!)
done
wait "${lanes[@]}"
wait $sens  # the servers need the memory the sensitivity run holds (its step cap bounds this wait)

# 4. the five servers at once, then one variant at a time
if dry; then
  SERVE=(--max-tokens 24 --kv-bytes 64MiB --startup-timeout 120 --levels-min-s 5 --profile-min-s 5 --restart-min-s 5)
else
  SERVE=(--max-tokens 1000 --kv-bytes "${QG_KV_BYTES:-12GiB}" --measure-hbm)
fi
step serve-4b "${QG_SERVE_CAP_S:-960}" 300 --requires "$W/q4b-bf16" -- \
  $PY $S/serve4b.py --work "$W" --pages "$CAL" --variants "$VARIANTS" --levels 1,8,32,64 --waves "${QG_WAVES:-1}" \
  --max-num-seqs 64 --gpu-util 0.05 --compile-cache "$W/vllm-cache" --profile "${QG_PROFILE:-bf16,fp8-dynamic,fp8-all}" \
  --restart-order "${QG_RESTART_ORDER:-bf16,fp8-dynamic,fp8-all,nvfp4,mixed}" --hbm "$O/hbm.json" --deadline-file "$DEADLINE" \
  --other-status "$R/gpu1/status.jsonl" -o "$O/speed" "${SERVE[@]}"

# 5. batch invariance on the Qwen2.5-VL fixture (no GDN), and the Qwen3.5 reader's refusal (QG_BI_GPU=1: on GPU1
#    instead, after its numerics, when GPU1 has time to spare)
if [ "${QG_BI:-1}" != 1 ]; then
  step batch-invariance 1 0 --skip "QG_BI=0" -- true
elif [ "${QG_BI_GPU:-0}" = 1 ]; then
  step batch-invariance 1 0 --skip "runs on GPU1 (QG_BI_GPU=1)" -- true
else
  batch_invariance "$O/batchinv"
fi
echo "gpu0 done: $(left) s left"
