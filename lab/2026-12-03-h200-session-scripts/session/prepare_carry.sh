#!/usr/bin/env bash
# Here (CPU), from the project root: build what the GPU session carries, then print its size beside the tracked
# tree's (one run() carries both, 64 MiB in all). Existing parts are kept; delete one to rebuild it.
#   .gpu-carry/p4mp        100 synthetic 1700x2400 pages (seed 11, no noise): calibration (16) and speed levels (64)
#   .gpu-carry/q200        250 reader pages (seed 7): batch invariance, the numerics request, the study slot
#   .gpu-carry/q25-bf16    the Qwen2.5-VL fixture (random weights, no Gated DeltaNet) and its fp8-dynamic and
#   .gpu-carry/q25-{fp8-dynamic,nvfp4}   nvfp4 variants (llmcompressor on CPU; nvfp4 calibrated on 4 reader pages)
#   .whl                   py3.12 wheels quantgate needs there that the image lacks (pydantic, rapidfuzz, the
#                          scoring parsers); the image has numpy, scipy, pandas, jinja2, matplotlib, aiohttp, httpx,
#                          pyyaml, tqdm, lxml, pillow; compressed-tensors and llmcompressor come with .gpu/install.sh
#   bash lab/2026-12-03-h200-session-scripts/session/prepare_carry.sh        (PY=... to pick the interpreter; default the shared venv)
set -euo pipefail
PY=${PY:-/work/main/.venv/bin/python}
export PYTHONPATH=$PWD
C=.gpu-carry
mkdir -p "$C" .whl
grep -qx '.gpu-carry/' .gitignore || echo '.gpu-carry/' >> .gitignore
[ -d $C/p4mp ] || $PY -m quantgate pages synth -o $C/p4mp --n 100 --seed 11 --page-size 1700x2400 --noise 0
[ -d $C/q200 ] || $PY -m quantgate pages synth -o $C/q200 --n 250 --seed 7 --profile reader
[ -d $C/q25-bf16 ] || $PY -c "from tests.support import fixtures; fixtures.build('qwen2_5_vl', '$C/q25-bf16')"
for r in fp8-dynamic nvfp4; do
  [ -d $C/q25-$r ] || $PY -m quantgate quantize $C/q25-bf16 --recipe $r --calibration $C/q200 --samples 4 \
    --device cpu -o $C/q25-$r 2>&1 | grep -v 'it/s]' | tail -2
done
# the versions the dev environment runs (and vLLM's bundle pins for pydantic), as manylinux py3.12 wheels
WHEELS=(pydantic==2.14.4 pydantic-core==2.50.5 annotated-types==0.8.0 typing-inspection==0.4.5 rapidfuzz==3.14.6
        beautifulsoup4==4.15.0 soupsieve==4.1.3 apted==1.0.3)
have=$(find .whl -name "*.whl" | wc -l)
if [ "$have" -lt ${#WHEELS[@]} ]; then
  $PY -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform manylinux_2_28_x86_64 --platform any \
    -d .whl "${WHEELS[@]}"
fi
tree=$(git ls-files -z | xargs -0 du -cb 2>/dev/null | tail -1 | cut -f1)
carry=$(du -sb $C .whl | awk '{s += $1} END {print s}')
du -sh $C/* .whl
echo "tracked tree $((tree / 1024 / 1024)) MiB + carry (.gpu-carry, .whl) $((carry / 1024 / 1024)) MiB" \
     "= $(((tree + carry) / 1024 / 1024)) MiB of 64 MiB per run() transfer"
