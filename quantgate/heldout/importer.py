"""``quantgate pages import``: images and PDFs (plus truth and olmOCR-style checks) into a page set.

The whole set is built in a temporary sibling folder and renamed into place at the end, so a
failed import leaves nothing half-written."""

from __future__ import annotations

import io
import re
import shutil
import tempfile
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from quantgate.errors import InputError, UnsafeInputError, UsageError
from quantgate.heldout.made_from import TRUTH_SUFFIXES, checks_files, made_from
from quantgate.io.fileio import atomic_write_json, read_jsonl, sha256_bytes, sha256_file
from quantgate.io.pageset import MANIFEST_FILE, OMNIDOC_SUFFIX, PAGES_FILE, split_of
from quantgate.schema.base import parse_record
from quantgate.schema.load import decode_text, read_regular
from quantgate.schema.omnidoc import TruthPage
from quantgate.schema.pages import PageRecord, PageSetManifest, PageSource

IMAGE_SUFFIXES = {".png", ".jpg", ".jpeg", ".tif", ".tiff", ".webp"}
# 4 MP: the page size OCR vendors report against. 64 MP is far above any real page scan at
# 300 dpi (A4 ≈ 8.7 MP) and far below what would exhaust memory while decoding.
DEFAULT_MEGAPIXELS = 4.0
MAX_PIXELS = 64_000_000
MAX_PDF_PAGES = 2000


@dataclass
class ImportOptions:
    truth_dir: Path | None = None
    checks_file: Path | Sequence[Path] | None = None  # one JSONL or several (olmOCR-bench ships one per check type)
    dpi: float | None = None
    megapixels: float = DEFAULT_MEGAPIXELS
    calibration_fraction: float = 0.2
    seed: int = 0
    max_pixels: int = MAX_PIXELS
    max_pdf_pages: int = MAX_PDF_PAGES
    tags: list[str] = field(default_factory=list)
    # searched in each image's file name; its first group (else the whole match) names the page's document
    document_pattern: str | None = None
    # Copy (with a warning) a truth file or folder image that is a link to a file outside its folder,
    # instead of refusing it: a planted link would otherwise copy any readable file into the set.
    follow_outside_links: bool = False
    # page id → its ParseBench content rules, read and checked by the caller (scoring.parsebench.dataset, which this
    # stage may not import); a page id here that no imported page has is refused
    parsebench: dict[str, list[dict]] = field(default_factory=dict)


@dataclass
class ImportReport:
    n_pages: int
    n_truth: int
    n_checks: int
    n_neither: int
    warnings: list[str]


def _open_image(data: bytes, name: str, max_pixels: int):
    """The decoded image, refused above ``max_pixels`` before it is decoded. PIL's own decompression-bomb
    guard (``Image.MAX_IMAGE_PIXELS``, process-wide) is left as the caller set it — the CLI sets it to
    ``--max-pixels``; a library caller allowing more than PIL's default raises it itself."""
    from PIL import Image

    with warnings.catch_warnings():
        warnings.simplefilter("error", Image.DecompressionBombWarning)
        try:
            img = Image.open(io.BytesIO(data))
            if img.width * img.height > max_pixels:
                raise InputError(f"{name}: image is {img.width}x{img.height} px, over the limit of "
                                 f"{max_pixels:,} pixels; downscale it or raise --max-pixels")
            img.load()
        except InputError:
            raise
        except (Image.DecompressionBombError, Image.DecompressionBombWarning):
            raise InputError(f"{name}: image is larger than the limit of {max_pixels:,} pixels "
                             "(decompression-bomb guard); downscale it or raise --max-pixels") from None
        except Exception as e:  # PIL raises many types for corrupt files
            raise InputError(f"{name}: cannot decode image ({type(e).__name__}: {e}); is the file complete?") from None
    return img


