"""Which document each paired page belongs to, from the score rows' ``document``: the unit a
document-level verdict resamples. Checked where rows are paired, because the two files must agree — a page
is in one document whichever variant's output was scored."""

from __future__ import annotations

from quantgate.errors import InputError
from quantgate.schema.scores import ScoreRow

Rows = dict[str, ScoreRow]


def _listing(ids: list[str]) -> str:
    return ", ".join(ids[:5]) + (f" and {len(ids) - 5} more" if len(ids) > 5 else "")


def check_documents(baseline_rows: Rows, candidate_rows: Rows, names: tuple[str, str] = ("baseline", "candidate"),
                    *, noise_rows: Rows | None = None, noise_name: str = "noise run") -> dict[str, str]:
    """page id → its document, for every page of the files. A file whose rows carry no ``document`` (scored
    before quantgate recorded documents) has each page its own document; the files must then all lack it.
    InputError, naming the file and page, for a file with ``document`` on some rows only, for files of which
    one has documents and another none, and for a page whose document differs between the files."""
    files = [(names[0], baseline_rows), (names[1], candidate_rows)]
    if noise_rows is not None:
        files.append((noise_name, noise_rows))
    having: dict[str, bool] = {}
    for name, rows in files:
        without = sorted(pid for pid, r in rows.items() if r.document is None)
        if without and len(without) < len(rows):
            raise InputError(f"{name}: {len(without)} of {len(rows)} rows have no 'document' ({_listing(without)}) "
                             "while the others do; re-score the file with `quantgate score` so every row has one")
        having[name] = not without
    if len(set(having.values())) > 1:
        yes = [n for n, h in having.items() if h]
        no = [n for n, h in having.items() if not h]
        raise InputError(f"{', '.join(no)}: no 'document' in its rows, while {', '.join(yes)} has them; the pages' "
                         f"documents cannot be paired — re-score {', '.join(no)} with `quantgate score` (its pages' "
                         "documents come from the page set)")
    documents: dict[str, str] = {}
    first: dict[str, str] = {}
    for name, rows in files:
        for pid, r in rows.items():
            doc = r.document if r.document is not None else pid
            if pid in documents and documents[pid] != doc:
                raise InputError(f"{name}: page {pid!r} is in document {doc!r}, but in {documents[pid]!r} in "
                                 f"{first[pid]}; score both files against the same page set")
            documents.setdefault(pid, doc)
            first.setdefault(pid, name)
    return documents


__all__ = ["check_documents"]
