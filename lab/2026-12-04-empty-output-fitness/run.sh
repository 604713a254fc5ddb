#!/bin/bash
# The bundled reader judged on olmOCR-bench's whole sample (21 PDFs, both checks files), as a new user would:
# init, the e2e test's max_tokens (24; MAX_TOKENS=1024 for init's default), study, gate. Usage, from the repository
# root with ../shared/data/olmocr-bench-sample present: lab/2026-12-04-empty-output-fitness/run.sh WORKDIR
set -euo pipefail
W=$(realpath -m "${1:?give a work folder outside the repository}")
S=$(realpath ../shared/data/olmocr-bench-sample)
Q=".venv/bin/python -m quantgate"
mkdir -p "$W"
READER=$(.venv/bin/python -c "from quantgate.study.demo import READER; print(READER)")
$Q init --model "$READER" --pages "$S/pdfs" --checks "$S/dataset.jsonl" --checks "$S/blanks.jsonl" \
  --variants fp8-dynamic --calibration-fraction 0.2 --split-seed 1 -o "$W/study.yaml"
sed -i "s/^max_tokens: .*/max_tokens: ${MAX_TOKENS:-24}/" "$W/study.yaml"
(cd "$W" && PYTHONPATH="$OLDPWD" "$OLDPWD/.venv/bin/python" -m quantgate study study.yaml)
(cd "$W" && PYTHONPATH="$OLDPWD" "$OLDPWD/.venv/bin/python" -m quantgate gate reader-out --study study.yaml) || echo "gate exit $?"
.venv/bin/python - "$W/reader-out" <<'PY'
import json, sys
from pathlib import Path
out = Path(sys.argv[1])
s = json.loads((out / "summary.json").read_text())
rows = [json.loads(x) for x in (out / "scores" / "empty-output.jsonl").read_text().splitlines()]
base = {json.loads(x)["page_id"]: json.loads(x)["checks"] for x in (out / "scores" / "bf16-c1.jsonl").read_text().splitlines()}
keep = ("variant", "metric", "verdict", "reason", "n", "documents", "baseline_score", "baseline_floor",
        "empty_output_mean", "message")
print(json.dumps({"verdicts": [{k: v[k] for k in keep} for v in s["verdicts"]],
                  "pages": {r["page_id"]: {"empty_output": r["checks"], "baseline": base.get(r["page_id"])} for r in rows}},
                 indent=1))
PY
