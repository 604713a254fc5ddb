"""``quantgate pages check`` and ``pages stats``: a page set's files against its records (hashes, encodings)
and leakage between its splits; a summary of what it holds."""

from __future__ import annotations

from collections import Counter

from quantgate.io.fileio import safe_join, sha256_file
from quantgate.io.pageset import PageSet
from quantgate.schema.pages import PageRecord, PageSetStats

# Perceptual-hash distance (of 64 bits) at or under which two pages count as the same page
# rendered twice (rescaled, recompressed): found by trying rescaled/JPEG copies of synthetic pages.
NEAR_DUPLICATE_BITS = 6


def _hamming_hex(a: str, b: str) -> int:
    return (int(a, 16) ^ int(b, 16)).bit_count()


def check_pageset(ps: PageSet, near_bits: int = NEAR_DUPLICATE_BITS) -> list[str]:
    """Return a list of problems (empty = clean). Leakage between splits is a problem, not a warning:
    a calibration page that is also held out inflates the quantized variant's score."""
    problems: list[str] = []
    for p in ps.pages:
        img = ps.image_path(p)
        if not img.is_file():
            problems.append(f"page {p.id}: image {p.image} is missing")
            continue
        if sha256_file(img) != p.sha256:
            problems.append(f"page {p.id}: image {p.image} changed since import (sha256 differs)")
        if p.truth is not None:
            t = safe_join(ps.root, p.truth, what=f"page {p.id} truth")
            if not t.is_file():
                problems.append(f"page {p.id}: truth {p.truth} is missing")
            else:
                try:
                    t.read_bytes().decode("utf-8")
                except UnicodeDecodeError:
                    problems.append(f"page {p.id}: truth {p.truth} is not UTF-8")
                if p.truth_sha256 and sha256_file(t) != p.truth_sha256:
                    problems.append(f"page {p.id}: truth {p.truth} changed since import (sha256 differs)")
            record = ps.truth_record_path(p)
            if p.truth_record_sha256 is not None:
                if not record.is_file():
                    problems.append(f"page {p.id}: OmniDocBench truth record {record.name} is missing")
                elif sha256_file(record) != p.truth_record_sha256:
                    problems.append(f"page {p.id}: OmniDocBench truth record {record.name} changed since import "
                                    "(sha256 differs)")
            elif record.is_file():
                problems.append(f"page {p.id}: OmniDocBench truth record {record.name} is not in pages.jsonl "
                                "(import the set again)")
    cal = [p for p in ps.pages if p.split == "calibration"]
    held = [p for p in ps.pages if p.split == "heldout"]
    problems += straddling_documents(ps.pages)
    by_sha: dict[str, PageRecord] = {p.sha256: p for p in cal}
    for h in held:
        if h.sha256 in by_sha:
            problems.append(f"leakage: heldout page {h.id} is identical to calibration page {by_sha[h.sha256].id}")
    for h in held:
        if h.phash is None:
            continue
        for c in cal:
            if c.phash is None or c.sha256 == h.sha256:
                continue
            d = _hamming_hex(h.phash, c.phash)
            if d <= near_bits:
                problems.append(f"leakage: heldout page {h.id} is near-identical to calibration page {c.id} "
                                f"(perceptual hash distance {d} <= {near_bits})")
    return problems


def straddling_documents(pages: list[PageRecord]) -> list[str]:
    """A problem per document with pages in both splits: its calibration pages teach quantization the very
    document its held-out pages then judge (splits made per document never do this; edited ones may)."""
    splits: dict[str, dict[str, list[str]]] = {}
    for p in pages:
        splits.setdefault(p.document, {}).setdefault(p.split, []).append(p.id)
    return [f"leakage: document {doc!r} has pages in both splits (calibration {s['calibration'][:3]}, heldout "
            f"{s['heldout'][:3]}); a document's pages must share one split" for doc, s in splits.items() if len(s) > 1]


def pageset_stats(ps: PageSet) -> PageSetStats:
    import statistics

    splits = Counter(p.split for p in ps.pages)
    tags = Counter(t for p in ps.pages for t in p.tags)
    truth_len = [len(ps.truth_text(p) or "") for p in ps.pages if p.truth]
    return PageSetStats.model_validate({
        "pages": len(ps.pages),
    "documents": len({p.document for p in ps.pages}),
        "splits": dict(splits),
        "tags": dict(tags),
        "with_truth": sum(1 for p in ps.pages if p.truth),
        "with_checks": sum(1 for p in ps.pages if p.checks),
        "checks": sum(len(p.checks) for p in ps.pages),
        "with_neither": sum(1 for p in ps.pages if not p.truth and not p.checks),
        "truth_chars_median": statistics.median(truth_len) if truth_len else None,
        "megapixels_median": round(statistics.median(p.width * p.height / 1e6 for p in ps.pages), 2) if ps.pages else None,
        "width_range": [min(p.width for p in ps.pages), max(p.width for p in ps.pages)] if ps.pages else None,
        "height_range": [min(p.height for p in ps.pages), max(p.height for p in ps.pages)] if ps.pages else None,
    })
