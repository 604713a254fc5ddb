#!/usr/bin/env bash
# Train the tiny reader on the lent H200 (see docs/gpu.md). Run from the repo root there, carrying
# .whl (pydantic, rapidfuzz, flash-linear-attention wheels for Python 3.12):
#   bash lab/2026-12-03-h200-session-scripts/train_reader.sh MINUTES_TOTAL STOP_AFTER_MINUTES
# Rerun while the machine is warm to continue from /tmp/rt (the schedule spans MINUTES_TOTAL).
set -euo pipefail
export PYTHONUNBUFFERED=1
total=${1:-16}; stop=${2:-8}
if [ ! -d /tmp/site/pydantic ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl
fi
export PYTHONPATH=/tmp/site:$PWD
python3 -c "import fla, torch; print('fla', fla.__version__, 'torch', torch.__version__, torch.cuda.get_device_name(0))" \
  || { echo "fla unusable: training on transformers' PyTorch fallback"; rm -rf /tmp/site/fla /tmp/site/fla_core*; }
nproc
python3 training/train_reader.py --work /tmp/rt --batch 64 --lr 2e-3 --minutes "$total" --stop-after "$stop" \
  --workers 12 --eval-every 400 --ckpt-every 200 --out /tmp/reader 2>&1 | grep -v "Warning\|warn(" | tee "${OUT:-/tmp}/train.log"
if [ -f /tmp/reader/model.safetensors ]; then
  tar cf "${OUT:-/tmp}/reader.tar" -C /tmp reader
  cp /tmp/rt/log.jsonl "${OUT:-/tmp}/train_log.jsonl"
fi
