#!/usr/bin/env bash
# The whole session on this CPU machine: the fake vLLM serves (tests.support.fake_vllm), the carried tiny
# fixtures stand in for the 4B checkpoints, GPU-only steps are recorded as skipped; a tiny study and a CPU-sized
# serving-option study (then serving_options.json) exercise the study slot. Exercises launch → jobs (steps,
# deadline, JSON written as steps end) → collect (packing).
#   bash lab/2026-12-03-h200-session-scripts/session/dry_run.sh [BUDGET_S]     (after prepare_carry.sh; prints the packed listing)
#   FAKE_VLLM_REFUSE=--speculative-config bash …dry_run.sh   (that option's server fails: the drop-and-resume path)
#   QG_DRY_STUDIES='studies-parallel/*.yaml' bash …dry_run.sh   (those studies instead of dry + serving options)
set -uo pipefail
export QG_DRY_RUN=1 QG_PY=${QG_PY:-/work/main/.venv/bin/python} QG_WORK=${QG_WORK:-/tmp/qgdry}
export QG_BUDGET_S=${1:-900} OUT=${OUT:-/tmp/qgdry-out}
export FAKE_VLLM_STATS_S=0.2   # the fake's n-gram stats lines, often enough for its short-lived servers
rm -rf "$QG_WORK" "$OUT" && mkdir -p "$OUT" "$QG_WORK/studies"
src=$QG_WORK/session/src
cat > "$QG_WORK/studies/dry.yaml" <<YAML
name: dry
model: $src/.gpu-carry/q25-bf16
pages: {path: $src/.gpu-carry/q200}
limit: 4
variants: [{name: bf16, recipe: bf16}, {name: fp8, recipe: fp8-dynamic}]
calibration_samples: 2
backend: {name: vllm, max_model_len: 2048, extra_args: ["--enforce-eager"]}
concurrency: [1, 2]
max_tokens: 8
metrics: [ned]
margins: {ned: 0.05}
YAML
# the session's study YAMLs (default studies/serving_options.yaml; QG_DRY_STUDIES names others, e.g.
# "studies-parallel/*.yaml"), CPU-sized: variants, layout and server_args unchanged (the fake vLLM takes
# --speculative-config, --kv-cache-dtype, --linear-backend), fewer pages, tokens and samples
$QG_PY - "$src" "$QG_WORK/studies" lab/2026-12-03-h200-session-scripts/session/${QG_DRY_STUDIES:-studies/serving_options.yaml} <<'PY'
import sys
from pathlib import Path
import yaml
src, out, *yamls = sys.argv[1:]
for y in yamls:
    st = yaml.safe_load(open(y))
    st.update(model=f"{src}/quantgate/assets/reader", pages={"path": f"{src}/.gpu-carry/q200"}, limit=6,
              calibration_samples=2, concurrency=[1, 2], max_tokens=8)
    yaml.safe_dump(st, open(Path(out) / Path(y).name, "w"), sort_keys=False)
PY
[ -n "${QG_DRY_STUDIES:-}" ] && rm -f "$QG_WORK/studies/dry.yaml"
export QG_STUDIES_DIR=$QG_WORK/studies
t0=$SECONDS
bash lab/2026-12-03-h200-session-scripts/session/launch.sh
bash lab/2026-12-03-h200-session-scripts/session/collect.sh "$QG_BUDGET_S"
echo "dry run: $((SECONDS - t0)) s"
for f in "$OUT"/*.tar.gz; do echo "== $f"; tar tzf "$f"; done
