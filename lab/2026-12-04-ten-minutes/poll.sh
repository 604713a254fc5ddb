#!/usr/bin/env bash
# One poll of session.sh's job, for a run() call: wait up to WAIT_S (or until the job is done), then pack what it
# wrote (time.json, the studies' small files and logs: no weights, no page images) into $OUT/ten.tar.gz.
#   bash lab/2026-12-04-ten-minutes/poll.sh [WAIT_S]
W=${QG_WORK:-/tmp/qgwork}
t0=$SECONDS
while [ $((SECONDS - t0)) -lt "${1:-0}" ] && [ ! -f "$W/ten.done" ]; do sleep 5; done
[ -f "$W/ten.done" ] && echo "JOB DONE"
cat /tmp/ten.log 2>/dev/null | tail -20
for k in cold warm; do tail -4 "$W/ten/$k.log" 2>/dev/null; done
for k in cold warm; do
  if [ -d "$W/$k" ] && [ ! -f "$W/ten/$k/time.json" ]; then  # a study under way: its timings so far
    mkdir -p "$W/ten/$k-partial" && cp "$W/$k/timings.jsonl" "$W/ten/$k-partial/" 2>/dev/null
    find "$W/$k/runs" -name server.log -exec tail -c 3000 {} \; > "$W/ten/$k-partial/server-tails.log" 2>/dev/null
  fi
done
cp /tmp/ten.log "$W/ten/" 2>/dev/null
mkdir -p "${OUT:-/tmp/qgdry-out}"
tar czf "${OUT:-/tmp/qgdry-out}/ten.tar.gz" -C "$W" ten 2>/dev/null && ls -la "${OUT:-/tmp/qgdry-out}"
