#!/usr/bin/env bash
# One poll of issue30.sh's job, for a run() call: wait up to WAIT_S (or until the job is done), then pack what it
# wrote (status, study JSON and logs, profiles — no weights, no traces) into $OUT/i30.tar.gz.
#   bash lab/2026-12-03-h200-session-scripts/session/issue30_poll.sh [WAIT_S]
set -uo pipefail
source lab/2026-12-03-h200-session-scripts/session/common.sh
t0=$SECONDS
while [ $((SECONDS - t0)) -lt "${1:-0}" ] && [ ! -f "$SES/i30.done" ]; do sleep 5; done
STUDY=$W/study4b
if [ -d "$STUDY" ]; then
  mkdir -p "$R/i30/study"
  (cd "$STUDY" && find . -maxdepth 3 \( -name '*.json' -o -name '*.jsonl' -o -name '*.md' -o -name '*.log' \
     -o -name '*.yaml' \) -not -path './.vllm-cache/*' -size -4M -print0 | xargs -0 -r cp --parents -t "$R/i30/study")
fi
cp /tmp/s30.log "$R/i30/" 2>/dev/null
$PY $S/steps.py table "$R/i30/status.jsonl" 2>/dev/null
ls "$SES/src/$S" >/dev/null 2>&1 && ls "$R/i30/status.jsonl.running" 2>/dev/null
[ -f "$SES/i30.done" ] && echo "JOB DONE"
echo "left: $($PY $S/steps.py left "$DEADLINE" 2>/dev/null) s"
tail -3 /tmp/s30.log 2>/dev/null
mkdir -p "${OUT:-/tmp/qgdry-out}"
tar czf "${OUT:-/tmp/qgdry-out}/i30.tar.gz" -C "$R" i30 2>/dev/null && ls -la "${OUT:-/tmp/qgdry-out}"
