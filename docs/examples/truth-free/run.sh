#!/usr/bin/env bash
# The example end to end on this CPU: a team's 640 pages arrive without truth; quantgate draws 100 of them at
# random for labeling; "the labelers" write those (here: the synthesizer's exact truth of the drawn pages,
# nothing else); the study judges fp8-dynamic and nvfp4 on all 510 held-out pages. Writes work/ (ignored by git); the
# committed report.md and summary.json are copies of work/out's.
set -euo pipefail
cd "$(dirname "$0")"
QG="${QG:-quantgate}"
rm -rf work && mkdir work
# 1. the pages: reader pages, one document each (their truth stays aside in work/synth/truth)
$QG pages synth -o work/synth --n 640 --seed 7 --profile reader --calibration-fraction 0
# 2. imported without truth, as a team's own pages come (split: 20% of documents for calibration)
$QG pages import work/synth/images -o work/pages
# 3. the labeling draw: 100 held-out documents at random, recorded in work/pages/pageset.json
$QG pages label-sample work/pages -n 100 --sample-seed 1
# 4. the labelers write the truth of the drawn pages, from the image only (here: the exact truth)
mkdir work/labels
tail -n +2 work/pages/label-sample/pages.csv | cut -d, -f1 | while read -r id; do
  cp "work/synth/truth/$id.md" work/labels/
done
# 5. the truth imported (the same images, so the same split), and the same draw recorded again
$QG pages import work/synth/images -o work/pages --truth work/labels --overwrite
$QG pages label-sample work/pages -n 100 --sample-seed 1
# 6. the study, and its gate
$QG study study.yaml
$QG gate work/out || true
cp work/out/report.md work/out/summary.json .
