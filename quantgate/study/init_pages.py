"""The pages side of ``quantgate init``: where the page set will be (checked from the files alone, before the
model is loaded), importing images/PDFs with `pages import`'s own options (OmniDocBench's JSON staged as a truth
folder), reusing an earlier init's identical import, and the facts the study YAML is written from."""

from __future__ import annotations

import math
import re
import shlex
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from quantgate.errors import InputError, UsageError
from quantgate.heldout.made_from import made_from

_TABLE = re.compile(r"^\s*\|?(\s*:?-{3,}:?\s*\|)+|<table[\s>]", re.M | re.I)  # a pipe table's separator row, or HTML


@dataclass
class PageFacts:
    path: Path
    n: int
    heldout: int
    calibration: int
    heldout_truth: int
    heldout_checks: int
    tables: bool
    truth_tokens_max: int | None
    imported: str | None = None  # the `pages import` command init ran, if it imported
    heldout_documents: int = 0
    warnings: list[str] = field(default_factory=list)
    omnidoc: int = 0  # held-out pages whose truth has an OmniDocBench block record (the omnidoc_* metrics read it)
    reused: bool = False  # the page set an earlier init imported with the same sources and split, taken as is
    # ParseBench metric → the held-out pages carrying its dimension's rules (``pages import --parsebench``)
    parsebench: dict[str, int] = field(default_factory=dict)


@dataclass
class ImportRequest:
    """How init imports images/PDFs given as ``--pages`` (the flags it shares with ``pages import``)."""

    truth: Path | None = None  # a folder of <page id>.md/.txt, or OmniDocBench's JSON
    checks: list[Path] | None = None
    parsebench: Path | None = None  # a ParseBench dimension file: each page's rules (``pages import --parsebench``)
    calibration_fraction: float = 0.2
    split_seed: int = 0
    document_pattern: str | None = None
    tags: list[str] = field(default_factory=list)


@contextmanager
def truth_folder(truth: Path | None) -> Iterator[Path | None]:
    """``--truth`` as the folder the importer reads: a folder as given; OmniDocBench's JSON read whole and staged as
    one (``<id>.md`` + ``<id>.omnidoc.json`` per page) in a temporary folder, removed afterwards. A JSON that is not
    OmniDocBench's is refused here, naming the file, before anything is imported or loaded."""
    if truth is None or not (Path(truth).is_file() and Path(truth).suffix.lower() == ".json"):
        yield truth
        return
    from quantgate.scoring.omnidoc.truth import write_truth_files

    with tempfile.TemporaryDirectory(prefix="quantgate-omnidoc-truth.") as staged:
        write_truth_files(truth, Path(staged))
        yield Path(staged)


def _token_counter(model: Path):
    """Token counts by the model's own tokenizer (``tokenizer.json``), else about 3 characters a token."""
    f = model / "tokenizer.json"
    if f.is_file():
        try:
            from tokenizers import Tokenizer

            tok = Tokenizer.from_file(str(f))
            return lambda text: len(tok.encode(text, add_special_tokens=False).ids)
        except Exception:  # noqa: BLE001 — an unreadable tokenizer only loses the estimate's precision
            pass
    return lambda text: math.ceil(len(text) / 3)


def pages_target(pages: Path, out_dir: Path, req: ImportRequest, *, import_to: Path | None = None,
                 overwrite: bool = False) -> tuple[Path, bool]:
    """Where the page set will be, and whether an earlier init's import there is taken as is (a rerun resumes):
    decided from the files alone, before the model is loaded, so a refusal comes at once. What the import will
    read is checked first (:func:`check_inputs`), a rerun's too: a bad file is refused, not reused past."""
    pages = Path(pages)
    if (pages / "pages.jsonl").is_file():
        given = [flag for flag, v in (("--truth", req.truth), ("--checks", req.checks),
                                      ("--parsebench", req.parsebench),
                                      ("--document-pattern", req.document_pattern), ("--tag", req.tags)) if v]
        if given:
            raise InputError(f"--pages {pages}: is a page set already; {', '.join(given)} apply when importing images "
                             "or PDFs (re-import with `quantgate pages import` to change them)")
        return pages, False
    target = Path(import_to) if import_to else out_dir / "pages"
    with _options(req) as opts:  # refuses what the import would refuse; the rerun's inputs, read as it reads them
        if not (target.exists() and any(target.iterdir())) or overwrite:
            return target, False
        differs = _differences(target, pages, req, made_from(opts))
    if differs:
        raise UsageError(f"{target}: exists and is not the same import (it {differs}); pass --overwrite to import "
                         "again, --pages-out DIR to import elsewhere, or give that page set as --pages")
    return target, True


