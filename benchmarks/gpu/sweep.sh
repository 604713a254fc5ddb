#!/usr/bin/env bash
# GPU step 2+ (issue 9 parts 2-4): speed sweep of the 4B-class variants built by reader_parity.sh.
#   bash benchmarks/gpu/sweep.sh VARIANTS [HARNESS_VARIANT]     e.g.  bf16,fp8-dynamic   or  nvfp4,mixed nvfp4
# Resumable: a rerun keeps finished variants/levels (results in /tmp/qgwork/results/speed).
set -uo pipefail
source benchmarks/gpu/env.sh
timeout 550 python3 benchmarks/gpu/speed_sweep.py --work "$W" --pages .gpu-carry/p4mp --variants "$1" \
  --harness-on "${2:-}" -o "$W/results/speed"
echo "exit $?"
pack "sweep-${1//,/-}"
