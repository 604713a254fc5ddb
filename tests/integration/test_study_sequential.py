"""Sequential verdicts in a study, and the time budget — whole studies on CPU in seconds, served by
the stub server (``tests.support.stub_study``: each page answered with its ground truth; a candidate's
``--corrupt F`` answers a share F of the pages with half their words). Everything but quantize is the
study's own code."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from quantgate.errors import InputError
from tests.support.paths import REPO
from tests.support.stub_study import run, study_yaml

CANDIDATES = {"same": 0.0, "bad": 0.6, "mid": 0.1}  # identical outputs, a clear regression, a smaller one
SEQ = {"looks": 4, "first_look": 10}
# 80 single-page documents: looks at 20, 40, 60, 80 (a smoke-test size; the calibrated minima are 30 pages and 30
# documents), with a declared worst page damage of 2.5 margins, which 6 pages rule out (at the default,
# every page ruined, a pass needs 299 pages and no look here could decide)
SMALL = {"min_pages": 10, "min_documents": 10, "worst_page_damage": {"ned": 0.025, "bow_f1": 0.025}}


@pytest.fixture(scope="module")
def pages(tmp_path_factory):
    from quantgate.heldout.synth import synth_pages

    out = tmp_path_factory.mktemp("seq") / "pages"
    synth_pages(out, 80, seed=3, profile="simple", calibration_fraction=0.0)
    return out


@pytest.fixture(scope="module")
def studies(pages, tmp_path_factory):
    """The same study sequential and fixed; the sequential one timed from outside."""
    root = tmp_path_factory.mktemp("studies")
    seq = study_yaml(root / "seq.yaml", pages, CANDIDATES, sequential=SEQ, **SMALL)
    fixed = study_yaml(root / "fixed.yaml", pages, CANDIDATES, **SMALL)
    t0 = time.time()
    rep = run(seq, root / "seq")
    outer = time.time() - t0
    run(fixed, root / "fixed")
    return root / "seq", root / "fixed", rep, outer


def _gate_code(rows):
    """What the gate's exit code must be for these verdicts: 1 for a Holm-confirmed regression (or a loss of
    equivalence), else 2 when any is undecided. At 20 pages the document-level interval (Student-t on
    documents − 1 degrees of freedom) leaves a clear look-1 regression unconfirmed after Holm over six rows."""
    from quantgate.gate.check import INCONCLUSIVE, PASS, REGRESSION
    from quantgate.judge.family import confirmed
    from quantgate.schema.summary import VariantVerdict

    vs = [VariantVerdict.model_validate(r) for r in rows]
    if all(v.verdict == "within_noise" for v in vs):
        return PASS
    return REGRESSION if any(confirmed(v) or v.verdict == "not_equivalent" for v in vs) else INCONCLUSIVE


def _summary(out):
    return json.loads((out / "summary.json").read_text())


def _records(out, variant, c):
    return [json.loads(x) for x in (out / "runs" / variant / "requests.jsonl").read_text().splitlines()
            if json.loads(x)["concurrency"] == c]


def _order(out, st_seed=0):
    from quantgate.judge.sequential import page_order
    from quantgate.study.plan import judged_ids

    return page_order(judged_ids(out / "pages" / "pages.jsonl", "heldout", None), st_seed)


def test_sequential_study_stops_early_and_records_where(studies):
    """Identical outputs and a clear regression both stop before the page budget; a smaller regression
    goes on to a later look; each candidate's accuracy pass served exactly the first pages of the seeded
    order up to its stopping look, in that order, while the baseline served the whole budget and the speed
    level every page. run.json, summary.json and report.md record the same stopping point."""
    out, _, rep, _ = studies
    s = _summary(out)
    seq = {v["name"]: v["sequential"] for v in s["variants"]}
    assert seq["bf16"] is None
    order = _order(out)
    for name in CANDIDATES:
        d = seq[name]
        assert d["stop"] and d["stop_reason"] == "all_decisive" and d["look"] < len(d["looks"]) == 4
        assert d["pages_used"] == d["looks"][d["look"] - 1] < d["n_max"] == 80
        recs = _records(out, name, 1)
        assert [r["page_id"] for r in sorted(recs, key=lambda r: r["start"])] == order[: d["pages_used"]]
        assert len(_records(out, name, 2)) == 80  # the speed level serves every page, as in the fixed design
        run_json = json.loads((out / "runs" / name / "run.json").read_text())
        stop = run_json["sequential"]
        assert (stop["look"], stop["pages_used"], stop["stop"], stop["n_max"]) == (d["look"], d["pages_used"], True, 80)
        assert stop["decisions"] == {m: x["verdict"] for m, x in d["metrics"].items()}
        level = next(lv for lv in run_json["levels"] if lv["concurrency"] == 1)
        assert level["n_requests"] == d["pages_used"]
        # one batch per look, each its own session, so the level's speed leaves out the looks between batches
        batches: dict = {}
        for r in recs:
            batches.setdefault(r["session"], []).append(r)
        assert len(batches) == d["look"]
        assert level["wall_s"] == pytest.approx(sum(max(r["end"] for r in b) - min(r["start"] for r in b)
                                                     for b in batches.values()))
        assert f"stopped at look {d['look']} of 4: {d['pages_used']} of 80 pages (every verdict decisive)" in \
            (out / "report.md").read_text()
        assert f"stopped at look {d['look']} of 4: {d['pages_used']} of 80 pages" in (out / "report.html").read_text()
    assert sorted(r["page_id"] for r in _records(out, "bf16", 1)) == sorted(order)
    v = {(r["variant"], r["metric"]): r for r in s["verdicts"]}
    assert {v[("same", m)]["reason"] for m in ("ned", "bow_f1")} == {"identical_outputs"}
    assert seq["same"]["look"] == 1  # identical outputs are decided at the first look
    assert {v[("bad", m)]["verdict"] for m in ("ned", "bow_f1")} == {"regression"}
    # a metric decided earlier stays frozen at its look while the pass goes on for the other
    mid = seq["mid"]["metrics"]
    assert seq["mid"]["look"] > 1 and {x["decided_at_look"] for x in mid.values()} <= set(range(1, seq["mid"]["look"] + 1))
    for m, x in mid.items():
        assert v[("mid", m)]["n"] == seq["mid"]["looks"][x["decided_at_look"] - 1]
        assert f"look {x['decided_at_look']} of 4" in v[("mid", m)]["message"]
    assert rep["verdicts"] == s["verdicts"]


def test_sequential_gives_the_fixed_designs_verdicts_on_fewer_pages(studies):
    """The same study without the sequential block serves every page to every variant; on these
    candidates the verdicts are the same words, from fewer pages served."""
    out, fixed, _, _ = studies
    a = {(r["variant"], r["metric"]): r["verdict"] for r in _summary(out)["verdicts"]}
    b = {(r["variant"], r["metric"]): r["verdict"] for r in _summary(fixed)["verdicts"]}
    assert a == b
    assert all(v["sequential"] is None for v in _summary(fixed)["variants"])
    served = {n: len(_records(out, n, 1)) for n in CANDIDATES}
    assert all(len(_records(fixed, n, 1)) == 80 for n in CANDIDATES)
    assert sum(served.values()) < 80 * len(CANDIDATES)


def test_gate_recomputes_the_sequential_verdicts(studies, tmp_path):
    """The gate replays the looks from the score files: its lines are the report's verdicts, its exit code
    follows them; a stopping point edited in summary.json, or a verdict edited to match, is exit 3."""
    import shutil

    from quantgate.gate.check import INVALID, PASS, gate

    out, _, _, _ = studies
    code, lines = gate(out)
    s = _summary(out)
    assert code == _gate_code(s["verdicts"])
    for r in s["verdicts"]:
        assert any(x.replace(" (not after Holm)", "").split()[:3] == [r["verdict"], r["variant"], r["metric"]]
                   for x in lines), (r, lines)
    assert gate(out, variants=["same"])[0] == PASS
    copy = tmp_path / "copy"
    shutil.copytree(out, copy)
    edited = _summary(copy)
    mid = next(v for v in edited["variants"] if v["name"] == "mid")
    mid["sequential"]["look"] += 1
    (copy / "summary.json").write_text(json.dumps(edited))
    code, lines = gate(copy)
    assert code == INVALID and "variants.mid.sequential.look" in lines[0]
    # a candidate's accuracy pass cut short: the score file and its hash edited together
    shutil.rmtree(copy)
    shutil.copytree(out, copy)
    from quantgate.io.fileio import sha256_file

    f = copy / "scores" / "mid-c1.jsonl"
    order = _order(copy)
    keep = set(order[:20])
    f.write_text("".join(x + "\n" for x in f.read_text().splitlines() if json.loads(x)["page_id"] in keep))
    edited = _summary(copy)
    edited["inputs"]["files"]["scores/mid-c1.jsonl"] = sha256_file(f)
    (copy / "summary.json").write_text(json.dumps(edited))
    code, lines = gate(copy)
    assert code == INVALID and "sequential pass of mid is unfinished" in lines[0]


def test_time_budget_adds_up(studies):
    """The time budget's foreground parts sum to its wall time, none negative (nothing counted twice);
    the wall time lies within the time measured around the study; each page stage's generation time is at
    most its wall time and counts the requests that stage recorded; overhead is the wall time less server
    starts, generation and lm-eval."""
    out, _, _, outer = studies
    b = _summary(out)["time_budget"]
    rows = b["rows"]
    assert abs(sum(r["wall_s"] for r in rows) - b["wall_s"]) < 0.002 * len(rows)
    assert all(r["wall_s"] >= 0 for r in rows)
    assert 0 < b["wall_s"] <= outer
    parts = [(r["part"], r["variant"]) for r in rows]
    for name in ["bf16", *CANDIDATES]:
        assert ("quantize", name) in parts and ("accuracy", name) in parts and ("speed", name) in parts
    assert sum(p == "server_start" for p, _ in parts) == 1 + len(CANDIDATES)
    assert {"score", "report", "other"} <= {p for p, _ in parts}
    seq = {v["name"]: v["sequential"] for v in _summary(out)["variants"]}
    for r in rows:
        if r["part"] in ("accuracy", "speed"):
            assert 0 < r["generation_s"] <= r["wall_s"] + 1e-3
            want = 80 if r["part"] == "speed" or r["variant"] == "bf16" else seq[r["variant"]]["pages_used"]
            assert r["requests"] == want, r
    gen = sum(r["generation_s"] for r in rows if r["generation_s"] is not None)
    start = sum(r["wall_s"] for r in rows if r["part"] == "server_start")
    assert abs(b["generation_s"] - gen) < 0.01 and abs(b["engine_start_s"] - start) < 0.01
    assert abs(b["overhead_s"] - (b["wall_s"] - start - gen - b["lmeval_s"])) < 0.01
    assert b["overhead_share"] == pytest.approx(b["overhead_s"] / b["wall_s"], abs=1e-3)
    md = (out / "report.md").read_text()
    assert "## Time budget" in md and f"= **{b['overhead_share']:.1%}**" in md


def test_resume_after_a_kill_mid_pass(pages, studies, tmp_path):
    """A study killed (SIGKILL) while a candidate's accuracy pass is between its first and last look
    resumes at the look its records reach: no recorded page is sent again, and the pass stops where the
    uninterrupted study stopped, with the same decision."""
    ref = next(v for v in _summary(studies[0])["variants"] if v["name"] == "mid")["sequential"]
    assert ref["look"] >= 2  # the premise: this candidate's pass goes past its first look
    y = study_yaml(tmp_path / "s.yaml", pages, {"mid": CANDIDATES["mid"]}, sequential=SEQ, delay=0.05, **SMALL)
    out = tmp_path / "out"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    p = subprocess.Popen([sys.executable, "-m", "tests.support.stub_study", str(y), str(out)], env=env,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    req = out / "runs" / "mid" / "requests.jsonl"
    n = 0
    try:
        deadline = time.time() + 300
        while time.time() < deadline and p.poll() is None:
            if req.is_file():
                n = sum('"concurrency": 1' in x or '"concurrency":1' in x for x in req.read_text().splitlines())
                if n > ref["looks"][0]:
                    break
            time.sleep(0.02)
    finally:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
    assert ref["looks"][0] < n < ref["pages_used"], n  # killed inside the pass, after its first look
    killed = _records(out, "mid", 1)
    lines = []
    run(y, out, log=lines.append)
    after = _records(out, "mid", 1)
    ids = [r["page_id"] for r in after]
    assert len(ids) == len(set(ids)) == ref["pages_used"]  # nothing re-sent, nothing missing
    assert after[: len(killed)] == killed  # the records written before the kill were kept as they were
    d = next(v for v in _summary(out)["variants"] if v["name"] == "mid")["sequential"]
    assert d == ref
    sessions = {json.loads(x)["session"] for x in (out / "timings.jsonl").read_text().splitlines()}
    assert len(sessions) == 2
    assert any(f"mid: stopped at look {ref['look']} of 4" in x for x in lines)
    # a third run finds every pass finished: no request sent, no server started
    before = {v: (out / "runs" / v / "requests.jsonl").read_bytes() for v in ("bf16", "mid")}
    run(y, out)
    assert before == {v: (out / "runs" / v / "requests.jsonl").read_bytes() for v in ("bf16", "mid")}
    timings = [json.loads(x) for x in (out / "timings.jsonl").read_text().splitlines()]
    last = [t["stage"] for t in timings if t["session"] == timings[-1]["session"]]
    assert "server_start" not in last and "pages_run" not in last and last[-1] == "report"


@pytest.mark.parametrize("block, fields, msg", [
    ({"looks": 4, "step": 20}, {}, "looks.*step.*not both"),
    ({"looks": 0}, {}, "sequential.looks"),
    ({"spending": "haybittle"}, {}, "sequential.spending"),
    ({"look": 4}, {}, "sequential.look"),
    ({}, {"test": "exact"}, "exact test.*no looks"),
])
def test_bad_sequential_blocks_name_the_field(pages, tmp_path, block, fields, msg):
    from quantgate.study import load_study

    y = study_yaml(tmp_path / "s.yaml", pages, {"fp8": 0.0}, sequential=block, **fields)
    with pytest.raises(InputError, match=msg):
        load_study(y)


def test_a_page_budget_beyond_the_pages_is_refused_before_serving(pages, tmp_path):
    y = study_yaml(tmp_path / "s.yaml", pages, {"fp8": 0.0}, sequential={"page_budget": 500})
    with pytest.raises(InputError, match=r"sequential.page_budget 500: the study judges only 80 pages"):
        run(y, tmp_path / "out")
    assert not (tmp_path / "out" / "runs").exists() and not (tmp_path / "out" / "variants").exists()


def test_default_block_is_four_looks(pages, tmp_path):
    from quantgate.study import load_study

    st = load_study(study_yaml(tmp_path / "s.yaml", pages, {"fp8": 0.0}, sequential={}))
    assert (st.sequential.looks, st.sequential.step, st.sequential.spending) == (4, None, "obrien_fleming")
    body = yaml.safe_load((tmp_path / "s.yaml").read_text())
    del body["sequential"]
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(body))
    assert load_study(tmp_path / "s.yaml").sequential is None


def test_equivalence_sequential_study_and_its_gate(pages, tmp_path):
    """test: equivalence runs sequentially too: the decision records the test, identical outputs pass at the
    first look, a clear loss is decisive before the budget, and the gate remakes the same verdicts."""
    from quantgate.gate.check import gate

    y = study_yaml(tmp_path / "s.yaml", pages, {"same": 0.0, "bad": 0.6}, sequential=SEQ, test="equivalence", **SMALL)
    rep = run(y, tmp_path / "out")
    seq = {v["name"]: v["sequential"] for v in rep["variants"] if v["sequential"]}
    assert {d["test"] for d in seq.values()} == {"equivalence"} and seq["same"]["look"] == 1
    assert seq["bad"]["stop_reason"] == "all_decisive" and seq["bad"]["pages_used"] < 80
    assert {r["test"] for r in rep["verdicts"]} == {"equivalence"}
    assert {r["verdict"] for r in rep["verdicts"] if r["variant"] == "bad"} <= {"regression", "not_equivalent"}
    assert gate(tmp_path / "out")[0] == _gate_code(rep["verdicts"])


def _write_records(run_dir: Path, recs: list[dict]) -> None:
    from quantgate.io.fileio import append_jsonl
    from quantgate.schema.run import RequestRecord

    run_dir.mkdir(parents=True, exist_ok=True)
    for r in recs:
        # schema 2: records from before the chain, which a resumed run reads and chains on after
        append_jsonl(run_dir / "requests.jsonl", RequestRecord(concurrency=1, schema_version=2, **r).model_dump())


def test_the_baseline_pass_sends_a_failing_page_once_per_run(tmp_path):
    """A page that fails every time (an unreadable image, a prompt past max_model_len) ended the fixed design's
    level after one attempt but kept the sequential baseline's pass re-sending it without end. Now: once per run;
    a new run (a resume) sends it again."""
    from quantgate.study.passes import FixedPass

    run_dir = tmp_path / "runs" / "bf16"
    _write_records(run_dir, [{"page_id": "a", "output": "x", "start": 1, "end": 2}])
    fixed = FixedPass(["a", "b"], run_dir, 1)
    assert fixed.next() == ["a", "b"]
    _write_records(run_dir, [{"page_id": "b", "error": "HTTP 400", "start": 3, "end": 4}])
    assert fixed.next() is None
    assert FixedPass(["a", "b"], run_dir, 1).next() == ["a", "b"]  # the next run tries it again
    _write_records(run_dir, [{"page_id": "b", "output": "y", "start": 5, "end": 6}])
    assert FixedPass(["a", "b"], run_dir, 1).next() is None


def test_server_starts_that_overlap_each_other_count_once(tmp_path):
    """servers: all_at_once: three starts over the same 100 s, then 10 s of pages. Each background start was
    measured only against foreground stages, so the three counted 300 s of a 110 s run (overhead -173%)."""
    from quantgate.io.console import Console
    from quantgate.io.fileio import append_jsonl
    from quantgate.schema.timings import StageTiming
    from quantgate.study.timings import Clock, time_budget

    clock = Clock(tmp_path, Console(), start=1000.0)
    for v in ("a", "b", "c"):
        append_jsonl(clock.path, StageTiming(session=clock.session, stage="server_start", variant=v, background=True,
                                             start=1000.0, wall_s=100.0).model_dump())
    append_jsonl(clock.path, StageTiming(session=clock.session, stage="pages_run", variant="a", concurrency=1,
                                         start=1100.0, wall_s=10.0).model_dump())

    class _St:
        compare_level = 1
        speed = None

    b = time_budget(_St(), tmp_path, clock, now=1110.0)
    assert b.wall_s == 110.0 and b.engine_start_s == 100.0 and b.overhead_s >= 0
    assert sum(r.wall_s for r in b.rows) == pytest.approx(b.wall_s) and all(r.wall_s >= 0 for r in b.rows)
    assert b.background_s == 200.0


def test_a_stages_requests_are_found_on_the_requests_own_clock(tmp_path):
    """The stage's length is monotonic time, its requests are stamped by the wall clock: a wall clock stepped
    forward 0.5 s during a stage put its last request past ``start + wall_s``, and the budget counted 8 of 9.
    The stage's own wall-clock end (schema 2) decides; a schema-1 line still ends at ``start + wall_s``."""
    from quantgate.io.console import Console
    from quantgate.io.fileio import append_jsonl
    from quantgate.schema.timings import StageTiming
    from quantgate.study.timings import Clock, time_budget

    clock = Clock(tmp_path, Console(), start=1000.0)
    append_jsonl(clock.path, StageTiming(session=clock.session, stage="pages_run", variant="a", concurrency=1,
                                         start=1000.0, wall_s=10.0, end=1010.5).model_dump())
    append_jsonl(clock.path, StageTiming(session=clock.session, stage="pages_run", variant="b", concurrency=1,
                                         start=1011.0, wall_s=10.0).model_dump(exclude={"end"}) | {"schema_version": 1})
    for v, t0 in (("a", 1000.0), ("b", 1011.0)):
        (tmp_path / "runs" / v).mkdir(parents=True)
        for i in range(3):
            append_jsonl(tmp_path / "runs" / v / "requests.jsonl",
                         {"page_id": f"p{i}", "concurrency": 1, "output": "x", "start": t0 + 3.4 * i,
                          "end": t0 + 3.4 * i + 3.6})

    class _St:
        compare_level = 1
        speed = None

    rows = {r.variant: r for r in time_budget(_St(), tmp_path, clock, now=1025.0).rows if r.part == "accuracy"}
    assert rows["a"].requests == 3  # the last ends at 1010.4: after start + wall_s, before the stamped end
    assert rows["b"].requests == 2  # schema 1: its last (1021.4) ends after start + wall_s = 1021.0
