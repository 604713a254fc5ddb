#!/usr/bin/env bash
# Time to a verdict on one H200: one detached job that builds the 4B-class checkpoint (random weights), then runs
# the same `quantgate study` (ten.yaml) twice into new folders — cold (a fresh machine: compile, FlashInfer and
# variant caches empty) and warm (the machine cache the cold study filled: ~/.cache/quantgate) — and writes
# time.json for each from the study's own timings. Everything lands under $W/ten (poll.sh packs it).
#   here:   bash ../shared/gpu/prepare.sh            (vLLM + llmcompressor wheels in six parts; see docs/gpu.md)
#           python -m quantgate pages synth -o .gpu-carry/p4mp --n 100 --seed 11 --page-size 1700x2400 --noise 0
#           .whl: quantgate's few wheels the image lacks (lab/2026-12-03-h200-session-scripts/session/prepare_carry.sh)
#           git archive HEAD quantgate tests/__init__.py tests/support pyproject.toml lab/2026-12-03-h200-session-scripts \
#             lab/2026-12-04-ten-minutes | tar x -C .gpu-src; git rev-parse HEAD > .gpu-src/COMMIT
#   device: bash .gpu/install.sh && QG_SRC=.gpu-src setsid nohup bash .gpu-src/lab/2026-12-04-ten-minutes/session.sh \
#             > /tmp/ten.log 2>&1 < /dev/null &
#           bash lab/2026-12-04-ten-minutes/poll.sh 540          (each poll: waits, then packs into $OUT)
#   QG_DRY_RUN=1 bash lab/2026-12-04-ten-minutes/session.sh      (CPU: the stand-in vLLM, the tiny Qwen3.5 fixture)
set -uo pipefail
L=lab/2026-12-04-ten-minutes
W=${QG_WORK:-/tmp/qgwork}
R=$W/ten
if [ -z "${QG_SNAP:-}" ]; then  # a snapshot of the code: every run() call replaces the working tree
  if [ -f "$W/ten.launched" ]; then echo "already launched"; exit 0; fi
  S=${QG_SRC:-.}  # the code to run: a `git archive` of one commit (carried as .gpu-src), not a shared working tree
  rm -rf "$W/src" && mkdir -p "$W/src/lab" "$R"
  cp -a "$S/quantgate" "$S/tests" "$S/pyproject.toml" "$W/src/"   # tests/support: the checkpoint's builder
  cp -a "$S/$L" "$S/lab/2026-12-03-h200-session-scripts" "$W/src/lab/"
  [ -f "$S/COMMIT" ] && cp "$S/COMMIT" "$R/"
  for d in .gpu-carry .whl; do [ -d "$d" ] && cp -a "$d" "$W/src/"; done
  date +%s > "$W/ten.launched"
  cd "$W/src" && QG_SNAP=1 exec bash $L/session.sh
fi
trap 'touch "$W/ten.done"' EXIT
export PYTHONUNBUFFERED=1
if [ "${QG_DRY_RUN:-0}" = 1 ]; then
  PY=${QG_PY:-/work/main/.venv/bin/python}
  export PYTHONPATH=$PWD QUANTGATE_VLLM="$PY -m tests.support.fake_vllm" QUANTGATE_CACHE_DIR=$W/cache
  QQPY=$PY
  PAGES=${QG_PAGES:-$W/pages}
  [ -d "$PAGES" ] || $PY -m quantgate pages synth -o "$PAGES" --n 100 --seed 11 --profile simple > /dev/null
