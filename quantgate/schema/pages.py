"""The page set's files: ``pages.jsonl`` (one :class:`PageRecord` a line) and ``pageset.json``
(:class:`PageSetManifest`, with :class:`SynthSpec` for a synthesized set)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from quantgate.schema.base import Record

Split = Literal["calibration", "heldout"]


class PageSource(Record):
    file: str
    page: int | None = None  # 1-based page number for PDFs


class PageRecord(Record):
    """One line of ``pages.jsonl``. Paths are relative to the page-set folder. Schema 2 adds ``document``;
    a schema-1 line reads as a page that is its own document (what its split was made from). Schema 3 adds
    ``truth_record_sha256``; schema 4 ``parsebench`` (a line of 1-3 reads with none); schema 5 lets ``parsebench``
    carry the page's table truth (a line of 4 reads as it was: it has none)."""

    schema_version: Literal[1, 2, 3, 4, 5] = 5
    id: str = Field(min_length=1, max_length=200, pattern=r"^[^/\\\x00]+$")
    # the document (PDF, or group of images) the page belongs to: the unit of the split and of the verdict's
    # resampling, since pages of one document are not independent
    document: str = Field(min_length=1, max_length=1000, pattern=r"^[^\x00]+$")
    image: str
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    phash: str | None = None  # perceptual hash (hex), for near-duplicate leakage checks
    width: int = Field(gt=0)
    height: int = Field(gt=0)
    source: PageSource
    truth: str | None = None
    truth_sha256: str | None = None
    # 3: the sha256 of the page's OmniDocBench truth record beside its truth (``<stem>.omnidoc.json``, what the
    # block-matched metrics read), checked with the image and the truth; None: the page has no record
    truth_record_sha256: str | None = Field(default=None, pattern=r"^[0-9a-f]{64}$")
    checks: list[dict[str, Any]] = Field(default_factory=list)  # olmOCR-bench format, kept as given
    # 4: the page's ParseBench rules (``scoring.parsebench``), as upstream writes them; checked when imported
    # (``pages import --parsebench``) and scored by ``parsebench_content`` / ``parsebench_formatting``, each reading
    # its own dimension's types; 5: one ``expected_markdown`` entry, the page's table truth (``parsebench_tables``)
    parsebench: list[dict[str, Any]] = Field(default_factory=list)
    split: Split
    tags: list[str] = Field(default_factory=list)

    @model_validator(mode="before")
    @classmethod
    def _schema_1(cls, obj: Any) -> Any:
        if isinstance(obj, dict) and obj.get("schema_version") == 1 and "document" not in obj:
            return {**obj, "schema_version": 2, "document": obj.get("id")}
        return obj


class SynthSpec(Record):
    """How ``pages synth`` made a page set: every argument that changes its pages. A study compares it
    with its own ``pages.synth`` before reusing the folder."""

    n: int
    seed: int
    calibration_fraction: float
    profile: str
    noise: float
    width: int | None = None
    page_size: list[int] | None = None  # [width, height]
    pages_per_document: int = Field(1, ge=1)  # absent in sets made before documents: one page each


class LabelSample(Record):
    """The labeling draw ``quantgate pages label-sample`` recorded in ``pageset.json`` (``label_sample``): whole
    held-out documents drawn at random, so truth written for them is a random sample of the pages judged — what
    the rectified truth-free estimate assumes (``quantgate.heldout.label`` says how it is drawn and checked).
    ``population_sha256`` names the held-out documents it was drawn from; ``sha256`` the drawn page ids: the draw
    is a function of (seed, population, documents asked for), so a verdict can draw it again and compare."""

    seed: int = Field(ge=0)
    n_documents: int = Field(ge=1)  # documents asked for (-n)
    documents: list[str]  # the drawn documents, sorted
    page_ids: list[str]  # their held-out pages, sorted: the pages to label
    population_documents: int = Field(ge=1)  # held-out documents the draw was made from
    population_sha256: str = Field(pattern=r"^[0-9a-f]{64}$")  # sha256 of their sorted names, one a line
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")  # sha256 of the sorted drawn page ids, one a line
    list_file: str  # where the labelers' list was written (informational: the list may be handed on)


class ImportInputs(Record):
    """What ``pages import`` made a set from besides its images and split (``pageset.json``'s ``made_from``): every
    option that changes the pages, with the bytes of the files they name, so a rerun (``init`` into the same folder)
    takes the set as is only when importing again would make the same one."""

    truth_sha256: str | None = None  # the truth files offered (names and bytes: heldout.made_from); None: no --truth
    checks_sha256: list[str] = Field(default_factory=list)  # each --checks file's bytes, sorted
    parsebench_sha256: str | None = None  # the ParseBench rules given, as read; None: no --parsebench
    document_pattern: str | None = None
    tags: list[str] = Field(default_factory=list)
    dpi: float | None = None
    megapixels: float


class PageSetManifest(Record):
    """``pageset.json``: how the set was made, so a split can be reproduced and checked. Schema 2 adds
    ``label_sample`` (the labeling draw); a schema-1 file reads as a set with no draw. Schema 3 adds ``made_from``
    (an import's inputs); a set of 1-2 reads as one whose inputs were not recorded."""

    schema_version: Literal[1, 2, 3] = 3
    kind: Literal["quantgate.pageset"] = "quantgate.pageset"
    created_by: str
    seed: int
    calibration_fraction: float
    n_pages: int
    pages_sha256: str  # sha256 of pages.jsonl
    synth: SynthSpec | None = None  # set by `pages synth`; None for imported sets (and synth sets made before it)
    notes: list[str] = Field(default_factory=list)
    label_sample: LabelSample | None = None  # set by `pages label-sample`
    made_from: ImportInputs | None = None  # set by `pages import`; None for synthesized sets and older imports


# --- serving ---------------------------------------------------------------------------------


class PageSetStats(Record):
    """What ``quantgate pages stats`` prints about a page set."""

    pages: int
    documents: int
    splits: dict[str, int]
    tags: dict[str, int]
    with_truth: int
    with_checks: int
    checks: int
    with_neither: int
    truth_chars_median: int | float | None
    megapixels_median: float | None
    width_range: list[int] | None
    height_range: list[int] | None


class PageSetCopy(Record):
    """``pages-copy.json`` in a study folder: its ``pages/`` is the study's copy of a page set that lies outside it
    (so the gate binds the images and truths it judged). ``source`` is where it was copied from (as the
    study named it: informational, a moved study keeps its copy); ``pages_sha256`` the copied pages.jsonl's."""

    schema_version: Literal[1] = 1
    kind: Literal["quantgate.pagecopy"] = "quantgate.pagecopy"
    source: str
    pages_sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
