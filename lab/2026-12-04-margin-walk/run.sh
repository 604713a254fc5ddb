#!/usr/bin/env bash
# Every run in walk.json.gz: each commit checked out in a git worktree under /tmp, walked with this checkout's .venv
# (PYTHONPATH points quantgate and tests.support at the worktree), the worktree removed. From the repository root:
#   bash lab/2026-12-04-margin-walk/run.sh
set -euo pipefail
root=$PWD
here=$root/lab/2026-12-04-margin-walk
py=$root/.venv/bin/python
rm -f "$here/walk.json.gz"
# before: d3c77cb^ (the tree the issue was measured on: cli/, study/gate.py, judge/ importing the study's spec);
# each settings commit beside its parent; after: HEAD
for spec in before:d3c77cb^ 6fba36b^:6fba36b^ 6fba36b:6fba36b 2c8fb52:2c8fb52 46315fa^:46315fa^ 46315fa:46315fa acedb91:acedb91 65e0f6a:65e0f6a \
            after:HEAD; do
  label=${spec%%:*}
  rev=$(git rev-parse "${spec#*:}")
  wt=/tmp/walk-$rev
  git worktree add --detach -q "$wt" "$rev"
  runs=("$label:" "$label-seq:--sequential")
  [ "$label" = after ] && runs+=("control:--control" "control-seq:--control --sequential")  # the margin left out
  for r in "${runs[@]}"; do
    name=${r%%:*}
    (cd "$wt" && PYTHONPATH="$wt" "$py" "$here/walk.py" --label "$name" ${r#*:} --out "$here/walk.json.gz" \
      > "/tmp/walk-$name.log" 2>&1) || { echo "$name failed: /tmp/walk-$name.log"; exit 1; }
  done
  git worktree remove --force "$wt"
done
"$py" "$here/walk.py"