# ImportInputs' fields and the flags that set them, as a refused rerun names them
_FLAGS = {"truth_sha256": "--truth", "checks_sha256": "--checks", "parsebench_sha256": "--parsebench",
          "document_pattern": "--document-pattern", "tags": "--tag", "dpi": "--dpi", "megapixels": "--megapixels"}


def _differences(target: Path, pages: Path, req: ImportRequest, now) -> str | None:
    """Why ``target`` is not the import these flags would make (said as the end of a sentence), or None when it is:
    a complete page set of the files under ``pages``, split alike and made from the same inputs (the flags' values
    and the bytes of the files they name, as ``pages import`` recorded them)."""
    from quantgate.heldout.importer import IMAGE_SUFFIXES
    from quantgate.io.pageset import load_pageset

    try:
        ps = load_pageset(target)
    except InputError:
        return "is not a complete page set"
    m = ps.manifest
    if m is None or m.made_from is None:
        return "does not record what it was imported from (made by another command or an older quantgate)"
    files = ({f.resolve() for f in pages.rglob("*") if f.suffix.lower() in IMAGE_SUFFIXES | {".pdf"}}
             if pages.is_dir() else {pages.resolve()})
    if {Path(r.source.file).resolve() for r in ps.pages} != files:
        return f"was made from other files than --pages {pages}"
    flags = [flag for flag, same in (("--split-seed", m.seed == req.split_seed),
                                     ("--calibration-fraction", m.calibration_fraction == req.calibration_fraction))
             if not same]
    flags += [_FLAGS[k] for k, v in now.model_dump().items() if getattr(m.made_from, k) != v]
    return f"was made with another {', '.join(flags)}" if flags else None


def check_inputs(req: ImportRequest) -> None:
    """What the import will read, refused now if scoring or the importer would refuse it later: OmniDocBench's JSON
    read whole, and every check and ParseBench rule through the scorer's own validation (one error naming
    ``file:line`` and the id or type)."""
    with _options(req):
        pass


@contextmanager
def _options(req: ImportRequest) -> Iterator:
    """``req`` as the importer's options (``heldout.importer.ImportOptions``), each input checked as the import and
    scoring will read it: ``--truth`` staged (:func:`truth_folder`) for as long as the block runs."""
    from quantgate.heldout.importer import ImportOptions
    from quantgate.io.fileio import read_jsonl
    from quantgate.scoring.olmocr_checks import validate_checks

    with truth_folder(req.truth) as truth:
        if truth is not None and not Path(truth).is_dir():
            raise UsageError(f"--truth {req.truth}: neither a folder of <page id>.md/.txt files nor OmniDocBench's "
                             "JSON; give one of the two")
        validate_checks((f"{f}:{no}", c) for f in req.checks or []
                        for no, c in read_jsonl(f, final_newline_optional=True))
        yield ImportOptions(truth_dir=truth, checks_file=req.checks, seed=req.split_seed,
                            calibration_fraction=req.calibration_fraction, document_pattern=req.document_pattern,
                            tags=list(req.tags), parsebench=_parsebench_rules(req))


def _parsebench_rules(req: ImportRequest) -> dict[str, list[dict]]:
    """page id → its ParseBench rules from ``--parsebench``, each checked as scoring reads it (file:line, type)."""
    from quantgate.scoring.parsebench.dataset import read_rules

    return read_rules(req.parsebench).by_page if req.parsebench else {}


def import_command(pages: Path, target: Path, req: ImportRequest) -> str:
    """The `pages import` command that makes the same page set (said in the YAML)."""
    q = shlex.quote
    return " ".join(["quantgate pages import", q(str(pages)), "-o", q(str(target))]
                    + (["--truth", q(str(req.truth))] if req.truth else [])
                    + [x for c in req.checks or [] for x in ("--checks", q(str(c)))]
                    + (["--parsebench", q(str(req.parsebench))] if req.parsebench else [])
                    + [f"--calibration-fraction {req.calibration_fraction:g}", f"--split-seed {req.split_seed}"]
                    + (["--document-pattern", q(req.document_pattern)] if req.document_pattern else [])
                    + [x for t in req.tags for x in ("--tag", q(t))])


