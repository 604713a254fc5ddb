#!/usr/bin/env bash
# Issue 31, item 4: the job lab/2026-12-03-h200-session-scripts/scale_session.sh launches on nvidia-h200-x2. Every step is timed and
# recorded by steps.py (results under $R/scale, status.jsonl); a failed step does not stop the job.
#   1. the Qwen3.5-4B-class checkpoint (random weights), as gpu0.sh builds it
#   2. quantize fp8-dynamic twice: on GPU 0 alone (--device cuda) and across GPUs 0 and 1 under --max-memory
#      0=5GiB,1=5GiB (the 9.08 GB BF16 model does not fit one 5 GiB cap); peaks per device in each quantgate.json,
#      and whether the two builds' weights are byte-identical (FP8_DYNAMIC takes no calibration data)
#   3. the BF16 4B model served three ways, one at a time, nothing else on the GPUs: TP=1 on GPU 0, TP=2 and
#      DP=2 on GPUs 0-1 (c = 1, 32, 64; one wave; 1,000 output tokens with ignore_eos; one compile cache)
#   4. the 4-variant reader study with one TP=2 variant and its BF16 layout twin, all at once on GPUs 0 and 1
#   5. scale_summary.py: scale.json (the numbers docs/scale.md and docs/gpu.md quote)
# QG_DRY_RUN=1: on this CPU machine, the fake vLLM serves, the bundled reader stands in for the 4B model, pages
# are synthesized, quantize runs on the CPU (the --devices build is expected to be refused there: no CUDA).
set -uo pipefail
source lab/2026-12-03-h200-session-scripts/session/common.sh
JOB=scale
STATUS=$R/scale/status.jsonl
O=$R/scale
mkdir -p "$O"
trap 'touch "$SES/scale.done"' EXIT
nvidia-smi --query-gpu=index,name,memory.total --format=csv,noheader > "$O/gpu.txt" 2>&1 || echo "no nvidia-smi" > "$O/gpu.txt"
M=$W/q4b-bf16
KV=(--server-arg=--kv-cache-memory-bytes=12884901888)   # the same 12 GiB KV cache in every layout
if dry; then
  step build-4b 60 5 -- sh -c "rm -rf '$M' && cp -a quantgate/assets/reader '$M'"
  rm -rf "$W/scale-pages"
  step pages 120 5 -- $PY -m quantgate pages synth -o "$W/scale-pages" --n 24 --profile reader --seed 4
  PAGES=$W/scale-pages
  DEV1=(--device cpu)
  TOKENS=24
  KV=()
else
  [ -d "$M" ] && step build-4b 1 0 --skip "built already" -- true || \
    step build-4b 300 60 -- $PY lab/2026-12-03-h200-session-scripts/build_qwen3_5_4b.py "$M"
  PAGES=.gpu-carry/p4mp
  DEV1=(--device cuda)
  TOKENS=1000
fi

# 2. one GPU, then two under a cap one GPU alone could not meet
CUDA_VISIBLE_DEVICES=0 step quantize-1gpu 300 40 --requires "$M" -- \
  $QQPY -m quantgate quantize "$M" --recipe fp8-dynamic "${DEV1[@]}" -o "$W/q4b-fp8-1gpu"
CUDA_VISIBLE_DEVICES=0,1 step quantize-2gpu 300 40 --requires "$M" -- \
  $QQPY -m quantgate quantize "$M" --recipe fp8-dynamic --devices 0,1 --max-memory "${QG_CAP:-0=5GiB,1=5GiB}" \
  -o "$W/q4b-fp8-2gpu"
for v in 1gpu 2gpu; do cp "$W/q4b-fp8-$v/quantgate.json" "$O/q4b-fp8-$v.quantgate.json" 2>/dev/null; done

# 3. BF16 at TP=1, TP=2, DP=2
serve() {  # serve NAME CUDA_VISIBLE_DEVICES FLAGS...
  local name=$1 gpus=$2
  shift 2
  CUDA_VISIBLE_DEVICES=$gpus step "serve-$name" "${QG_SERVE_CAP_S:-480}" 120 --requires "$M" -- \
    $PY -m quantgate serve "$M" --pages "$PAGES" --backend vllm "$@" --concurrency 1,32,64 --waves 1 \
    --max-tokens "$TOKENS" --ignore-eos --compile-cache "$W/vllm-cache" --startup-timeout-s 900 \
    --server-arg=--max-num-seqs=64 --server-arg=--no-enable-prefix-caching --server-arg=--gdn-prefill-backend=triton \
    "${KV[@]}" -o "$O/serve-$name"
}
serve tp1 0 --tensor-parallel-size 1
serve tp2 0,1 --tensor-parallel-size 2
serve dp2 0,1 --data-parallel-size 2

# 4. the reader study (dry: synthesized pages, fewer of them, shorter outputs)
Y=$S/studies-scale/reader_tp2.yaml
if dry; then
  $PY - "$Y" "$W/reader_tp2.yaml" "$PWD" <<'PY'
import sys, yaml
src, dst, root = sys.argv[1:]
st = yaml.safe_load(open(src))
st.update(model=f"{root}/quantgate/assets/reader", pages={"synth": {"n": 16, "profile": "reader", "seed": 2, "calibration_fraction": 0.3}},
          limit=6, calibration_samples=2, concurrency=[1, 2], max_tokens=8, min_pages=4, resamples=1000)
yaml.safe_dump(st, open(dst, "w"), sort_keys=False)
PY
  Y=$W/reader_tp2.yaml
fi
step study-reader-tp2 "${QG_STUDY_CAP_S:-600}" 200 -- $QQPY -m quantgate study "$Y" -o "$O/study-reader-tp2"

# 5. the numbers
step summary 60 5 -- $PY lab/2026-12-03-h200-session-scripts/scale_summary.py "$O" -o "$O/scale.json"
echo "scale done: $(left) s left"
