"""check_documents: the documents of paired score rows, and the files' disagreements about them refused."""

import pytest

from quantgate.errors import InputError
from quantgate.judge.documents import check_documents
from quantgate.schema.scores import ScoreRow


def _rows(docs: dict[str, str | None], ned: float = 0.1) -> dict[str, ScoreRow]:
    return {pid: ScoreRow(page_id=pid, document=doc, ned=ned) for pid, doc in docs.items()}


DOCS = {"a1": "A", "a2": "A", "b1": "B"}


def test_documents_of_agreeing_files():
    assert check_documents(_rows(DOCS), _rows(DOCS, 0.2), ("b.jsonl", "c.jsonl")) == DOCS
    # a page only one file has keeps its document (pairing decides what to do with it, not this)
    assert check_documents(_rows(DOCS), _rows(DOCS | {"c1": "C"}), ("b", "c"))["c1"] == "C"
    # files scored before documents: each page its own document
    old = {"p1": None, "p2": None}
    assert check_documents(_rows(old), _rows(old), ("b", "c")) == {"p1": "p1", "p2": "p2"}


def test_a_page_in_two_documents_names_the_file_and_page():
    with pytest.raises(InputError, match=r"^c\.jsonl: page 'a2' is in document 'B', but in 'A' in b\.jsonl"):
        check_documents(_rows(DOCS), _rows(DOCS | {"a2": "B"}), ("b.jsonl", "c.jsonl"))
    with pytest.raises(InputError, match=r"^noise\.jsonl: page 'b1' is in document 'X'"):
        check_documents(_rows(DOCS), _rows(DOCS), ("b", "c"), noise_rows=_rows(DOCS | {"b1": "X"}),
                        noise_name="noise.jsonl")


def test_a_document_on_some_rows_only():
    with pytest.raises(InputError, match=r"^c\.jsonl: 1 of 3 rows have no 'document' \(b1\)"):
        check_documents(_rows(DOCS), _rows(DOCS | {"b1": None}), ("b.jsonl", "c.jsonl"))
    with pytest.raises(InputError, match=r"^b\.jsonl: no 'document' in its rows, while c\.jsonl has them"):
        check_documents(_rows(dict.fromkeys(DOCS)), _rows(DOCS), ("b.jsonl", "c.jsonl"))
