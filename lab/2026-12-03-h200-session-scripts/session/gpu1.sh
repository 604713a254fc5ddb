#!/usr/bin/env bash
# GPU session, job on GPU1 (issues 16, 22), started by launch.sh; steps recorded in $R/gpu1/status.jsonl.
#   1. (background) vLLM numerics: one quantized linear layer of the Qwen2.5-VL fixture (fp8-dynamic, nvfp4, and
#      nvfp4 through --linear-backend emulation) in vLLM in-process vs x @ W_deq.T and the activation-fake-quantized
#      reference -> vllm_numerics.json
#   2. run_reader_studies: `quantgate study` for each YAML under studies/ (the slot below), beside step 1; after
#      studies/serving_options.yaml, benchmarks/serving_options.py -> serving_options.json (issue 22)
#   (QG_BI_GPU=1: gpu0's batch-invariance step runs here, after step 1; QG_NUMERICS=0 skips step 1)
# Each study gets its own Inductor cache (TORCHINDUCTOR_CACHE_DIR under $W/inductor/<name>; vLLM's and Triton's
# caches are already per study, under its folder), so two studies of the same variants both start cold. A study
# whose name contains "2gpu" waits for gpu0.sh to end and then spreads its servers over both GPUs (its YAML's
# `gpus`); it is skipped on a one-GPU machine or with less than QG_2GPU_MIN_S (default 360) seconds left.
# /proc/loadavg is sampled every 5 s into $R/gpu1/loadavg.jsonl (benchmarks/parallel_study.py reads it).
# On a one-GPU machine (QG_ONE_GPU=1, set by launch.sh) this job shares GPU0 with gpu0.sh: the studies still run
# (they are the serving-option measurements), after gpu0's idle-GPU bandwidth step, and serving_options.json names
# the gpu0 steps that ran beside each variant; QG_STUDIES_ON_ONE_GPU=0 skips them there instead.
set -uo pipefail
source lab/2026-12-03-h200-session-scripts/session/common.sh
JOB=gpu1
STATUS=$R/gpu1/status.jsonl
export CUDA_VISIBLE_DEVICES=${QG_GPU1:-1}
trap 'touch "$SES/gpu1.done"' EXIT
O=$R/gpu1
N=$W/numerics
mkdir -p "$O" "$N"