def prepare_pages(pages: Path, target: Path, model: Path, req: ImportRequest | None = None, *, reuse: bool = False,
                  overwrite: bool = False) -> PageFacts:
    """The page set at ``target`` (from :func:`pages_target`): ``pages`` itself when it is one, an earlier import
    when ``reuse``, else the images/PDFs of ``pages`` imported there (split by document, as `pages import` splits)."""
    from quantgate.heldout.importer import import_pages
    from quantgate.io.pageset import load_pageset

    pages, req = Path(pages), req or ImportRequest()
    imported, import_warnings, made = None, [], False
    if Path(target).resolve() != pages.resolve():
        imported = import_command(pages, target, req)
        if not reuse:
            with _options(req) as opts:
                staged = str(opts.truth_dir) if opts.truth_dir != req.truth else None
                import_warnings = [w.replace(staged, str(req.truth)) if staged else w
                                   for w in import_pages([pages], target, opts, overwrite=overwrite).warnings]
            made = True
    try:
        facts = _page_facts(load_pageset(target), model, imported)
        facts.warnings[:0] = import_warnings  # pages without truth or checks, by id: not dropped silently
        facts.reused = reuse
        return facts
    except BaseException:
        if made:  # refused: the pages init imported go too
            shutil.rmtree(target, ignore_errors=True)
        raise


def _page_facts(ps, model: Path, imported: str | None) -> PageFacts:
    pset_dir = ps.root
    held = ps.split("heldout")
    truths = [t for t in (ps.truth_text(p) for p in held) if t is not None]
    facts = PageFacts(pset_dir, len(ps.pages), len(held), len(ps.split("calibration")), len(truths),
                      sum(len(p.checks) for p in held), any(_TABLE.search(t) for t in truths), None, imported,
                      heldout_documents=len({_document(p) for p in held}),
                      omnidoc=sum(1 for p in held if p.truth_record_sha256), parsebench=_parsebench(held))
    if not held:
        raise InputError(f"{pset_dir}: no held-out pages to score ({facts.n} page(s), all in the calibration split); "
                         "import more pages or a smaller --calibration-fraction")
    if not truths and not facts.heldout_checks and not facts.parsebench:
        raise InputError(f"{pset_dir}: no held-out page has truth, checks or ParseBench rules, so nothing can be "
                         "scored; give --truth DIR (<page id>.md files) or --checks FILE (olmOCR-bench JSONL), or "
                         "import the pages with `quantgate pages import --parsebench FILE.jsonl`")
    if truths:
        count = _token_counter(Path(model))
        facts.truth_tokens_max = max(count(t) for t in truths)
    facts.warnings += _too_few(facts)
    return facts


def _parsebench(held) -> dict[str, int]:
    """Each ParseBench dimension's metric and how many held-out pages carry its rules, in the scorer's order."""
    from quantgate.scoring.parsebench.dataset import FAMILY_OF
    from quantgate.scoring.parsebench.leaderboard import DIMENSIONS

    carried = [{FAMILY_OF[r["type"]][0] for r in p.parsebench if r.get("type") in FAMILY_OF} for p in held]
    counts = {metric: sum(1 for dims in carried if dim in dims) for dim, (_, metric, *_) in DIMENSIONS.items()}
    return {metric: n for metric, n in counts.items() if n}


def _document(page) -> str:
    # the document a page belongs to: its own field where pages carry one, else the file it came from (one PDF)
    return getattr(page, "document", None) or page.source.file


def _too_few(facts: PageFacts) -> list[str]:
    """What the verdict's own minimums (``judge.clustered``) say about the held-out split, in its words."""
    from quantgate.judge.clustered import MIN_DOCUMENTS, MIN_PAGES

    out = []
    if facts.heldout < MIN_PAGES:
        out.append(f"only {facts.heldout} held-out page(s): a verdict needs at least {MIN_PAGES} scored pages, so every "
                   "verdict will be inconclusive (too_few_pages); add pages")
    if facts.heldout_documents < MIN_DOCUMENTS:
        out.append(f"only {facts.heldout_documents} held-out document(s) (pages of one source file count as one): a "
                   f"verdict needs at least {MIN_DOCUMENTS} documents (too_few_documents); add documents")
    return out
