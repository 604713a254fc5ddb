"""A study whose variant's server failed every request of a level stops there, with one
line naming the variant, the level and the first error (``ServerError``: exit 4, as ``quantgate serve``), before
anything is scored or reported; fixed, the rerun re-sends those pages and finishes. The stub server
(``tests.support.stub``) answers every request of the candidate with HTTP 500."""

from __future__ import annotations

import yaml

from quantgate.errors import ServerError
from tests.support.stub_study import run, study_yaml


def test_a_fully_failed_level_stops_the_study_with_one_line_and_no_verdict(tmp_path):
    import pytest

    from quantgate.heldout.synth import synth_pages

    synth_pages(tmp_path / "pages", 6, seed=3, profile="simple", calibration_fraction=0.0)
    study = study_yaml(tmp_path / "study.yaml", tmp_path / "pages", {"down": 0.0}, min_pages=3, concurrency=[1])
    body = yaml.safe_load(study.read_text())
    body["variants"][1]["server_args"] = ["--fault", "500"]  # every request of this server answers HTTP 500
    study.write_text(yaml.safe_dump(body, sort_keys=False))
    out = tmp_path / "out"
    with pytest.raises(ServerError) as err:
        run(study, out)
    msg = str(err.value)
    assert err.value.exit_code == 4 and "\n" not in msg
    assert msg.startswith("down: every request failed at concurrency 1 (the first: "), msg
    assert "500" in msg and str(out / "runs" / "down" / "requests.jsonl") in msg
    # nothing reported as a verdict: no score file, summary or report was written
    assert not (out / "summary.json").exists() and not (out / "scores").exists() and not (out / "report.md").exists()
    # the server fixed, the rerun re-sends the failed pages and finishes
    body["variants"][1]["server_args"] = []
    study.write_text(yaml.safe_dump(body, sort_keys=False))
    summary = run(study, out)
    assert summary["complete"] and len(summary["verdicts"]) == 2
    from quantgate.serve.run import load_records

    last = load_records(out / "runs" / "down")
    assert len(last) == 6 and all(r.error is None for r in last)  # each failed page re-sent once, answered
