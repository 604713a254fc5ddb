#!/usr/bin/env bash
# Issue 31, item 4, measured on nvidia-h200-x2 (two H200s): the 4B class at TP=1 vs TP=2 vs DP=2 (tok/s per request
# at c=1, output tok/s at c=32/64, start seconds), a quantize across 2 GPUs under a --max-memory cap one GPU alone
# could not meet (peaks per device; weights against the one-GPU build), and the 4-variant reader study on 2 GPUs with
# one TP=2 variant. The job is lab/2026-12-03-h200-session-scripts/session/scale.sh (steps, caps, deadline as the other session jobs).
#
# Here, first (from the project root):
#   bash ../shared/gpu/prepare.sh && bash lab/2026-12-03-h200-session-scripts/session/prepare_carry.sh
#   QG_DRY_RUN=1 bash lab/2026-12-03-h200-session-scripts/scale_session.sh run      # optional: the whole job on this CPU (fake vLLM)
# Then, back to back (a machine idle for 30 s is given back):
#   run(kind="nvidia-h200-x2", carry=[".gpu/parts/part00"], command="mkdir -p /tmp/stage && cp .gpu/parts/part00 /tmp/stage/")
#   … the same for part01 … part05
#   status()   # budget_left_s = B; QG_BUDGET_S = B - 200, e.g. 1300
#   run(carry=[".gpu/install.sh", ".gpu/parts/bundle.sha256", ".whl", ".gpu-carry"], timeout_s=600,
#       command="set -o pipefail; bash .gpu/install.sh 2>&1 | tail -3 && QG_BUDGET_S=1300 bash lab/2026-12-03-h200-session-scripts/scale_session.sh launch && bash lab/2026-12-03-h200-session-scripts/scale_session.sh collect $((560 - SECONDS))")
#   run(timeout_s=600, command="bash lab/2026-12-03-h200-session-scripts/scale_session.sh collect 570")   # until it prints "scale: finished"
#   give_back()
# Then copy $OUT's files into benchmarks/results/gpu-<date>-scale/ and write docs/scale.md's numbers from scale.json.
#   bash lab/2026-12-03-h200-session-scripts/scale_session.sh launch | collect WAIT_S | run
set -uo pipefail
source lab/2026-12-03-h200-session-scripts/session/common.sh
OUT=${OUT:-$W/out}
case "${1:-}" in
  launch)
    if [ -f "$SES/scale.launched" ]; then echo "already launched; $(left) s left"; exit 0; fi
    rm -rf "$SES/scale-src" && mkdir -p "$SES/scale-src"
    cp -a quantgate benchmarks tests pyproject.toml "$SES/scale-src/"   # a snapshot: run() replaces the tree
    for d in .gpu-carry .whl; do [ -d "$d" ] && cp -a "$d" "$SES/scale-src/"; done
    [ -f "$DEADLINE" ] || $PY $S/steps.py init "$DEADLINE" "${QG_BUDGET_S:-1440}"
    (cd "$SES/scale-src" && setsid nohup bash "$S/scale.sh" > "$SES/logs/scale.out" 2>&1 < /dev/null &)
    touch "$SES/scale.launched"
    echo "launched scale.sh; $(left) s to the deadline; log $SES/logs/scale.out"
    ;;
  collect)
    end=$((SECONDS + ${2:-0}))
    while [ $SECONDS -lt $end ] && [ ! -f "$SES/scale.done" ]; do sleep 5; done
    mkdir -p "$OUT"
    tar czf "$OUT/scale.tar.gz" -C "$R" --exclude='*.png' --exclude='*.safetensors' --exclude='vllm-cache' \
      --exclude='.vllm-cache' --exclude='variants' --exclude='pages' scale
    { [ -f "$SES/scale.done" ] && echo "scale: finished" || echo "scale: running $(ls "$R/scale/status.jsonl.running" 2>/dev/null | tr '\n' ' ')"
      $PY $S/steps.py table "$R/scale/status.jsonl"
      [ -f "$R/scale/scale.json" ] && cat "$R/scale/scale.json"; } | tee "$OUT/scale-status.txt"
    ls -la "$OUT"
    ;;
  run)
    [ -f "$DEADLINE" ] || $PY $S/steps.py init "$DEADLINE" "${QG_BUDGET_S:-1440}"
    bash "$S/scale.sh"
    bash "$0" collect 0
    ;;
  *) echo "usage: $0 launch | collect WAIT_S | run"; exit 2 ;;
esac