def _inside(f: Path, folder: Path, opts: ImportOptions, warn: list[str], flag: str = "--follow-outside-links") -> Path:
    """``f`` (found by listing ``folder``) if it resolves inside ``folder``; a link out of it is refused,
    or copied with a warning when the user asked for that."""
    target = f.resolve()
    if folder.resolve() in target.parents:
        return f
    if not opts.follow_outside_links:
        raise UnsafeInputError(f"{f}: is a link to {target}, outside {folder}; refusing to copy it into the page set "
                               f"— copy the file in, or pass {flag} if the link is intended")
    warn.append(f"{f}: copied from {target}, outside {folder} (a link; {flag})")
    return f


def _iter_sources(sources: list[Path], opts: ImportOptions, warn: list[str]) -> list[tuple[Path, Path | None]]:
    """(file, the source folder it was found in — None for a file given itself), in import order."""
    files: list[tuple[Path, Path | None]] = []
    for src in sources:
        if src.is_dir():
            files.extend((_inside(p, src, opts, warn), src) for p in sorted(src.rglob("*"))
                         if p.is_file() and p.suffix.lower() in IMAGE_SUFFIXES | {".pdf"})
        elif src.is_file():
            if src.suffix.lower() not in IMAGE_SUFFIXES | {".pdf"}:
                raise InputError(f"{src}: not a supported page file (PDF, PNG, JPEG, TIFF, WebP)")
            files.append((src, None))
        else:
            raise InputError(f"{src}: no such file or folder")
    if not files:
        raise InputError(f"no PDFs or images found in {', '.join(map(str, sources))}")
    return files


GROUPING_HINT = ("put each document's images in a sub-folder of its own, or pass --document-pattern REGEX "
                 "(searched in each file name; its first group names the document), e.g. "
                 "--document-pattern '^(.+)_p[0-9]+' for report_p1.png, report_p2.png")


def _documents(files: list[tuple[Path, Path | None]], pattern: str | None, warn: list[str]) -> list[str]:
    """Each file's document: a PDF's stem (its pages' ids are ``<stem>_pg<N>``); for an image, the first group
    of ``pattern`` in its file name, else its sub-folder below the source folder, else the image alone."""
    rx = None
    if pattern is not None:
        try:
            rx = re.compile(pattern)
        except re.error as e:
            raise UsageError(f"--document-pattern '{pattern}': not a regular expression ({e})") from None
    docs, unmatched, alone = [], [], 0
    for f, folder in files:
        if f.suffix.lower() == ".pdf":
            docs.append(f.stem)
        elif rx is not None:
            m = rx.search(f.name)
            doc = (m.group(1) if rx.groups else m.group(0)) if m else None
            if not doc:
                unmatched.append(f)
            docs.append(doc or "")
        elif folder is not None and f.parent != folder:
            docs.append(f.parent.relative_to(folder).as_posix())
        else:
            docs.append(f.stem)
            alone += 1
    if unmatched:
        n_images = sum(1 for f, _ in files if f.suffix.lower() != ".pdf")
        raise UsageError(f"--document-pattern '{pattern}' names no document for {len(unmatched)} of {n_images} image "
                         f"file name(s), e.g. {unmatched[0].name!r} (searched in the file name; its first group, "
                         "non-empty, names the document); fix the pattern, or leave it out to group by sub-folder")
    if alone > 1:
        warn.append(f"{alone} images are each their own document (a flat folder, or files given one by one), so the "
                    f"verdict treats them as independent; if pages belong together, {GROUPING_HINT}")
    return docs


