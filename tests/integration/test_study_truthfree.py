"""Pages without truth through a whole study (the stub server, ``tests.support.stub_study``): a page set where only
the pages of a random labeling draw have truth is served whole to every variant; the study writes each run's
truth-free bounds beside its score file, summary.json, the console and the report count the pages with and without
truth, the report shows the largest bounds without truth, and the gate binds the bound files (an edited one is
INVALID, named)."""

from __future__ import annotations

import json
import shutil

import pytest

from quantgate.gate.check import INVALID, gate
from quantgate.io.bounds import read_bounds
from quantgate.io.pageset import load_pageset
from tests.support.stub_study import run, study_yaml
from tests.support.truthless import drop_truth

N, PER_DOC, DRAW = 48, 2, 5


def _study(root, n: int, per_doc: int, draw: int, keep=None, corrupt: float = 0.3, **fields):
    """A stub study whose page set keeps truth only on ``keep(drawn page ids, page set)`` (default: the draw)."""
    from quantgate.heldout.label import label_sample
    from quantgate.heldout.synth import synth_pages

    # the stub answers each page from a set with every truth (by the image's hash); the study's set keeps truth
    # only on the pages chosen, as a team that labeled those and nothing else
    synth_pages(root / "answers", n, seed=5, profile="simple", pages_per_document=per_doc, calibration_fraction=0.2)
    shutil.copytree(root / "answers", root / "pages")
    drawn, _ = label_sample(root / "pages", draw, seed=3)
    kept = set(drawn.page_ids) if keep is None else keep(drawn, load_pageset(root / "pages"))
    assert drop_truth(root / "pages", kept) == len(kept)
    study = study_yaml(root / "study.yaml", root / "answers", {"cand": corrupt}, metrics=["ned"], **fields)
    spec = study.read_text().replace(f"path: {(root / 'answers').resolve()}", f"path: {(root / 'pages').resolve()}")
    study.write_text(spec)
    lines: list[str] = []
    summary = run(study, root / "out", log=lines.append)
    return root, summary, drawn, lines


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    return _study(tmp_path_factory.mktemp("truthfree"), N, PER_DOC, DRAW, min_pages=5, min_documents=3)


def test_every_page_served_and_counted(finished):
    root, summary, drawn, lines = finished
    held = load_pageset(root / "pages").split("heldout")
    docs = {p.document for p in held}
    for name in ("bf16", "cand"):
        sent = {json.loads(x)["page_id"] for x in (root / "out" / "runs" / name / "requests.jsonl").read_text().splitlines()
                if x.startswith("{")}
        assert {p.id for p in held} <= sent  # pages without truth are served too
    t = summary["truth"]
    assert (t["pages"], t["documents"]) == (len(held), len(docs))
    assert (t["with_truth"], t["documents_with_truth"]) == (len(drawn.page_ids), DRAW)
    assert (t["without_truth"], t["documents_without_truth"]) == (len(held) - len(drawn.page_ids), len(docs) - DRAW)
    assert t["label_sample"] == len(drawn.page_ids) and t["labeled_at_random"] and t["sample_note"] is None
    said = f"{len(held)} pages judged in {len(docs)} documents: {len(drawn.page_ids)} with truth"
    assert any(said in line for line in lines)  # the console
    md = (root / "out" / "report.md").read_text()
    assert "## Pages without truth" in md and said in md
    assert "### cand: the largest bounds" in md and "(no truth) | ned" in md
    html = (root / "out" / "report.html").read_text()
    section = html[html.index("<h2>Pages without truth</h2>"):]
    assert said in section and "cand: the largest bounds" in section
    assert "<img class='thumb'" in section.split("</table>")[1]  # each largest-bound page beside its image


def test_bounds_beside_the_scores_pair_the_outputs(finished):
    from quantgate.scoring.bounds import truth_free_bound

    root, summary, drawn, _ = finished
    out = root / "out"
    held = {p.id for p in load_pageset(root / "pages").split("heldout")}

    def outputs(name, level):
        recs = [json.loads(x) for x in (out / "runs" / name / "requests.jsonl").read_text().splitlines()
                if x.startswith("{")]
        return {r["page_id"]: r["output"] for r in recs if r.get("concurrency") == level and r.get("page_id")}

    base, cand, rerun = outputs("bf16", 1), outputs("cand", 1), outputs("bf16", 2)
    bounds = read_bounds(out / "scores" / "cand-c1.bounds.jsonl")
    assert set(bounds) == held  # with truth or without
    for pid, row in bounds.items():
        assert row.bounds["ned"] == truth_free_bound("ned", base[pid], cand[pid])
    changed = [pid for pid in held if base[pid] != cand[pid]]
    assert changed and all(bounds[p].bounds["ned"] > 0 for p in changed)
    assert any(p not in drawn.page_ids for p in changed)  # damage the bounds see where no truth is
    # the stub answers the baseline's re-run identically: its bounds are all 0, nothing changed
    noise = read_bounds(out / "scores" / "bf16-c2.bounds.jsonl")
    assert set(noise) == held and all(r.bounds["ned"] == 0 and r.identical for r in noise.values())
    assert rerun == base
    # scored where truth is, unscored (null) where it is not
    scores = {json.loads(x)["page_id"]: json.loads(x) for x in (out / "scores" / "cand-c1.jsonl").read_text().splitlines()}
    assert all((scores[p]["ned"] is not None) == (p in drawn.page_ids) for p in held)
    rows = {(x["variant"], x["metric"]): x for x in summary["truth_free"]}
    assert rows["cand", "ned"]["changed"] == len(changed) and rows["bf16", "ned"]["changed"] == 0
    assert rows["cand", "ned"]["mean_bound"] == pytest.approx(sum(r.bounds["ned"] for r in bounds.values()) / len(held))
    top = summary["largest_bounds"]["cand"]
    assert top and top[0]["bound"] == max(r.bounds["ned"] for r in bounds.values())
    assert all(b["has_truth"] == (b["page_id"] in drawn.page_ids) for b in top)


