"""A run's ``requests.jsonl`` as a hash chain: each record carries ``prev``, the digest of the record
before it, and the first one the digest of the run it belongs to (its ``anchor``: the variant's weights, the
backend, the pages, the prompt). A tail torn by a SIGKILL is cut before the chain is read, so it still verifies;
a record edited, swapped, removed from the middle, or a file copied from another run's folder breaks it.

The chain is not a signature: a file rewritten consistently by someone who knows the anchor verifies. The gate
binds the whole file by its sha256 in summary.json, and a signed verdict (docs/security.md) binds that."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable

from quantgate.errors import InputError

CHAINED_FROM = 3  # RequestRecord's first schema_version with ``prev``


def record_digest(obj: dict) -> str:
    """The sha256 of a record's canonical JSON (sorted keys), so a re-formatted but equal line keeps its digest."""
    text = json.dumps(obj, ensure_ascii=False, allow_nan=False, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def run_anchor(identity: dict) -> str:
    """The digest a run's first record points back to, from what identifies the run (``serve.run.run_identity``)."""
    return record_digest({"quantgate.run": identity})


class Chain:
    """The head of a chain being appended to: ``link`` sets a record's ``prev``; ``advance`` moves the head to
    it once it is written (a record that could not be written is no link)."""

    def __init__(self, head: str):
        self.head = head

    def link(self, obj: dict) -> dict:
        return {**obj, "prev": self.head}

    def advance(self, linked: dict) -> None:
        self.head = record_digest(linked)


def verify_chain(path, lines: Iterable[tuple[int, dict]], anchor: str | None) -> str | None:
    """Check every chained record's ``prev`` against the record before it (the first against ``anchor``; None:
    not checked) and return the digest of the last record (``anchor`` when there is none). Records written before the
    chain (schema_version < 3) are read as they are, but only before the first chained one: an unchained record
    after it is a break. Raises one InputError naming the file and line."""
    head, chained = anchor, False
    for no, obj in lines:
        version = obj.get("schema_version")
        if isinstance(version, int) and version >= CHAINED_FROM:
            prev = obj.get("prev")
            if (head is not None or chained) and prev != head:
                what = "the run this folder holds" if not chained and head == anchor else "the record before it"
                raise InputError(f"{path}:{no}: the record chain is broken (its 'prev' does not match {what}): "
                                 "a record was edited, removed or copied from another run; delete "
                                 f"{path} (its pages are served again) or restore it")
            chained = True
        elif chained:
            raise InputError(f"{path}:{no}: an unchained record (schema_version {version!r}) after chained ones: "
                             f"the file was edited; delete {path} (its pages are served again) or restore it")
        head = record_digest(obj)
    return head