numerics() {
  for v in fp8-dynamic nvfp4; do
    step "dequant-$v" 120 10 --requires ".gpu-carry/q25-$v" -- \
      $QQPY $S/vllm_numerics.py dequant --variant ".gpu-carry/q25-$v" -o "$N/$v"
  done
  local extra=() skip=()
  dry && { extra=(--dry-run); skip=(--skip "dry run: no vLLM in-process (the layer is replaced by x @ W_deq.T)"); }
  for case in fp8-dynamic:auto nvfp4:auto nvfp4:emulation; do
    v=${case%%:*} lb=${case##*:}
    args=(--variant ".gpu-carry/q25-$v" --ref "$N/$v" --pages .gpu-carry/q200 -o "$N/measure-$v-$lb.json" "${extra[@]}")
    [ "$lb" = auto ] || args+=(--linear-backend "$lb")
    if dry && [ "$lb" != auto ]; then
      step "numerics-$v-$lb" 60 5 "${skip[@]}" -- true
      continue
    fi
    step "numerics-$v-$lb" 240 60 --requires "$N/$v.safetensors" -- \
      env VLLM_ENABLE_V1_MULTIPROCESSING=0 $VPY $S/vllm_numerics.py measure "${args[@]}"
  done
  step numerics-report 60 5 -- $PY $S/vllm_numerics.py report "$N"/measure-*.json -o "$O/vllm_numerics.json"
}

run_reader_studies() {
  # >>> SLOT for issue 22's study measurements (parallel variants, serving options as variants), built by another
  # helper: every lab/2026-12-03-h200-session-scripts/session/studies/*.yaml, in name order, `quantgate study` on this GPU, results under
  # $R/gpu1/studies/<name> (-o wins over the YAML's output). Pages and models it names must be carried
  # (prepare_carry.sh) and are resolved against the YAML's folder, as quantgate does: ../../../../.gpu-carry/q200.
  # The YAML's backend should name vllm (QUANTGATE_VLLM is set) and, for several servers on this GPU,
  # --kv-cache-memory-bytes with a small gpu_memory_utilization (no memory profiling beside a neighbour).
  local dir=${QG_STUDIES_DIR:-$S/studies} found=0
  for y in "$dir"/*.yaml; do
    [ -e "$y" ] || continue
    found=1
    local n
    n=$(basename "$y" .yaml)
    if [ "$n" != serving_options ]; then
      local envs=(env "TORCHINDUCTOR_CACHE_DIR=$W/inductor/$n")
      if [[ $n == *2gpu* ]]; then
        if [ "${QG_ONE_GPU:-0}" = 1 ]; then
          step "study-$n" 1 0 --skip "one GPU: this study spreads its servers over two" -- true
          continue
        fi
        until [ -e "$SES/gpu0.done" ] || [ "$(left)" -lt "${QG_2GPU_MIN_S:-360}" ]; do sleep 5; done
        if [ "$(left)" -lt "${QG_2GPU_MIN_S:-360}" ]; then
          step "study-$n" 1 0 --skip "less than ${QG_2GPU_MIN_S:-360} s left once GPU0 was free" -- true
          continue
        fi
        envs=(env -u CUDA_VISIBLE_DEVICES "TORCHINDUCTOR_CACHE_DIR=$W/inductor/$n")
      fi
      step "study-$n" "${QG_STUDY_CAP_S:-900}" 120 -- "${envs[@]}" $QQPY -m quantgate study "$y" -o "$O/studies/$n"
      continue
    fi
    # the serving options: a variant whose server fails (exit 4) is dropped and the study resumed without it (up
    # to 3 times); a minute is kept back before the deadline for the table, written also from a study cut short
    local sy=$y t0=$SECONDS rc
    for try in 1 2 3 4; do
      local cap=$(( ${QG_STUDY_CAP_S:-1200} - (SECONDS - t0) ))   # the deadline binds first with the usual budget
      cap=$(( $(left) - 60 < cap ? $(left) - 60 : cap ))
      local name=study-$n
      [ $try -gt 1 ] && name+=-retry$((try - 1))
      step "$name" "$cap" 60 -- $QQPY -m quantgate study "$sy" -o "$O/studies/$n"
      rc=$?
      [ $rc = 4 ] && [ $try -lt 4 ] || break
      sy=$W/retry-$n-$try.yaml
      step "drop-failed-$try" 30 5 -- $PY benchmarks/serving_options.py "$O/studies/$n" --drop-failed "$y" \
        --retry-yaml "$sy" || break
      y=$sy
    done
    step serving-options 120 5 --requires "$O/studies/$n/study.json" -- \
      $PY benchmarks/serving_options.py "$O/studies/$n" -o "$O/serving_options.json" --session-results "$R"
  done
  [ $found = 1 ] || step studies 1 0 --skip "no study YAML in $dir" -- true
  if [ -d "$O/studies/b_sequential_1gpu" ] || [ -d "$O/studies/a_parallel_1gpu" ]; then  # studies-parallel/
    step parallel-study 60 5 -- $PY benchmarks/parallel_study.py "$R" -o "$O/parallel_study.json"
  fi
  # <<< SLOT
}

numerics_then() {
  numerics
  [ "${QG_BI_GPU:-0}" = 1 ] && batch_invariance "$O/batchinv"
}
wait_gpu0_step() {  # NAME MAX_S: until gpu0 recorded step NAME (whatever its status), at most MAX_S seconds
  local t=0
  until grep -q "\"step\": \"$1\"" "$R/gpu0/status.jsonl" 2>/dev/null || [ $t -ge "$2" ]; do sleep 2; t=$((t + 2)); done
}

( while :; do echo "{\"t\": $(date +%s.%N | cut -c1-14), \"load\": \"$(cut -d' ' -f1-3 /proc/loadavg)\"}"; sleep 5
  done >> "$O/loadavg.jsonl" ) &
sampler=$!
trap 'kill $sampler 2>/dev/null; touch "$SES/gpu1.done"' EXIT
if [ "${QG_NUMERICS:-1}" = 1 ]; then
  numerics_then > "$O/numerics.out" 2>&1 &
else
  step numerics 1 0 --skip "QG_NUMERICS=0" -- true &
fi
num=$!
if [ "${QG_ONE_GPU:-0}" = 1 ] && [ "${QG_STUDIES_ON_ONE_GPU:-1}" != 1 ]; then
  step studies 1 0 --skip "one GPU: QG_STUDIES_ON_ONE_GPU=0 keeps the studies off gpu0's GPU" -- true
else
  [ "${QG_ONE_GPU:-0}" = 1 ] && wait_gpu0_step hbm 150   # its bandwidth is measured on an idle GPU
  run_reader_studies
fi
wait $num
echo "gpu1 done: $(left) s left"
