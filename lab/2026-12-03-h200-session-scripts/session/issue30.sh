#!/usr/bin/env bash
# Issue 30 on one H200 (docs/gpu-plan-issue30.md, "On one GPU"), one detached job; every step timed and recorded
# by steps.py (results under $R/i30, status.jsonl), a failed step does not stop the job, nothing starts after the
# deadline (QG_BUDGET_S from launch, default 1380 s).
#   0. a snapshot of the code under $SES/src (each run() call replaces the working tree), then from there:
#   1. in the background, FlashInfer's sampling module built once for the machine (item 6's workaround: the first
#      sampler call of a fresh machine JIT-builds it under a file lock, ~120 s inside the first vLLM start)
#   2. HBM copy bandwidth; the 4B-class checkpoint (random weights, build_qwen3_5_4b.py)
#   3. `quantgate study studies-4b/speed_4b.yaml` (bf16, fp8-all, w4a16-all; QG_NVFP4=1 adds nvfp4-all): quantize,
#      one server at a time, accuracy pass c=1, speed levels c=1 and c=32 in 3 waves each with ignore_eos
#   4. each start's warm-up -> KV-cache span from the server logs (start_spans.py)
#   5. if time remains: `quantgate speed-profile` of QG_PROFILE_VARIANTS (default "bf16 fp8-all") at
#      QG_PROFILE_LEVELS (default 1; e.g. 1,32) into the study's speed/ (a cost table; the report's Decode step)
#   6. QG_TABLE_FROM=bf16,fp8-all,...: item 4's check (benchmarks/speed_table_check.py) on the other profiles
#   QG_STUDY_YAML=studies-4b/speed_4b_all.yaml: another study (default studies-4b/speed_4b.yaml); with a study
#      that profiles its own servers (speed.profile) set QG_PROFILE=0: step 5 would start every server again
#   QG_SIDE=1: beside the study's quantize and starts (the GPU is not timed then), item 7's batch-invariance servers
#      and item 6's flashinfer_wait.py phases A,B,C on the Qwen2.5-VL fixture; each starts only while the study
#      has sent no timed request, and is cut QG_SIDE_END_S (480) after launch, before the study can have started
#      its last server and measured anything (quantizing eight 4B variants alone takes longer)
#   QG_READER_STUDY=1: last, if QG_READER_MIN_S seconds remain, studies-parallel/a_parallel_1gpu.yaml (item 6's ratio)
#   QG_VARIANTS="bf16 fp8-dynamic nvfp4 mixed": the study's variants instead of the YAML's (presets by name)
#   QG_EXTRA_VARIANTS="nvfp4-all": presets added to the study (QG_NVFP4=1: nvfp4-all)
#   bash lab/2026-12-03-h200-session-scripts/session/issue30.sh               (after .gpu/install.sh; .gpu-carry/p4mp and .whl carried)
#   QG_DRY_RUN=1 bash lab/2026-12-03-h200-session-scripts/session/issue30.sh  (this CPU machine: fake vLLM, the tiny Qwen2.5-VL fixture)
set -uo pipefail
source lab/2026-12-03-h200-session-scripts/session/common.sh
if [ -z "${QG_SNAP:-}" ]; then
  if [ -f "$SES/i30.launched" ]; then echo "already launched"; exit 0; fi
  rm -rf "$SES/src" && mkdir -p "$SES/src"
  cp -a quantgate benchmarks tests pyproject.toml "$SES/src/"
  for d in .gpu-carry .whl; do [ -d "$d" ] && cp -a "$d" "$SES/src/"; done
  $PY $S/steps.py init "$DEADLINE" "${QG_BUDGET_S:-1380}"
  date +%s > "$SES/i30.launched"
  cd "$SES/src" && QG_SNAP=1 exec bash $S/issue30.sh
fi
JOB=i30
STATUS=$R/i30/status.jsonl
O=$R/i30
mkdir -p "$O"
export CUDA_VISIBLE_DEVICES=${QG_GPU0:-0}
trap 'touch "$SES/i30.done"' EXIT
nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv,noheader > "$O/gpu.txt" 2>&1 || echo "no nvidia-smi" > "$O/gpu.txt"
STUDY=$W/study4b

# 1. the prebuild, beside steps 2-3 (its own CPU work: nvcc; the first server samples minutes later)
if dry; then
  step flashinfer-prebuild 30 0 --skip "dry run: no FlashInfer" -- true &
