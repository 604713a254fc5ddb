#!/usr/bin/env bash
# The CI example (docs/ci/github-actions.yml, docs/ci/gitlab-ci.yml) run COLD, step by step, as a fresh runner would:
# a fresh clone, a fresh venv, pip from the checkout, an empty HOME (no pip cache, no quantgate variant store, no
# Hugging Face or compile cache), then the study and the gate; each step timed, the gate's exit code and junit.xml
# kept. Then the next CI run: a second fresh clone and an empty HOME again, with only the cache steps' paths
# (study-out/variants/<v>, study-out/runs/<v>) restored from the first, as actions/cache or GitLab's cache would.
# Usage: lab/2026-12-05-ci-example/run.sh [WORKDIR]   (default /tmp/ci-cold; it is deleted first)
#        PHASE=restored lab/2026-12-05-ci-example/run.sh [WORKDIR]   (the second run only, on a WORKDIR the first made)
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
SRC=$(cd "$HERE/../.." && pwd)                       # the quantgate checkout to clone
ROOT=${1:-/tmp/ci-cold}
PY=${PYTHON311:-$(command -v python3.11)}             # actions/setup-python's "3.11"
PHASE=${PHASE:-all}
unset XDG_CACHE_HOME HF_HOME TRANSFORMERS_CACHE TORCHINDUCTOR_CACHE_DIR QUANTGATE_VLLM
fresh_home() {  # an empty HOME: ~/.cache/pip, ~/.cache/quantgate (the variant store), ~/.cache/huggingface
    rm -rf "$1" && mkdir -p "$1"
    export HOME="$1" QUANTGATE_CACHE_DIR="$1/.cache/quantgate"
}
junit_cases() {  # junit_cases FILE: the testcases and the suite's counts
    python - "$1" <<'PY'
import sys, xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
rows = [(c.get("classname"), c.get("name"), [x.tag for x in c]) for c in root.iter("testcase")]
print(f"{len(rows)} testcases")
for r in rows:
    print(*r, sep="\t")
for s in ([root] if root.tag == "testsuite" else root.iter("testsuite")):
    print("suite", {k: s.get(k) for k in ("name", "tests", "failures", "errors", "skipped")})
PY
}
step() {  # step NAME COMMAND...: run it niced, time it, keep its output
    local name=$1; shift
    local t0=$(date +%s.%N)
    nice -n 10 "$@" > "$R/$name.out" 2>&1; local rc=$?
    local t1=$(date +%s.%N)
    printf '%s\t%s\t%.1f\n' "$name" "$rc" "$(echo "$t1 - $t0" | bc)" | tee -a "$R/times.tsv"
    return 0
}
if [ "$PHASE" = all ]; then
rm -rf "$ROOT" && mkdir -p "$ROOT/results"
R="$ROOT/results"
fresh_home "$ROOT/home"
printf 'step\trc\twall_s\n' > "$R/times.tsv"
{ echo "date: $(date -u +%FT%TZ)"; echo "host: $(uname -n), $(nproc) cores, $(uname -sr)";
  echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-)"; echo "python: $($PY --version)";
  echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"; } > "$R/machine.txt"

# actions/checkout
step clone git clone --quiet "$SRC" "$ROOT/qg"
git -C "$ROOT/qg" rev-parse HEAD > "$R/commit.txt"
# actions/setup-python: a fresh interpreter environment first on PATH
step venv "$PY" -m venv "$ROOT/venv"
export PATH="$ROOT/venv/bin:$PATH"
cd "$ROOT/qg"
# "System fonts": sudo apt-get update && sudo apt-get install -y fonts-dejavu-core fonts-wqy-zenhei (GitLab's
# image runs as root, without sudo: the same command as root where there is no sudo)
step fonts bash -ec 'S=$(command -v sudo || true); $S apt-get update && $S apt-get install -y fonts-dejavu-core fonts-wqy-zenhei
                    dpkg -s fonts-dejavu-core fonts-wqy-zenhei | grep -E "^(Package|Status|Version)"'
# "Install quantgate" (GitHub) / before_script (GitLab)
step install pip install -c constraints.txt .
# "Study" / script
step study quantgate study docs/ci/study.yaml -o study-out
# "Gate" / script
step gate quantgate gate study-out --study docs/ci/study.yaml --junit study-out/junit.xml
cp study-out/junit.xml study-out/report.md "$R/" 2>/dev/null
junit_cases "$R/junit.xml" > "$R/junit.txt"
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" >> "$R/machine.txt"
cat "$R/times.tsv" "$R/junit.txt"
fi

# The next run: a fresh runner (clone, empty HOME) whose cache steps restore each variant's two folders. The install
# step is the same command as above and is not repeated here: this run reuses its venv.
R="$ROOT/results/restored"
rm -rf "$R" "$ROOT/qg2" && mkdir -p "$R"
fresh_home "$ROOT/home2"
export PATH="$ROOT/venv/bin:$PATH"
printf 'step\trc\twall_s\n' > "$R/times.tsv"
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)" > "$R/machine.txt"
step clone git clone --quiet "$SRC" "$ROOT/qg2"
git -C "$ROOT/qg2" rev-parse HEAD > "$R/commit.txt"
cd "$ROOT/qg2"
for v in bf16 fp8-dynamic; do  # the cache steps' paths, one per line in both CI files
    for d in variants runs; do
        mkdir -p "study-out/$d" && cp -a "$ROOT/qg/study-out/$d/$v" "study-out/$d/$v"
    done
done
step study quantgate study docs/ci/study.yaml -o study-out
step gate quantgate gate study-out --study docs/ci/study.yaml --junit study-out/junit.xml
cp study-out/junit.xml "$R/" 2>/dev/null
junit_cases "$R/junit.xml" > "$R/junit.txt"
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" >> "$R/machine.txt"
cat "$R/times.tsv" "$R/junit.txt"