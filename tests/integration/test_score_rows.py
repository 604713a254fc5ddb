"""Score rows know their page's document and whether the model or the infrastructure failed: a request
that failed is never scored as the model's output; an output cut at max_tokens is the model's, scored and flagged."""

import json
import subprocess
import sys

import pytest

from quantgate.errors import InputError
from quantgate.heldout.synth import synth_pages
from quantgate.io.pageset import load_pageset
from quantgate.io.scores import read_scores, write_scores
from quantgate.judge.compare import compare_scores
from quantgate.schema.run import RequestRecord
from quantgate.schema.settings import VerdictSettings
from quantgate.scoring import get_metric, load_predictions, not_scored, score_pages


@pytest.fixture(scope="module")
def docs_pageset(tmp_path_factory):
    out = tmp_path_factory.mktemp("pages") / "docs"
    synth_pages(out, 36, seed=2, calibration_fraction=0.0, profile="simple", pages_per_document=3, noise=0.0)
    return load_pageset(out)


def _record(pid: str, **kw) -> dict:
    return RequestRecord(page_id=pid, concurrency=1, start=0.0, end=1.0, **kw).model_dump()


def _run(folder, records):
    folder.mkdir()
    (folder / "requests.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    return folder


def test_an_infrastructure_error_never_scores_as_the_models(tmp_path, docs_pageset):
    ps, ned = docs_pageset, [get_metric("ned")]
    pages = ps.split("heldout")
    truth = {p.id: ps.truth_text(p) for p in pages}
    base = _run(tmp_path / "base", [_record(p.id, output=truth[p.id], finish_reason="stop") for p in pages])
    down, broken, cut, silent = pages[0].id, pages[1].id, pages[2].id, pages[3].id
    cand_recs = []
    for p in pages:
        if p.id == down:
            cand_recs.append(_record(p.id, error="HTTP 503: server overloaded", error_kind="infrastructure"))
        elif p.id == broken:
            cand_recs.append(_record(p.id, error="image unreadable: x.png", error_kind="page", attempts=0))
        elif p.id == cut:
            cand_recs.append(_record(p.id, output=truth[p.id][:5], finish_reason="length", truncated=True))
        elif p.id == silent:
            cand_recs.append(_record(p.id, output="", finish_reason="stop"))
        else:
            cand_recs.append(_record(p.id, output=truth[p.id], finish_reason="stop"))
    cand = _run(tmp_path / "cand", cand_recs)
    rows = score_pages(ps, load_predictions(cand, ps, "heldout"), ned, "heldout")
    by = {r.page_id: r for r in rows}
    for pid in (down, broken):  # left out: no value to pair, flagged, no output hash, not an empty output
        assert by[pid].value("ned") is None and by[pid].error == "request failed"
        assert not by[pid].empty and by[pid].output_sha256 is None and not by[pid].truncated
    assert not_scored(rows) == [down, broken]
    assert by[cut].truncated and by[cut].error is None and by[cut].value("ned") > 0.5  # kept: the model's failure
    assert by[silent].empty and by[silent].value("ned") == 1.0 and not by[silent].truncated  # the model said nothing
    assert sum(r.truncated for r in rows) == 1

    # through the file and into a comparison: the failed pages are not paired at all
    write_scores(tmp_path / "c.jsonl", rows)
    back = read_scores(tmp_path / "c.jsonl")
    assert back[down].error == "request failed" and back[down].value("ned") is None and back[cut].truncated
    b = {r.page_id: r for r in score_pages(ps, load_predictions(base, ps, "heldout"), ned, "heldout")}
    v = compare_scores(b, back, VerdictSettings(metric="ned", margin=0.05))
    assert v.n == len(pages) - 2
    # were the failures scored as empty outputs (ned 1 each), the mean shift would include them
    assert v.delta == pytest.approx((by[cut].value("ned") + 1.0) / (len(pages) - 2))


def test_a_failure_without_a_kind_is_not_the_models_either(tmp_path, docs_pageset):
    ps = docs_pageset
    p = ps.split("heldout")[0]
    old = _record(p.id, error="timeout after 600 s") | {"schema_version": 1}
    del old["error_kind"], old["truncated"]
    run = _run(tmp_path / "old", [old])
    [row] = score_pages(ps, load_predictions(run, ps, "heldout"), [get_metric("ned")], "heldout", only={p.id})
    assert row.error == "request failed" and row.value("ned") is None
    [row] = score_pages(ps, {p.id: None}, [get_metric("ned")], "heldout", only={p.id})  # a caller's plain None
    assert row.error == "request failed" and row.value("ned") is None


def test_rows_carry_their_document(tmp_path, docs_pageset):
    ps = docs_pageset
    preds = tmp_path / "md"
    preds.mkdir()
    for p in ps.pages[:-1]:  # the last page has no prediction: scored as missing, still in its document
        (preds / f"{p.id}.md").write_text(ps.truth_text(p))
    r = subprocess.run([sys.executable, "-m", "quantgate", "score", "--pages", str(ps.root), "--predictions",
                        str(preds), "-o", str(tmp_path / "s.jsonl"), "--split", "all", "--metrics", "ned"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    lines = [json.loads(x) for x in (tmp_path / "s.jsonl").read_text().splitlines()]
    assert [x["document"] for x in lines[:4]] == ["synth-2-doc00000"] * 3 + ["synth-2-doc00001"]
    assert lines[-1]["document"] == "synth-2-doc00011" and lines[-1]["error"] == "missing"
    assert all("truncated" not in x for x in lines)  # written only when true: old readers see the rows they knew
    rows = read_scores(tmp_path / "s.jsonl")
    assert len({r.document for r in rows.values()}) == 12


@pytest.mark.parametrize("extra,msg", [
    ({"document": 3}, r"s\.jsonl:1: document = 3 is not a non-empty string"),
    ({"document": ""}, r"document = '' is not"),
    ({"truncated": "yes"}, r"s\.jsonl:1: truncated = 'yes' is not true or false"),
])
def test_bad_document_or_truncated_fields(tmp_path, extra, msg):
    (tmp_path / "s.jsonl").write_text(json.dumps({"page_id": "a", "ned": 0.1} | extra) + "\n")
    with pytest.raises(InputError, match=msg):
        read_scores(tmp_path / "s.jsonl")