def _render_pdf(path: Path, opts: ImportOptions):
    """Yield (page number from 1, PIL image)."""
    import pypdfium2 as pdfium

    if path.stat().st_size == 0:
        raise InputError(f"{path}: PDF is empty (0 bytes)")
    try:
        pdf = pdfium.PdfDocument(str(path))
    except Exception as e:
        raise InputError(f"{path}: cannot open PDF ({e}); is it complete and not encrypted?") from None
    try:
        try:
            n = len(pdf)
        except Exception as e:  # noqa: BLE001 — pdfium's PdfiumError, whatever a damaged file raises
            raise InputError(f"{path}: cannot read the PDF's pages ({' '.join(str(e).split())[:120]})") from None
        if n == 0:
            raise InputError(f"{path}: PDF has no pages")
        if n > opts.max_pdf_pages:
            raise InputError(f"{path}: PDF has {n} pages, over the limit of {opts.max_pdf_pages}; "
                             "split it or raise --max-pdf-pages")
        for i in range(n):
            try:  # a damaged page tree (one that lists itself) fails here, inside pdfium
                page = pdf[i]
                w_pt, h_pt = page.get_size()
            except Exception as e:  # noqa: BLE001 — pdfium's PdfiumError, whatever a damaged file raises
                raise InputError(f"{path}: page {i + 1} cannot be read ({' '.join(str(e).split())[:120]}); the PDF "
                                 "is damaged") from None
            if opts.dpi:
                scale = opts.dpi / 72.0
            else:
                scale = (opts.megapixels * 1e6 / (w_pt * h_pt)) ** 0.5
            if w_pt * h_pt * scale * scale > opts.max_pixels:
                raise InputError(f"{path}: page {i + 1} would render to more than {opts.max_pixels:,} pixels; "
                                 "lower --dpi/--megapixels")
            try:
                img = page.render(scale=scale).to_pil()
            except Exception as e:
                raise InputError(f"{path}: page {i + 1} cannot be rendered ({e}); the PDF may be truncated") from None
            yield i + 1, img
    finally:
        pdf.close()


class _CheckKeys(BaseModel):
    """The fields of an olmOCR-style check the importer itself reads (to find the check's page).
    The other fields depend on the check type and are kept as they are for the scorer."""

    model_config = ConfigDict(extra="allow", strict=True)
    pdf: str = Field(min_length=1)
    page: int = Field(1, ge=1)
    type: str = Field(min_length=1)
    id: str | None = None


def _checks_files(opts: ImportOptions) -> list[Path]:
    return checks_files(opts.checks_file)


def _load_checks(checks_files: list[Path]) -> dict[str, list[dict]]:
    by_page: dict[str, list[dict]] = {}
    for checks_file in checks_files:
        for no, obj in read_jsonl(checks_file, final_newline_optional=True):
            keys = parse_record(_CheckKeys, obj, where=f"{checks_file}:{no} (olmOCR-style check)")
            by_page.setdefault(f"{Path(keys.pdf).stem}_pg{keys.page}", []).append(obj)
    return by_page


def import_pages(sources: list[Path], out: Path, opts: ImportOptions, *, overwrite: bool = False,
                 progress: Callable[[str], None] | None = None) -> ImportReport:
    """Build the page set in a temporary sibling of ``out`` and rename it into place when complete."""
    # 1: every page for calibration (a set made only to calibrate on), as a share just below 1 already gave
    if not 0.0 <= opts.calibration_fraction <= 1.0:
        raise UsageError(f"--calibration-fraction must be in [0, 1], got {opts.calibration_fraction}")
    out = Path(out)
    if out.exists() and any(out.iterdir()) and not overwrite:
        raise UsageError(f"{out}: folder exists and is not empty; choose another -o or pass --overwrite")
    warn: list[str] = []
    files = _iter_sources([Path(s) for s in sources], opts, warn)
    documents = _documents(files, opts.document_pattern, warn)  # before anything is written: a bad pattern fails here
    checks = _load_checks(_checks_files(opts))
    truth_files = _truth_files(opts, warn)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.importing.", dir=out.parent))
    try:
        (tmp / "images").mkdir()
        writer = _PageWriter(tmp, opts, truth_files, checks, progress)
        for (f, _), doc in zip(files, documents, strict=True):
            if f.suffix.lower() == ".pdf":
                for n, img in _render_pdf(f, opts):
                    writer.add(f"{f.stem}_pg{n}", img, f, n, doc)
            else:
                data = f.read_bytes()
                if not data:
                    raise InputError(f"{f}: image file is empty (0 bytes)")
                writer.add(f.stem, _open_image(data, str(f), opts.max_pixels), f, None, doc)
        records = writer.records
        orphans = sorted(set(opts.parsebench) - {r.id for r in records})
        if orphans:
            raise InputError(f"--parsebench: rules name {len(orphans)} page(s) not in the imported set, e.g. "
                             f"{orphans[0]!r} (from the line's pdf and page: <pdf stem>_pg<page>); import that PDF "
                             "too, or drop its rules")
        warn += writer.notes + _unmatched(records, truth_files, checks, opts)
        _write_set(tmp, records, opts, warn)
        _replace(tmp, out, overwrite)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return ImportReport(n_pages=len(records), n_truth=sum(1 for r in records if r.truth),
                        n_checks=sum(len(r.checks) for r in records),
                        n_neither=sum(1 for r in records if not (r.truth or r.checks or r.parsebench)), warnings=warn)


