#!/usr/bin/env bash
# GPU step (issue 20): where a decode step's time goes, per variant (torch profile of 32 decode steps at
# concurrency 1, kernels classified by lab/2026-12-03-h200-session-scripts/kernel_classes.py), after sweep.sh so each start is warm.
#   bash lab/2026-12-03-h200-session-scripts/profile.sh VARIANTS [extra profile_step.py flags]   e.g.  bf16,fp8-dynamic,fp8-all
set -uo pipefail
source lab/2026-12-03-h200-session-scripts/env.sh
timeout 550 python3 lab/2026-12-03-h200-session-scripts/profile_step.py --work "$W" --pages .gpu-carry/p4mp --variants "$1" \
  --speed "$W/results/speed/speed.json" -o "$W/results/profile" "${@:2}"
echo "exit $?"
tar czf "$OUT/profile-${1//,/-}.tar.gz" -C "$W/results" profile && ls -la "$OUT"  # traces: a few MB each