else
  step flashinfer-prebuild 420 0 -- $VPY -c "import time; t = time.time(); from flashinfer.sampling import \
get_sampling_module; get_sampling_module(); print('flashinfer sampling module ready after', round(time.time() - t, 1), 's')" &
fi
fi_pid=$!

# 2. bandwidth (item 5's weight-read bound), then the checkpoint (dry run: the tiny Qwen2.5-VL fixture)
if dry; then
  step hbm 60 5 --skip "dry run: no GPU" -- true
  step build-4b 120 5 -- $PY -c "from tests.support import fixtures; fixtures.build('qwen2_5_vl', '$W/q4b-bf16')"
else
  step hbm 120 10 -- $PY -c "import json, sys; sys.path.insert(0, 'benchmarks/gpu'); from speed_sweep import \
copy_bandwidth_gbs as c; json.dump({'hbm_copy_gbs': round(c(), 1)}, open('$O/hbm.json', 'w')); print(open('$O/hbm.json').read())"
  if [ -f "$W/q4b-bf16/config.json" ]; then
    step build-4b 1 0 --skip "built by an earlier launch on this machine" -- true
  else
    step build-4b 300 60 -- $PY lab/2026-12-03-h200-session-scripts/build_qwen3_5_4b.py "$W/q4b-bf16"
  fi
fi

# the side job (QG_SIDE=1): items 7 and 6 on the small fixture while the study quantizes and starts its servers
side_ok() {  # the study has sent no timed request yet (its timings hold no page run or speed wave)
  ! grep -qs '"stage": "pages_run"\|"stage": "speed_waves"' "$STUDY/timings.jsonl"
}
side_left() { echo $(( $(cat "$SES/i30.launched") + ${QG_SIDE_END_S:-480} - $(date +%s) )); }
side_job() {
  while ! grep -qs '"flashinfer-prebuild"' "$STATUS"; do sleep 2; done   # after the prebuild: its spans are the fix's
  side_ok && QG_BI_CAP_S=$(side_left) batch_invariance "$O/batchinv"
  side_ok && step flashinfer-wait "$(side_left)" 150 --requires .gpu-carry/q25-bf16 -- $VPY $S/flashinfer_wait.py \
    --model .gpu-carry/q25-bf16 --compile-cache "$W/vllm-cache" --server-arg=--enforce-eager --phases A,B,C \
    -o "$O/flashinfer-wait" --deadline-file "$DEADLINE"
}

# 3. the study, its YAML with this machine's paths (dry run: CPU-sized)
Y=$O/$(basename "${QG_STUDY_YAML:-studies-4b/speed_4b.yaml}")
if [ -f "$O/hbm.json" ]; then  # the weight-read bound of the report's Decode step (speed.profile studies)
  mkdir -p "$STUDY/speed"
  $PY -c "import json; g = json.load(open('$O/hbm.json'))['hbm_copy_gbs']; json.dump({'schema_version': 1, \
'kind': 'quantgate.copy_bandwidth', 'gbs': g, 'source': 'lab/2026-12-03-h200-session-scripts/speed_sweep.copy_bandwidth_gbs, this GPU, \
this session (hbm.json)'}, open('$STUDY/speed/copy-bandwidth.json', 'w'))"
fi
side_pid=
if [ "${QG_SIDE:-0}" = 1 ]; then side_job & side_pid=$!; fi
$PY - "$S/${QG_STUDY_YAML:-studies-4b/speed_4b.yaml}" "$Y" "$W/q4b-bf16" "$PWD/.gpu-carry/p4mp" <<'PY'
import os, sys
import yaml
src, dst, model, pages = sys.argv[1:]
st = yaml.safe_load(open(src))
st.update(model=model, pages={"path": pages})
if os.environ.get("QG_VARIANTS"):  # the study's variants instead of the YAML's (presets by name; bf16 the baseline)
    st["variants"] = [{"name": r, "recipe": r} for r in dict.fromkeys(os.environ["QG_VARIANTS"].split())]
extra = os.environ.get("QG_EXTRA_VARIANTS", "").split() + (["nvfp4-all"] if os.environ.get("QG_NVFP4") == "1" else [])
for r in dict.fromkeys(extra):  # presets by name, each a variant of that name
    st["variants"].append({"name": r, "recipe": r})
if os.environ.get("QG_DRY_RUN") == "1":
    st.update(max_tokens=8, concurrency=[1, 4], calibration_samples=2)
    st["backend"].update(max_model_len=2048, extra_args=["--enforce-eager"])
    if (st.get("speed") or {}).get("profile"):  # the stand-in's profiles: few steps, the dry run's levels
        st["speed"].update(profile=[1, 4], profile_steps=6, profile_delay=2, profile_max_tokens=24)
