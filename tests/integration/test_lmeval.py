"""lm-eval tasks with more than one filter (gsm8k's strict-match + flexible-extract). lm-eval
logs one sample per (document, filter); quantgate keeps one row per document with one value per
metric,filter, counts documents, and refuses to pair documents whose content differs. A real lm-eval
run on an offline two-filter task (tests/data) through the stub server."""

import json
import sys
from pathlib import Path

import pytest

from quantgate.errors import InputError
from quantgate.serve.backends import make_backend
from quantgate.serve.server import ManagedServer
from tests.support.paths import DATA

TASK_DIR = DATA / "lmeval-two-filters"
TASK = "quantgate_two_filters"
STRICT, FLEX = "exact_match,strict-match", "exact_match,flexible-extract"


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    """The task run twice (baseline, candidate) against the stub, which answers "# Title\\n\\nhello world"."""
    from quantgate.lmeval import run_lmeval

    root = tmp_path_factory.mktemp("lmeval")
    mp = pytest.MonkeyPatch()
    mp.chdir(TASK_DIR)  # the task's data_files are relative to the working directory
    try:
        with ManagedServer("stub", lambda port: [sys.executable, "-m", "tests.support.stub", "--port", str(port)],
                           root / "stub.log", startup_timeout_s=60) as srv:
            runs = {}
            for name in ("base", "cand"):
                backend = make_backend("openai", endpoint=srv.base_url, model="stub")
                runs[name] = run_lmeval(Path("stub"), backend, root / name, tasks=[TASK], include_path=TASK_DIR,
                                        log=lambda s: None)
    finally:
        mp.undo()
    return root, runs


def test_one_row_per_document_with_a_value_per_filter(two_runs):
    root, runs = two_runs
    res = runs["base"].results[TASK]
    # the stub's answer: strict-match takes "Title" (docs 0, 2 right), flexible-extract "world" (doc 1 right)
    assert set(res) == {STRICT, FLEX}
    assert (res[STRICT].value, res[FLEX].value) == (0.5, 0.25)
    assert res[STRICT].n == res[FLEX].n == 4  # documents, not documents × filters
    rows = [json.loads(x) for x in (root / "base" / f"samples-{TASK}.jsonl").read_text().splitlines()]
    assert len(rows) == 4 and len({r["doc_id"] for r in rows}) == 4
    assert [r["metrics"] for r in rows] == [{STRICT: 1.0, FLEX: 0.0}, {STRICT: 0.0, FLEX: 1.0},
                                           {STRICT: 1.0, FLEX: 0.0}, {STRICT: 0.0, FLEX: 0.0}]
    assert rows[0]["responses"] == {"strict-match": "Title", "flexible-extract": "world"}
    assert all(isinstance(r["doc_hash"], str) and len(r["doc_hash"]) == 64 for r in rows)


def test_both_filters_compare_paired_by_document(two_runs):
    from quantgate.lmeval import compare_lmeval

    root, _ = two_runs
    rows = {r.metric: r.model_dump() for r in compare_lmeval(root / "base", root / "cand", default_margin=0.05,
                                                             n_resamples=1000)}
    assert set(rows) == {STRICT, FLEX}
    for r in rows.values():
        # paired by document (n counts documents, not document × filter); 4 documents are below the
        # verdict's minimum page count, so the verdict stays open however equal the scores are
        assert r["n"] == 4 and r["missing_pages"] == [] and r["delta"] == 0.0 and r["verdict"] == "inconclusive"


def test_documents_that_differ_under_one_id_are_not_paired(two_runs, tmp_path):
    import shutil

    from quantgate.lmeval import compare_lmeval

    root, _ = two_runs
    cand = shutil.copytree(root / "cand", tmp_path / "cand")
    f = cand / f"samples-{TASK}.jsonl"
    rows = [json.loads(x) for x in f.read_text().splitlines()]
    rows[2]["doc_hash"] = "0" * 64  # the candidate saw other data under doc id 2
    f.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(InputError, match=r"quantgate_two_filters: 1 document\(s\) differ .* first '2'"):
        compare_lmeval(root / "base", cand)


def test_two_documents_sharing_an_id_are_refused():
    from quantgate.lmeval.run import doc_rows

    s = {"doc_id": 0, "doc": {"doc_id": "a"}, "filter": "none", "filtered_resps": ["x"], "exact_match": 1.0}
    with pytest.raises(InputError, match="two different documents share the id 'a'"):
        doc_rows([{**s, "doc_hash": "1"}, {**s, "doc_hash": "2"}], ["exact_match,none"], "t")
