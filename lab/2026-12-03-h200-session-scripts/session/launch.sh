#!/usr/bin/env bash
# Start the session's two jobs (gpu0.sh, gpu1.sh) in the background and return at once. They run detached
# (setsid), so they survive between run() calls while the machine is held, from a snapshot of the code and
# the carried inputs under $W/session/src (every run() call re-copies the working tree; a job must not read
# scripts that are being replaced). The global deadline (QG_BUDGET_S from now, default 1440 s) is written once:
# a second launch only reports. Then call collect.sh to wait and bring results back.
#   bash lab/2026-12-03-h200-session-scripts/session/launch.sh          (after .gpu/install.sh; carry .whl and .gpu-carry)
#   QG_DRY_RUN=1 bash lab/2026-12-03-h200-session-scripts/session/launch.sh   (this CPU machine: fake vLLM)
#   QG_JOBS=gpu1 bash …launch.sh   (only that job; the other is recorded as ended)
set -uo pipefail
source lab/2026-12-03-h200-session-scripts/session/common.sh
if [ -f "$SES/launched" ]; then
  echo "already launched $(( $(date +%s) - $(cat "$SES/launched") )) s ago; $(left) s left"
  exit 0
fi
for need in .gpu-carry/p4mp .gpu-carry/q200 .gpu-carry/q25-bf16; do
  [ -e "$need" ] || echo "WARNING: $need not carried: the steps that need it will be skipped"
done
rm -rf "$SES/src" && mkdir -p "$SES/src"
cp -a quantgate benchmarks pyproject.toml "$SES/src/"
for d in .gpu-carry .whl; do [ -d "$d" ] && cp -a "$d" "$SES/src/"; done
$PY $S/steps.py init "$DEADLINE" "${QG_BUDGET_S:-1440}"
if dry; then
  ngpu=${QG_DRY_GPUS:-2}
else
  ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
fi
one=0
gpu1=1
if [ "$ngpu" -lt 2 ]; then one=1; gpu1=0; fi
echo "{\"gpus\": $ngpu, \"one_gpu\": $one, \"budget_s\": ${QG_BUDGET_S:-1440}, \"dry_run\": ${QG_DRY_RUN:-0}}" > "$R/session.json"
cd "$SES/src"
for job in gpu0 gpu1; do
  if [[ " ${QG_JOBS:-gpu0 gpu1} " != *" $job "* ]]; then  # not launched: recorded as ended at once
    touch "$SES/$job.done"
    continue
  fi
  QG_ONE_GPU=$one QG_GPU1=$gpu1 setsid nohup bash "$S/$job.sh" > "$SES/logs/$job.out" 2>&1 < /dev/null &
  echo $! > "$SES/$job.pid"
done
date +%s > "$SES/launched"
echo "launched ${QG_JOBS:-gpu0 gpu1} on $ngpu GPU(s); logs $SES/logs"