def _truth_files(opts: ImportOptions, warn: list[str]) -> dict[str, Path]:
    """page id → its truth file in ``--truth`` (``<id>.md`` or ``.txt``), links out of the folder refused."""
    found: dict[str, Path] = {}
    if not opts.truth_dir:
        return found
    if not opts.truth_dir.is_dir():
        raise UsageError(f"--truth {opts.truth_dir}: not a folder")
    for t in sorted(opts.truth_dir.iterdir()):
        if t.suffix in TRUTH_SUFFIXES and t.is_file():
            _inside(t, opts.truth_dir, opts, warn)
            if t.stem in found:
                raise InputError(f"{t}: two truth files for page {t.stem!r} ({found[t.stem].name} and {t.name})")
            found[t.stem] = t
    return found


class _PageWriter:
    """Writes each page's PNG (and truth) into the set being built and keeps its record."""

    def __init__(self, root: Path, opts: ImportOptions, truth_files: dict[str, Path], checks: dict[str, list[dict]],
                 progress: Callable[[str], None] | None):
        self.root, self.opts, self.truth_files, self.checks, self.progress = root, opts, truth_files, checks, progress
        self.records: list[PageRecord] = []
        self.notes: list[str] = []
        self._attribute_tags: dict[str, list[str]] = {}  # page id → tags from its OmniDocBench page attributes
        self._origin: dict[str, str] = {}

    def add(self, pid: str, img, src: Path, page_no: int | None, document: str) -> None:
        import imagehash

        if pid in self._origin:
            raise InputError(f"{src}: gives page id {pid!r}, already given by {self._origin[pid]}; rename one of them")
        self._origin[pid] = f"{src}" + (f" page {page_no}" if page_no else "")
        if img.mode not in ("RGB", "L"):
            img = img.convert("RGB")
        buf = io.BytesIO()
        img.save(buf, format="PNG")
        data = buf.getvalue()
        rel = f"images/{pid}.png"
        (self.root / rel).write_bytes(data)
        truth_rel, truth_sha, record_sha = self._truth(pid)
        self.records.append(PageRecord(
            id=pid, document=document, image=rel, sha256=sha256_bytes(data), phash=str(imagehash.phash(img)),
            width=img.width, height=img.height,
            source=PageSource(file=str(src), page=page_no),
            truth=truth_rel, truth_sha256=truth_sha, truth_record_sha256=record_sha, checks=self.checks.get(pid, []),
            parsebench=self.opts.parsebench.get(pid, []),
            split=split_of(document, self.opts.seed, self.opts.calibration_fraction),
            tags=list(self.opts.tags) + self._attribute_tags.pop(pid, []),
        ))
        if self.progress:
            self.progress(pid)

    def _truth(self, pid: str) -> tuple[str | None, str | None, str | None]:
        """The page's truth copied into the set: (its path there, its sha256, its OmniDocBench record's sha256 or
        None), or (None, None, None)."""
        if pid not in self.truth_files:
            return None, None, None
        tf = self.truth_files[pid]
        raw = read_regular(tf, "truth file")
        # UTF-8 only: UTF-16 (with or without its byte-order mark: NUL bytes) was stored NUL-interleaved and scored
        decode_text(raw, f"{tf}: truth")
        (self.root / "truth").mkdir(exist_ok=True)
        rel = f"truth/{pid}{tf.suffix}"
        (self.root / rel).write_bytes(raw)
        return rel, sha256_bytes(raw), self._omnidoc_record(tf, pid)

    def _omnidoc_record(self, tf: Path, pid: str) -> str | None:
        """The page's OmniDocBench truth record beside its truth file (``cli pages import --truth X.json`` stages
        them so), copied with it: its sha256 (pages.jsonl binds it as it binds the truth), or None without one; the
        blocks it had to skip are listed in the set's notes."""
        record = tf.with_name(f"{pid}{OMNIDOC_SUFFIX}")
        if not record.is_file():
            return None
        _inside(record, tf.parent, self.opts, self.notes)
        raw = record.read_bytes()
        try:
            page = TruthPage.model_validate_json(raw)
        except ValueError as e:
            raise InputError(f"{record}: not an OmniDocBench truth record ({e}); re-stage it from the JSON") from None
        (self.root / "truth" / record.name).write_bytes(raw)
        self.notes += [f"{page.source}: page {pid!r}: {s.category} block (anno_id {s.anno_id}) skipped: {s.reason}"
                       for s in page.skipped]
        self._attribute_tags[pid] = attribute_tags(page.attributes)
        return sha256_bytes(raw)


