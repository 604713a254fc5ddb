"""`quantgate sensitivity` on one calibration page says its calibration is thin (pages and
tokens it measured on), and its console is as quiet as `study`'s: third-party bars and warnings go to the
log beside the output, quantgate's own lines and the table to the terminal."""

import json
import subprocess
import sys

from quantgate.study.demo import READER


def test_thin_calibration_is_said_and_library_output_goes_to_the_log(tmp_path):
    from quantgate.heldout.synth import synth_pages

    pages = tmp_path / "pages"
    synth_pages(pages, 2, seed=5, calibration_fraction=1.0, profile="reader")  # every page
    n_cal = sum(json.loads(line)["split"] == "calibration" for line in (pages / "pages.jsonl").read_text().splitlines())
    assert n_cal >= 1
    out = tmp_path / "sens.json"
    p = subprocess.run([sys.executable, "-m", "quantgate", "sensitivity", str(READER), "--calibration", str(pages),
                        "--formats", "w4a16", "--calibration-samples", "1", "--max-new-tokens", "16", "-o", str(out)],
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    assert "thin calibration" in p.stdout and "on 1 page(s)" in p.stdout
    assert "thin calibration" in p.stderr  # said while it runs, too
    # no library progress bar (tqdm's "it/s" / "%|") nor Python warning on the terminal; the log has its lines
    assert "%|" not in p.stderr and "it/s]" not in p.stderr and "Warning:" not in p.stderr, p.stderr[-2000:]
    log = out.with_suffix(".log").read_text()
    assert "reference: 1 page(s)" in log
