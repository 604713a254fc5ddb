"""Loading and checking a page set folder (``pages.jsonl`` + images + truth)."""

from __future__ import annotations

import hashlib
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from quantgate.errors import InputError, UnsafeInputError
from quantgate.io.fileio import read_jsonl, safe_join, sha256_file
from quantgate.schema.run import PageRecord, PageSetManifest, parse_record

PAGES_FILE = "pages.jsonl"
MANIFEST_FILE = "pageset.json"
# Perceptual-hash distance (of 64 bits) at or under which two pages count as the same page
# rendered twice (rescaled, recompressed): found by trying rescaled/JPEG copies of synthetic pages.
NEAR_DUPLICATE_BITS = 6


def split_of(page_id: str, seed: int, calibration_fraction: float) -> str:
    """Deterministic split from a hash of (seed, id): stable across runs, machines and
    Python versions (sha256, not ``hash()``), and independent of the order pages arrive in."""
    digest = hashlib.sha256(f"{seed}:{page_id}".encode()).digest()
    u = int.from_bytes(digest[:8], "big") / 2**64
    return "calibration" if u < calibration_fraction else "heldout"


@dataclass
class PageSet:
    root: Path
    pages: list[PageRecord]
    manifest: PageSetManifest | None

    @property
    def sha256(self) -> str:
        return sha256_file(self.root / PAGES_FILE)

    def split(self, name: str | None) -> list[PageRecord]:
        if name in (None, "all"):
            return list(self.pages)
        if name not in ("calibration", "heldout"):
            raise InputError(f"unknown split {name!r}: use calibration, heldout or all")
        return [p for p in self.pages if p.split == name]

    def by_id(self) -> dict[str, PageRecord]:
        return {p.id: p for p in self.pages}

    def image_path(self, page: PageRecord) -> Path:
        return safe_join(self.root, page.image, what=f"{self.root / PAGES_FILE}: page {page.id} field 'image'")

    def image_bytes(self, page: PageRecord) -> bytes:
        return self.image_path(page).read_bytes()

    def truth_text(self, page: PageRecord) -> str | None:
        if page.truth is None:
            return None
        path = safe_join(self.root, page.truth, what=f"{self.root / PAGES_FILE}: page {page.id} field 'truth'")
        try:
            return path.read_bytes().decode("utf-8")
        except UnicodeDecodeError as e:
            raise InputError(f"{path}: truth is not UTF-8 (byte {e.start}); re-save it as UTF-8") from None


def load_pageset(root: str | Path) -> PageSet:
    root = Path(root)
    pages_file = root / PAGES_FILE
    if not pages_file.is_file():
        raise InputError(f"{root}: not a page set (no {PAGES_FILE}); make one with `quantgate pages import` "
                         "or `quantgate pages synth`")
    # Like the images it lists, the manifest itself must not be a link to a file elsewhere.
    for name in (PAGES_FILE, MANIFEST_FILE):
        target = (root / name).resolve()
        if (root / name).exists() and root.resolve() not in target.parents:
            raise UnsafeInputError(f"{root / name}: is a link to {target}, outside the page set; copy the file "
                                   f"into {root} instead of linking it")
    pages: list[PageRecord] = []
    seen: dict[str, int] = {}
    for no, obj in read_jsonl(pages_file):
        page = parse_record(PageRecord, obj, where=f"{pages_file}:{no}")
        if page.id in seen:
            raise InputError(f"{pages_file}:{no}: duplicate page id {page.id!r} (first on line {seen[page.id]})")
        seen[page.id] = no
        # Paths are checked on load so no stage can be steered outside the folder later.
        safe_join(root, page.image, what=f"{pages_file}:{no} field 'image'")
        if page.truth is not None:
            safe_join(root, page.truth, what=f"{pages_file}:{no} field 'truth'")
        pages.append(page)
    manifest = None
    if (root / MANIFEST_FILE).is_file():
        import json

        try:
            obj = json.loads((root / MANIFEST_FILE).read_text("utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise InputError(f"{root / MANIFEST_FILE}: not valid JSON ({e})") from None
        manifest = parse_record(PageSetManifest, obj, where=str(root / MANIFEST_FILE))
    return PageSet(root=root, pages=pages, manifest=manifest)


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
    cal = [p for p in ps.pages if p.split == "calibration"]
    held = [p for p in ps.pages if p.split == "heldout"]
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


def pageset_stats(ps: PageSet) -> dict:
    import statistics

    splits = Counter(p.split for p in ps.pages)
    tags = Counter(t for p in ps.pages for t in p.tags)
    truth_len = [len(ps.truth_text(p) or "") for p in ps.pages if p.truth]
    return {
        "pages": len(ps.pages),
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
    }