yaml.safe_dump(st, open(dst, "w"), sort_keys=False)
PY
step study-4b "${QG_STUDY_CAP_S:-1200}" 300 --requires "$W/q4b-bf16" -- $QQPY -m quantgate study "$Y" -o "$STUDY"
wait $fi_pid
[ -n "$side_pid" ] && wait "$side_pid"

# 4. the start spans, and the study's small files next to them
collect_study() {
  mkdir -p "$O/study"
  (cd "$STUDY" 2>/dev/null && find . -maxdepth 3 \( -name '*.json' -o -name '*.jsonl' -o -name '*.md' -o -name '*.log' \
     -o -name '*.yaml' \) -not -path './.vllm-cache/*' -size -4M -print0 | xargs -0 -r cp --parents -t "$O/study")
}
collect_study
step start-spans 60 5 --requires "$STUDY/runs" -- $PY $S/start_spans.py "$STUDY" -o "$O/start_spans.json"

# 5. the decode profiles for a cost table (warm starts: the study's compile cache)
PA=(--server-arg=--kv-cache-memory-bytes=8589934592 --server-arg=--max-num-seqs=64
    --server-arg=--gdn-prefill-backend=triton --server-arg=--no-enable-prefix-caching
    --server-arg=--max-model-len=8192 --server-arg=--gpu-memory-utilization=0.3)
dry && PA=(--server-arg=--enforce-eager --server-arg=--max-model-len=2048)
# into the study's speed/ (its report gains the Decode step section); --copy-gbs from step 2's hbm.json
PV=()
for v in ${QG_PROFILE_VARIANTS:-bf16 fp8-all}; do PV+=("$STUDY/variants/$v"); done
CG=()
[ -f "$O/hbm.json" ] && CG=(--copy-gbs "$($PY -c "import json; print(json.load(open('$O/hbm.json'))['hbm_copy_gbs'])")"
                            --copy-source "lab/2026-12-03-h200-session-scripts/speed_sweep.copy_bandwidth_gbs, this GPU, this session")
if [ "${QG_PROFILE:-1}" = 1 ]; then
  step speed-profile "${QG_PROFILE_CAP_S:-300}" 150 --requires "${PV[-1]}" -- \
    $PY -m quantgate speed-profile "${PV[@]}" --pages .gpu-carry/p4mp \
    --concurrency "${QG_PROFILE_LEVELS:-1}" --vllm-cmd "$QUANTGATE_VLLM" --compile-cache "$STUDY/.vllm-cache" "${PA[@]}" \
    --max-tokens 256 "${CG[@]}" -o "$STUDY/speed"
  mkdir -p "$O/prof"
  (cd "$STUDY/speed" 2>/dev/null && find . \( -name '*.json' -o -name '*.log' \) -print0 | xargs -0 -r cp --parents -t "$O/prof")
fi
# 6. item 4's check: the table from QG_TABLE_FROM's profiles predicts every other profiled variant's step
if [ -n "${QG_TABLE_FROM:-}" ]; then
  step speed-table-check 60 5 --requires "$STUDY/speed" -- $PY benchmarks/speed_table_check.py \
    --step-profiles "$STUDY/speed" --table-from "$QG_TABLE_FROM" --study "$STUDY" ${QG_CHECK:+--check "$QG_CHECK"} \
    -o "$O/speed_table_check.json"
fi
# 7. item 6's ratio: the one-GPU parallel reader study again, now with FlashInfer's module built (641.0 s sequential,
#    2026-11-30b, another session), only when it can end before the deadline
if [ "${QG_READER_STUDY:-0}" = 1 ]; then
  step reader-parallel "${QG_READER_CAP_S:-480}" "${QG_READER_MIN_S:-420}" -- \
    $QQPY -m quantgate study $S/studies-parallel/a_parallel_1gpu.yaml -o "$W/reader-parallel"
  mkdir -p "$O/reader-parallel"
  (cd "$W/reader-parallel" 2>/dev/null && find . -maxdepth 3 \( -name 'study.json' -o -name 'summary.json' \
     -o -name 'timings.jsonl' -o -name 'report.md' -o -name 'run.json' -o -name 'server.log' \) -size -4M -print0 \
     | xargs -0 -r cp --parents -t "$O/reader-parallel")
fi
collect_study
echo "i30 done: $(left) s left"
