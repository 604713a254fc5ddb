"""A sequential study's plan serves documents whole in a seeded order, cuts the page budget at a
document boundary, and looks no earlier than the rare-failure page count (nor min_documents)."""

import json

from quantgate.judge.clustered import document_order, rare_failure_count
from quantgate.schema.base import parse_record
from quantgate.study.plan import make_plan, rare_failure_first_look, study_plan
from quantgate.study.spec import Study


def _study(**seq) -> Study:
    return parse_record(Study, {"name": "s", "model": "m", "pages": {"path": "p"}, "metrics": ["ned", "bow_f1"],
                                "variants": [{"name": "bf16", "recipe": "bf16"}, {"name": "fp8", "recipe": "fp8"}],
                                "sequential": seq, "worst_page_damage": {"ned": 0.1}}, where="test")


def test_documents_whole_in_seeded_order_and_looks_after_the_rare_failure_count(tmp_path):
    ids = [f"p{i:03d}" for i in range(400)]
    docs = {p: f"doc{i // 8}" for i, p in enumerate(ids)}  # 50 documents of 8 pages
    st = _study(looks=4, page_budget=300)
    plan = make_plan(st, ids, docs)
    # ned at D 0.1: 29 pages; bow_f1 at its range (1) and margin 0.01: 299 — the strictest wins
    assert rare_failure_first_look(st) == max(rare_failure_count(0.01, 0.1), rare_failure_count(0.01, 1.0)) == 299
    served = [docs[p] for p in plan.order]
    runs = [d for i, d in enumerate(served) if i == 0 or served[i - 1] != d]
    assert len(runs) == len(set(runs))  # each document's pages together
    assert runs == document_order(docs.values(), 0)[: len(runs)]  # in the seeded order
    assert plan.n_max == len(plan.order) == 296  # 37 whole documents, not 300 pages
    assert plan.looks[0] >= 299 or plan.looks == [plan.n_max]
    assert all(n % 8 == 0 for n in plan.looks)  # at document boundaries
    assert plan.documents == served
    # the same plan from a pages.jsonl with a document per page (branch a27's page records)
    f = tmp_path / "pages.jsonl"
    f.write_text("".join(json.dumps({"id": p, "split": "heldout", "document": docs[p]}) + "\n" for p in ids))
    assert study_plan(st, f) == plan


def test_single_page_documents_first_look_at_the_count():
    ids = [f"p{i:03d}" for i in range(600)]
    st = _study(looks=4)
    plan = make_plan(st, ids)
    assert plan.looks[0] >= 299 and plan.looks[-1] == 600 and plan.documents == plan.order