else
  PY=python3
  [ -d /tmp/qg/pydantic ] || $PY -m pip install -q --no-index --no-deps --no-compile --target /tmp/qg .whl/*.whl
  export PYTHONPATH=/tmp/qg:$PWD
  export QUANTGATE_VLLM="env PYTHONPATH=/tmp/site python3 -m vllm.entrypoints.cli.main"
  QQPY="env PYTHONPATH=/tmp/siteq:/tmp/site:/tmp/qg:$PWD python3"   # llmcompressor 0.14 + compressed-tensors 0.19
  PAGES=$PWD/.gpu-carry/p4mp
fi
stamp() { echo "[$(date -u +%H:%M:%S)] $*"; }
nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv,noheader > "$R/gpu.txt" 2>&1 \
  || echo "no nvidia-smi (CPU dry run)" > "$R/gpu.txt"
du -sh ~/.cache/quantgate ~/.cache/flashinfer ~/.cache/vllm ~/.triton 2>&1 | tee "$R/caches-before.txt"

# 1. the checkpoint (not part of the study's time: a team's model is already on disk)
M=$W/q4b-bf16
t=$(date +%s.%N)
if [ ! -f "$M/config.json" ]; then
  if [ "${QG_DRY_RUN:-0}" = 1 ]; then
    $PY -c "from tests.support import fixtures; fixtures.build('qwen3_5', '$M')" > "$R/build.log" 2>&1
  else
    $PY lab/2026-12-03-h200-session-scripts/build_qwen3_5_4b.py "$M" > "$R/build.log" 2>&1
  fi
fi
stamp "checkpoint: $(awk "BEGIN {printf \"%.1f\", $(date +%s.%N) - $t}") s"

# 2. the study's YAML with this machine's paths (dry run: CPU-sized)
Y=$R/ten.yaml
$PY - "$L/ten.yaml" "$Y" "$M" "$PAGES" <<'PY'
import os, sys
import yaml
src, dst, model, pages = sys.argv[1:]
st = yaml.safe_load(open(src))
st.update(model=model, pages={"path": pages})
if os.environ.get("QG_DRY_RUN") == "1":
    st.update(max_tokens=8, limit=8, calibration_samples=2)
    # not eager: the stand-in keeps a compile cache keyed by the served path as vLLM does, so warm_check means something
    st["backend"].update(max_model_len=2048, extra_args=[])
yaml.safe_dump(st, open(dst, "w"), sort_keys=False)
PY

# the GPU's memory every 10 s (what the servers hold against the study's memory plan; idle neighbours)
( while [ ! -f "$W/ten.done" ]; do
    echo "$(date -u +%H:%M:%S) $(nvidia-smi --query-gpu=memory.used,utilization.gpu --format=csv,noheader 2>/dev/null)" \
      "| $(nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader 2>/dev/null | tr '\n' ';')"
    sleep 10
  done > "$R/gpu-memory.log" 2>&1 ) &

# 3. cold, then 4. warm: the same study into a new folder each, timed by the session's clock too
for kind in cold warm; do
  stamp "study $kind: start"
  t=$(date +%s.%N)
  $QQPY -m quantgate study "$Y" -o "$W/$kind" > "$R/$kind.log" 2>&1
  rc=$?
  wall=$(awk "BEGIN {printf \"%.1f\", $(date +%s.%N) - $t}")
  stamp "study $kind: exit $rc after $wall s"
  mkdir -p "$R/$kind"
  (cd "$W/$kind" && find . -maxdepth 3 \( -name 'summary.json' -o -name 'study.json' -o -name 'timings.jsonl' \
     -o -name 'report.md' -o -name 'run.json' -o -name 'server.log' -o -name 'quantgate.json' \) -size -4M -print0 \
     | xargs -0 -r cp --parents -t "$R/$kind")
  cp "$R/$kind.log" "$R/$kind/study.log"
  # warm: its servers against the cold study's — the same served path (the variant store's) and compile cache hit
  vs=(); [ "$kind" = warm ] && vs=(--cold "$R/cold/time.json")
  $PY $L/time_json.py "$W/$kind" --gpu-file "$R/gpu.txt" --command-wall-s "$wall" "${vs[@]}" -o "$R/$kind/time.json"
  $PY -c "import json,sys; t=json.load(open(sys.argv[1])); print('time.json:', t['wall_s'], 's', 'warm_check:',
t.get('warm_check', {}).get('all_warm'), {v: (s['compile_start'], s['served_from']) for v, s in t['servers'].items()})" \
    "$R/$kind/time.json"
  du -sh ~/.cache/quantgate/* "${QUANTGATE_CACHE_DIR:-/nonexistent}"/* 2>/dev/null > "$R/caches-after-$kind.txt"
done
stamp "session done"
