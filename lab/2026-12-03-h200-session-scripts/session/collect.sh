#!/usr/bin/env bash
# Wait up to WAIT_S seconds (less if both jobs end first), then pack everything finished so far into $OUT —
# cumulative, so the last call's archives hold the whole session — and print the status and the key results.
#   bash lab/2026-12-03-h200-session-scripts/session/collect.sh WAIT_S
# $OUT gets at most 5 files, each kept under 15 MiB: gpu0.tar.gz, gpu1.tar.gz (JSON, logs; no checkpoints, page
# images or caches), traces.tar.gz (torch profiler traces; the largest dropped until it fits), status.txt, tail.txt.
set -uo pipefail
source lab/2026-12-03-h200-session-scripts/session/common.sh
WAIT_S=${1:-0}
OUT=${OUT:-$W/out}
mkdir -p "$OUT"
S_ABS=$PWD/$S
finished() {  # a job is over when it wrote its .done marker or its process is gone
  local j=$1
  [ -f "$SES/$j.done" ] && return 0
  [ -f "$SES/$j.pid" ] && ! kill -0 "$(cat "$SES/$j.pid")" 2>/dev/null
}
end=$((SECONDS + WAIT_S))
last=0
while [ $SECONDS -lt $end ]; do
  finished gpu0 && finished gpu1 && break
  if [ $((SECONDS - last)) -ge 60 ]; then
    echo "[$(date +%T)] $(left) s to the deadline; running: gpu0 $(ls "$R/gpu0/status.jsonl.running" 2>/dev/null | tr '\n' ' ')| gpu1 $(ls "$R/gpu1/status.jsonl.running" 2>/dev/null | tr '\n' ' ')"
    last=$SECONDS
  fi
  sleep 5
done

LIMIT=$((15 * 1024 * 1024))
EXCL=(--exclude='*.png' --exclude='*.jpg' --exclude='*.safetensors' --exclude='*.pt' --exclude='*.bin'
      --exclude='.vllm-cache' --exclude='vllm-cache' --exclude='pages' --exclude='variants' --exclude='trace')
size() { stat -c %s "$1" 2>/dev/null || echo 0; }
pack_job() {  # pack_job gpu0|gpu1: logs cut to their last 2 MB if the archive is too big
  local j=$1 f=$OUT/$1.tar.gz
  [ -d "$R/$j" ] || return 0
  local also=()
  [ -f "$R/session.json" ] && also=(session.json)   # what the analysis scripts read beside the job's folder
  tar czf "$f" -C "$R" "${EXCL[@]}" "$j" "${also[@]}" 2>/dev/null
  if [ "$(size "$f")" -gt $LIMIT ]; then
    local tmp=$SES/packtmp
    rm -rf "$tmp" && mkdir -p "$tmp" && tar cf - -C "$R" "${EXCL[@]}" "$j" "${also[@]}" | tar xf - -C "$tmp"
    find "$tmp" -name '*.log' -size +2M -exec sh -c 'tail -c 2000000 "$1" > "$1.t" && mv "$1.t" "$1"' _ {} \;
    tar czf "$f" -C "$tmp" "$j" "${also[@]}" && rm -rf "$tmp"
  fi
}
pack_job gpu0
pack_job gpu1
mapfile -t traces < <(find "$R" -path '*/trace/*' -name '*.pt.trace.json*' -printf '%s %P\n' 2>/dev/null | sort -n | cut -d' ' -f2-)
while [ ${#traces[@]} -gt 0 ]; do
  tar czf "$OUT/traces.tar.gz" -C "$R" "${traces[@]}"
  [ "$(size "$OUT/traces.tar.gz")" -le $LIMIT ] && break
  echo "traces: $(size "$OUT/traces.tar.gz") bytes, dropping ${traces[-1]}"
  unset 'traces[-1]'
  rm -f "$OUT/traces.tar.gz"
done

{
  echo "== session $(cat "$R/session.json" 2>/dev/null); $(left) s to the deadline"
  for j in gpu0 gpu1; do
    if finished $j; then echo "$j: finished"; else echo "$j: running $(ls "$R/$j/status.jsonl.running" 2>/dev/null | tr '\n' ' ')"; fi
  done
  $PY $S/steps.py table "$R/gpu0/status.jsonl" "$R/gpu1/status.jsonl"
} > "$OUT/status.txt"
$PY $S_ABS/summary.py "$R" > "$OUT/tail.txt" 2>&1
cat "$OUT/status.txt" "$OUT/tail.txt"
ls -la "$OUT"