def attribute_tags(attributes: dict) -> list[str]:
    """OmniDocBench's page attributes as page tags, ``key:value`` (one per value of a list), so pages can be
    counted and judged by language, layout or source as OmniDocBench reports them."""
    tags = []
    for key, value in sorted(attributes.items()):
        for v in value if isinstance(value, list) else [value]:
            if isinstance(v, (str, int, float)) and not isinstance(v, bool) and str(v).strip():
                tags.append(f"{key}:{str(v).strip()}")
            elif isinstance(v, bool):
                tags.append(f"{key}:{str(v).lower()}")
    return tags


def _unmatched(records: list[PageRecord], truth_files: dict[str, Path], checks: dict[str, list[dict]],
               opts: ImportOptions) -> list[str]:
    """Warnings for truth files and checks that match no page, and pages that can only be timed."""
    warn = []
    ids = {r.id for r in records}
    unmatched = sorted(k for k in truth_files if k not in ids)
    if unmatched:
        warn.append(f"{len(unmatched)} truth file(s) in {opts.truth_dir} match no page: " + ", ".join(unmatched[:20])
                    + (" …" if len(unmatched) > 20 else ""))
    orphan_checks = sorted(k for k in checks if k not in ids)
    if orphan_checks:
        warn.append(f"checks in {', '.join(map(str, _checks_files(opts)))} name pages that were not imported: "
                    + ", ".join(orphan_checks))
    neither = [r.id for r in records if not (r.truth or r.checks or r.parsebench)]  # ParseBench rules score a page
    if neither:
        warn.append(f"{len(neither)} page(s) have neither truth nor checks (nor ParseBench rules): they are served, "
                    "timed and judged by what "
                    "the two outputs show (the truth-free bound), not scored: "
                    + ", ".join(neither[:20]) + (" …" if len(neither) > 20 else ""))
    return warn


def _write_set(root: Path, records: list[PageRecord], opts: ImportOptions, warn: list[str]) -> None:
    lines = "".join(r.model_dump_json(exclude_none=False) + "\n" for r in records)
    (root / PAGES_FILE).write_text(lines, encoding="utf-8")
    atomic_write_json(root / MANIFEST_FILE, PageSetManifest(
        created_by="quantgate pages import", seed=opts.seed, calibration_fraction=opts.calibration_fraction,
        n_pages=len(records), pages_sha256=sha256_file(root / PAGES_FILE), notes=warn, made_from=made_from(opts),
    ).model_dump())


def _replace(tmp: Path, out: Path, overwrite: bool) -> None:
    if out.exists():
        if not overwrite and any(out.iterdir()):
            raise InputError(f"{out}: appeared while importing; not replacing it")
        shutil.rmtree(out) if out.is_dir() else out.unlink()
    tmp.rename(out)
