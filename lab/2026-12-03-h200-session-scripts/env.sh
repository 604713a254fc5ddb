# Sourced by the GPU scripts: quantgate's own few dependencies (carried as py3.12 wheels in .whl,
# since the GPU image has no network), vLLM in /tmp/site, llmcompressor in /tmp/siteq (.gpu/install.sh).
export PYTHONUNBUFFERED=1
[ -d /tmp/qg/pydantic ] || python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/qg .whl/*.whl
export PYTHONPATH=/tmp/qg:$PWD
export QUANTGATE_VLLM="env PYTHONPATH=/tmp/site python3 -m vllm.entrypoints.cli.main"
QG="python3 -m quantgate"
QGQ="env PYTHONPATH=/tmp/siteq:/tmp/site:/tmp/qg:$PWD python3 -m quantgate"  # with llmcompressor
W=/tmp/qgwork  # survives between runs while the machine is held
mkdir -p "$W/results"
pack() {  # $OUT brings back at most 8 files: one archive per step
  tar czf "$OUT/$1.tar.gz" -C "$W/results" . && ls -la "$OUT"
}
