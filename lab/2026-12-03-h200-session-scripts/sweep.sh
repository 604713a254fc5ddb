#!/usr/bin/env bash
# GPU step (issues 9, 20): speed sweep of the 4B-class variants under vLLM's defaults (torch.compile + CUDA
# graphs), each variant started twice against one compile cache ($W/vllm-cache: cold, then warm), uncontended.
#   bash lab/2026-12-03-h200-session-scripts/sweep.sh VARIANTS [HARNESS_VARIANT] [extra speed_sweep.py flags, e.g. --mode0]
#   e.g.  bash lab/2026-12-03-h200-session-scripts/sweep.sh bf16,fp8-dynamic,fp8-all      or  bash lab/2026-12-03-h200-session-scripts/sweep.sh nvfp4,mixed nvfp4
# Resumable: a rerun keeps finished variants/levels (results in /tmp/qgwork/results/speed).
set -uo pipefail
source lab/2026-12-03-h200-session-scripts/env.sh
timeout 550 python3 lab/2026-12-03-h200-session-scripts/speed_sweep.py --work "$W" --pages .gpu-carry/p4mp --variants "$1" \
  --harness-on "${2:-}" -o "$W/results/speed" "${@:3}"
echo "exit $?"
pack "sweep-${1//,/-}"
