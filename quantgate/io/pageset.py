"""A page set folder (``pages.jsonl`` + ``pageset.json`` + images + truth), read: every stage that sends,
calibrates on or scores pages loads it here, each line checked and every path kept inside the folder."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from quantgate.errors import InputError, UnsafeInputError
from quantgate.io.fileio import read_jsonl, safe_join, sha256_file
from quantgate.schema.base import parse_record
from quantgate.schema.pages import PageRecord, PageSetManifest

PAGES_FILE = "pages.jsonl"
MANIFEST_FILE = "pageset.json"
# A page's OmniDocBench truth record (``schema.omnidoc.TruthPage``) lies beside its truth file, ``truth/<id>.md``
# → ``truth/<id>.omnidoc.json``: the markdown serves the whole-page metrics, the record the block-matched ones.
OMNIDOC_SUFFIX = ".omnidoc.json"


def split_of(document: str, seed: int, calibration_fraction: float) -> str:
    """Deterministic split from a hash of (seed, document): stable across runs, machines and Python versions
    (sha256, not ``hash()``), and independent of the order pages arrive in. Made per document, not per page, so
    quantization is never calibrated on a document it is then judged on; a page that is its own document hashes
    its id, as splits made before documents did."""
    digest = hashlib.sha256(f"{seed}:{document}".encode()).digest()
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

    def truth_record_path(self, page: PageRecord) -> Path:
        """Where a page's OmniDocBench truth record lies (whether or not it has one): beside its truth file."""
        rel = (page.truth or page.id).rsplit(".", 1)[0] + OMNIDOC_SUFFIX
        return safe_join(self.root, rel, what=f"{self.root / PAGES_FILE}: page {page.id}'s OmniDocBench truth")

    def omnidoc_truth_text(self, page: PageRecord) -> str | None:
        """The page's OmniDocBench truth: its record beside the truth file (:data:`OMNIDOC_SUFFIX`), else the
        truth markdown itself (split into blocks by the metric); None without truth."""
        if page.truth is None:
            return None
        record = self.truth_record_path(page)
        if record.is_file():
            if page.truth_record_sha256 is None:  # a record pages.jsonl does not bind would be scored unchecked
                raise InputError(f"{record}: page {page.id}'s OmniDocBench truth record is not in {self.root / PAGES_FILE} "
                                 "(no truth_record_sha256); import the page set again with `quantgate pages import`")
            try:
                return record.read_bytes().decode("utf-8")
            except UnicodeDecodeError as e:
                raise InputError(f"{record}: not UTF-8 (byte {e.start}); re-import the OmniDocBench JSON") from None
        return self.truth_text(page)


def verify_page_files(ps: PageSet) -> None:
    """Every page image and truth hashed against the sha256 pages.jsonl records for it (a resumed study
    reuses its records only for the pages they were made from). No size or mtime shortcut: a timestamp can be set
    back. Raises one InputError naming the first file that differs, and how many do."""
    problems = []
    for p in ps.pages:
        files = [(ps.image_path(p), p.sha256, "image")]
        if p.truth is not None and p.truth_sha256 is not None:
            files.append((safe_join(ps.root, p.truth, what=f"page {p.id} truth"), p.truth_sha256, "truth"))
        if p.truth is not None and p.truth_record_sha256 is not None:
            files.append((ps.truth_record_path(p), p.truth_record_sha256, "OmniDocBench truth record"))
        for path, sha, what in files:
            if not path.is_file():
                problems.append(f"{path} (page {p.id}'s {what}) is missing")
            elif sha256_file(path) != sha:
                problems.append(f"{path} (page {p.id}'s {what}) changed since {ps.root / PAGES_FILE} was written "
                                "(sha256 differs)")
    if problems:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise InputError(f"{problems[0]}{more}: restore the page set, or import it again with `quantgate pages "
                         "import` (its records are then re-made)")


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
        from quantgate.schema.load import load_json

        obj = load_json(root / MANIFEST_FILE)  # under the loader's limits: one DataError naming the file and line
        manifest = parse_record(PageSetManifest, obj, where=str(root / MANIFEST_FILE))
    return PageSet(root=root, pages=pages, manifest=manifest)
