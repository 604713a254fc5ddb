# Sourced by the session's scripts (launch.sh, gpu0.sh, gpu1.sh, collect.sh), from a project root.
#   QG_DRY_RUN=1     CPU dry run: the fake vLLM (tests.support.fake_vllm) serves, tiny carried fixtures stand in
#                    for the 4B checkpoints, GPU-only steps are recorded as skipped; work under /tmp/qgdry
#   QG_BUDGET_S      seconds from launch to the session's global deadline (default 1440: 24 min)
#   QG_STUDIES_DIR   where gpu1.sh looks for study YAMLs (default lab/2026-12-03-h200-session-scripts/session/studies)
#   QG_BI_GPU=1      the batch-invariance step runs on GPU1 after the numerics instead of last on GPU0
S=lab/2026-12-03-h200-session-scripts/session
if [ "${QG_DRY_RUN:-0}" = 1 ]; then
  PY=${QG_PY:-python3}
  export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
  export QUANTGATE_VLLM="$PY -m tests.support.fake_vllm"
  W=${QG_WORK:-/tmp/qgdry}
  QQPY=$PY   # the dev environment has llmcompressor and compressed-tensors
  VPY=$PY
else
  source lab/2026-12-03-h200-session-scripts/env.sh   # wheels into /tmp/qg; PYTHONPATH=/tmp/qg:$PWD; QUANTGATE_VLLM; W=/tmp/qgwork
  PY=python3
  QQPY="env PYTHONPATH=/tmp/siteq:/tmp/site:/tmp/qg:$PWD python3"   # llmcompressor 0.14 + compressed-tensors 0.19
  VPY="env PYTHONPATH=/tmp/site:/tmp/qg:$PWD python3"               # vLLM 0.26 in this interpreter
fi
SES=$W/session          # survives between run() calls while the machine is held
R=$SES/results          # everything collect.sh packs
DEADLINE=$SES/deadline
mkdir -p "$R" "$SES/logs"
dry() { [ "${QG_DRY_RUN:-0}" = 1 ]; }

# step NAME CAP_S MIN_S [--requires PATH]... [--skip REASON] -- CMD...   (JOB and STATUS set by the job script)
step() {
  local name=$1 cap=$2 min=$3
  shift 3
  mkdir -p "$R/$JOB/logs"
  $PY $S/steps.py run --status "$STATUS" --deadline-file "$DEADLINE" --name "$name" --cap "$cap" --min "$min" \
    --log "$R/$JOB/logs/$name.log" "$@"
}
left() { $PY $S/steps.py left "$DEADLINE"; }

# batch_invariance OUT: issue 22's batch-invariance check on this job's GPU (gpu0.sh, or gpu1.sh with QG_BI_GPU=1),
# and issue 30 item 7's speculative servers with and without it (QG_BI_SPECULATIVE: the --speculative-config JSON,
# by default the serving-options study's n-gram config; QG_BI_SPECULATIVE=none leaves them out)
BI_NGRAM='{"method":"ngram","num_speculative_tokens":3,"prompt_lookup_max":3,"prompt_lookup_min":2}'
batch_invariance() {
  local spec=()
  [ "${QG_BI_SPECULATIVE:-}" = none ] || spec=(--speculative "${QG_BI_SPECULATIVE:-$BI_NGRAM}")
  step batch-invariance "${QG_BI_CAP_S:-420}" 150 --requires .gpu-carry/q25-bf16 -- \
    $PY $S/batch_invariance.py --model .gpu-carry/q25-bf16 --pages .gpu-carry/q200 --reader quantgate/assets/reader \
    --n-pages 16 --concurrency 8 --max-tokens 64 --compile-cache "$W/vllm-cache" --deadline-file "$DEADLINE" \
    "${spec[@]}" -o "$1"
}