def test_the_verdict_is_made_on_every_page(finished):
    """The candidate's verdict rests on every judged page, with truth or without; the gate makes the same verdict
    again (the untouched folder is not INVALID)."""
    root, summary, drawn, _ = finished
    held = load_pageset(root / "pages").split("heldout")
    v = next(x for x in summary["verdicts"] if x["variant"] == "cand" and x["metric"] == "ned")
    # (five drawn documents are too few to rectify the bound, so the method is the bound's, or the labeled
    # pages' when they show the regression themselves)
    assert v["method"] in ("labeled", "bound") and v["mean_bound"] > 0
    assert (v["pages_with_truth"], v["pages_without_truth"]) == (len(drawn.page_ids), len(held) - len(drawn.page_ids))
    assert v["noise_flips"] == 0 and v["noise_mean_bound"] == 0
    assert v["verdict"] != "within_noise"  # 30% of the pages cut in half is no pass
    assert gate(root / "out").code != INVALID


def test_gate_binds_the_bound_files(finished, tmp_path):
    root, *_ = finished
    assert gate(root / "out").code != INVALID
    out = shutil.copytree(root / "out", tmp_path / "out")
    path = out / "scores" / "cand-c1.bounds.jsonl"
    rows = [json.loads(x) for x in path.read_text().splitlines()]
    for r in rows:
        r["bounds"]["ned"] = 0.0  # "the candidate changed nothing that matters"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    res = gate(out)
    assert res.code == INVALID and "scores/cand-c1.bounds.jsonl" in res.lines[0], res.lines


def test_a_folder_from_before_the_bounds_is_still_gated(tmp_path):
    """A schema-3 summary (no counts, no bounds files) is gated on what it has; a schema-4 one must bind its bounds."""
    from quantgate.gate.check import PASS
    from tests.support.study_folder import finished_study

    out = finished_study(tmp_path / "s", {"fp8": 0.0})
    summary = json.loads((out / "summary.json").read_text())
    kept = dict(summary)
    for f in [f for f in summary["inputs"]["files"] if f.endswith(".bounds.jsonl")]:
        (out / f).unlink()
        del summary["inputs"]["files"][f]
    old = {k: v for k, v in summary.items() if k not in ("truth", "truth_free", "largest_bounds")}
    (out / "summary.json").write_text(json.dumps({**old, "schema_version": 3}))
    assert gate(out).code == PASS
    # the same folder claiming schema 4's counts without its bounds files is not
    (out / "summary.json").write_text(json.dumps({**kept, "inputs": summary["inputs"]}))
    res = gate(out)
    assert res.code == INVALID and "inputs.files lists no hash for scores/fp8-c1.bounds.jsonl" in res.lines[0], res.lines


def test_only_the_recorded_draw_rectifies(tmp_path):
    """Truth on the 24 documents drawn at random rectifies the bound; truth on 24 documents picked by hand (the draw
    recorded, its pages left unlabeled) never does: the verdict falls back to the bound alone."""
    def cand(summary):
        return next(x for x in summary["verdicts"] if x["variant"] == "cand" and x["metric"] == "ned")

    _, drawn_summary, drawn, _ = _study(tmp_path / "drawn", 80, 1, 24, corrupt=0.05)
    v = cand(drawn_summary)
    assert (v["method"], v["pages_at_random"]) == ("rectified", 24) and v["excess_lower"] is not None
    assert drawn_summary["truth"]["labeled_at_random"]

    def by_hand(drawn, ps):  # the first 24 held-out pages outside the draw
        return {p.id for p in [q for q in ps.split("heldout") if q.id not in drawn.page_ids][:24]}

    _, hand_summary, _, _ = _study(tmp_path / "hand", 80, 1, 24, keep=by_hand, corrupt=0.05)
    v = cand(hand_summary)
    assert v["pages_with_truth"] == 24 and v["method"] == "bound" and not v["pages_at_random"]
    assert v["excess_lower"] is None and not hand_summary["truth"]["labeled_at_random"]
