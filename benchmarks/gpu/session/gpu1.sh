#!/usr/bin/env bash
# GPU session, job on GPU1 (issues 16, 22), started by launch.sh; steps recorded in $R/gpu1/status.jsonl.
#   1. (background) vLLM numerics: one quantized linear layer of the Qwen2.5-VL fixture (fp8-dynamic, nvfp4, and
#      nvfp4 through --linear-backend emulation) in vLLM in-process vs x @ W_deq.T and the activation-fake-quantized
#      reference -> vllm_numerics.json
#   2. run_reader_studies: `quantgate study` for each YAML under studies/ (the slot below), beside step 1
#   (QG_BI_GPU=1: gpu0's batch-invariance step runs here, after step 1)
# On a one-GPU machine (QG_ONE_GPU=1, set by launch.sh) this job shares GPU0 with gpu0.sh: it runs the numerics
# (small, eager) but the studies only with QG_STUDIES_ON_ONE_GPU=1, since they would disturb gpu0's speed levels.
set -uo pipefail
source benchmarks/gpu/session/common.sh
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
  # helper: every benchmarks/gpu/session/studies/*.yaml, in name order, `quantgate study` on this GPU, results under
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
    step "study-$n" "${QG_STUDY_CAP_S:-900}" 120 -- $QQPY -m quantgate study "$y" -o "$O/studies/$n"
  done
  [ $found = 1 ] || step studies 1 0 --skip "no study YAML in $dir" -- true
  # <<< SLOT
}

numerics_then() {
  numerics
  [ "${QG_BI_GPU:-0}" = 1 ] && batch_invariance "$O/batchinv"
}
numerics_then > "$O/numerics.out" 2>&1 &
num=$!
if [ "${QG_ONE_GPU:-0}" = 1 ] && [ "${QG_STUDIES_ON_ONE_GPU:-0}" != 1 ]; then
  step studies 1 0 --skip "one GPU: studies would share it with gpu0's speed levels (QG_STUDIES_ON_ONE_GPU=1 runs them)" -- true
else
  run_reader_studies
fi
wait $num
echo "gpu1 done: $(left) s left"
