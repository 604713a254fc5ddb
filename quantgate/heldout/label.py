"""The labeling sample: which pages a team writes truth for, drawn by quantgate at random (``quantgate pages
label-sample PAGESET -n N [--sample-seed S]``).

Why a draw. A verdict on pages without truth bounds each page's damage by what the two outputs show; truth on a
*random* sample of the judged pages measures how loose that bound is and tightens it (prediction-powered
inference, docs/statistics.md). That correction is only valid when the labeled pages were drawn at random from
the pages judged: pages picked by hand (the easy ones, the ones someone already looked at) can make the bound look
looser than it is and pass a damaged variant. So quantgate draws the sample and records it, and a verdict uses
truth for the rectified estimate only on the recorded draw; truth on any other page still gives the baseline's
score and fitness.

The draw. Whole held-out documents (documents are the unit: pages of one document fail together), ``n`` of them,
uniformly without replacement: the documents ordered by sha256 of ``"label:<seed>:<document>"`` and the first
``n`` taken (a hash, not ``random``, so it is the same on every machine and Python version, as
``io.pageset.split_of`` is). It is a function of (seed, held-out documents, n): a verdict draws it again and
compares.

The record (the interface the verdict reads; ``schema.pages.LabelSample``), in ``pageset.json`` under
``label_sample`` (pageset.json schema 2): ``seed``, ``n_documents``, ``documents`` and ``page_ids`` (sorted),
``population_documents`` and ``population_sha256`` (the held-out documents drawn from, sha256 of their sorted
names one a line), ``sha256`` (of the sorted drawn page ids, one a line), ``list_file`` (relative to the set when
inside it). :func:`sample_status` is what a verdict calls: the drawn pages that have truth, and why they cannot
stand as the random sample (``problem``: no draw recorded, the set's held-out documents changed since the draw,
the record edited, drawn pages still without truth — a sample with labels missing is not random any more), None
when they can. A verdict on pages without truth calls :func:`checked_sample_status`, which refuses an edited or
stale draw outright.

The labelers get a folder (default ``PAGESET/label-sample``): ``pages.csv`` (page id, document, image, the truth
file to write), the images, and ``README.md`` with the rule that matters most — write truth from the page image,
never by correcting a model's output: truth copied from a model's output understates that model's damage. Truth
comes back into the set by importing it (``pages import ... --truth``); a set imported again records the draw
again with the same ``-n`` and ``--sample-seed`` (the same documents when the held-out documents are the same)."""

from __future__ import annotations

import csv
import hashlib
import io
import shutil
from dataclasses import dataclass
from pathlib import Path

from quantgate.errors import DataError, UsageError
from quantgate.io.fileio import atomic_write_json, atomic_write_text
from quantgate.io.pageset import MANIFEST_FILE, PageSet, load_pageset
from quantgate.schema.pages import LabelSample

LIST_DIR = "label-sample"  # the labelers' folder, inside the page set unless -o says otherwise
LIST_FILE = "pages.csv"

_README = """# Pages to label

quantgate drew these {n_pages} pages ({n_docs} whole documents, seed {seed}) at random from the page set's
held-out pages. Write the markdown truth of each page in `pages.csv` into a file named as its `truth_file`
column (`<page_id>.md`), then import it: `quantgate pages import SOURCES -o SET --truth THIS_FOLDER`.

- Label every page on the list, and only from the page image. The verdict uses these pages because they were
  drawn at random; a page left out, or one swapped for another, makes them a hand-picked set, which the verdict
  does not use to tighten its bound.
- Do not draft the truth from a model's output (the candidate's or the baseline's) and correct it: truth copied
  from a model's output agrees with that model's mistakes and understates its damage.
"""


def _lines_sha256(items: list[str]) -> str:
    return hashlib.sha256("".join(f"{i}\n" for i in sorted(items)).encode("utf-8")).hexdigest()


def heldout_documents(ps: PageSet) -> dict[str, list[str]]:
    """Held-out document → its page ids (in page-set order): what a draw is made from."""
    docs: dict[str, list[str]] = {}
    for p in ps.split("heldout"):
        docs.setdefault(p.document, []).append(p.id)
    return docs


def draw(ps: PageSet, n: int, seed: int, list_file: str = "") -> LabelSample:
    """``n`` held-out documents at random (see the module docstring), as the record ``pageset.json`` keeps."""
    docs = heldout_documents(ps)
    if n < 1 or n > len(docs):
        raise UsageError(f"-n {n}: {ps.root} has {len(docs)} held-out document(s); ask for 1 to {len(docs)} "
                         "(whole documents are drawn)")
    order = sorted(docs, key=lambda d: (hashlib.sha256(f"label:{seed}:{d}".encode()).hexdigest(), d))
    chosen = sorted(order[:n])
    ids = sorted(i for d in chosen for i in docs[d])
    return LabelSample(seed=seed, n_documents=n, documents=chosen, page_ids=ids, population_documents=len(docs),
                       population_sha256=_lines_sha256(list(docs)), sha256=_lines_sha256(ids), list_file=list_file)


def relative_to(path: Path, root: Path) -> str | None:
    try:
        return Path(path).resolve().relative_to(Path(root).resolve()).as_posix()
    except ValueError:
        return None


def _same_draw(a: LabelSample, b: LabelSample) -> bool:
    return a.model_dump(exclude={"list_file"}) == b.model_dump(exclude={"list_file"})


def describe(s: LabelSample) -> str:
    return (f"{len(s.page_ids)} pages in {s.n_documents} document(s) of {s.population_documents}, seed {s.seed}, "
            f"list {s.list_file}")


def label_sample(root: Path, n: int, seed: int = 0, out: Path | None = None, overwrite: bool = False
                 ) -> tuple[LabelSample, bool]:
    """Draw ``n`` documents of the page set at ``root``, write the labelers' folder and record the draw in its
    ``pageset.json``. Returns (the draw, whether anything was written): the same draw already recorded is shown,
    not made again; another one is refused without ``overwrite`` (labels written for it would stop counting as
    the random sample)."""
    root = Path(root)
    ps = load_pageset(root)
    if ps.manifest is None:
        raise DataError(f"{root}: no {MANIFEST_FILE}, so there is nowhere to record the draw; import the page set "
                        "again with `quantgate pages import` (or make it with `quantgate pages synth`)")
    out = Path(out) if out is not None else root / LIST_DIR
    rel = relative_to(out / LIST_FILE, root)
    new = draw(ps, n, seed, list_file=rel if rel is not None else str(out / LIST_FILE))
    old = ps.manifest.label_sample
    if old is not None and not overwrite:
        if _same_draw(old, new):
            return old, False
        raise UsageError(f"{root / MANIFEST_FILE} already records a labeling draw ({describe(old)}); give "
                         "--overwrite to replace it (truth written for the old draw then no longer counts as the "
                         "random sample)")
    if out.exists() and (not out.is_dir() or any(out.iterdir())) and not overwrite:
        raise UsageError(f"{out}: exists and is not empty (labels may be in it); give another -o, or --overwrite")
    _write_list(ps, new, out)
    # 2 is the schema that holds a draw; a newer manifest keeps its own version (and what it records)
    manifest = ps.manifest.model_copy(update={"schema_version": max(2, ps.manifest.schema_version),
                                              "label_sample": new})
    atomic_write_json(root / MANIFEST_FILE, manifest.model_dump())
    return new, True


def _write_list(ps: PageSet, s: LabelSample, out: Path) -> None:
    """The labelers' folder, made beside and renamed into place so a failure leaves no half-written list."""
    tmp = out.with_name(f".{out.name}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    (tmp / "images").mkdir(parents=True)
    try:
        by_id = ps.by_id()
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(["page_id", "document", "image", "truth_file"])
        for pid in s.page_ids:
            page = by_id[pid]
            src = ps.image_path(page)
            image = f"images/{pid}{src.suffix}"
            shutil.copyfile(src, tmp / image)
            w.writerow([pid, page.document, image, f"{pid}.md"])
        atomic_write_text(tmp / LIST_FILE, buf.getvalue())
        atomic_write_text(tmp / "README.md", _README.format(n_pages=len(s.page_ids), n_docs=s.n_documents,
                                                            seed=s.seed))
        if out.exists():
            shutil.rmtree(out) if out.is_dir() else out.unlink()
        tmp.rename(out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


@dataclass(frozen=True)
class SampleStatus:
    """What a verdict needs of the draw: the drawn pages that have truth (``labeled``) and, when they cannot stand
    as the random sample, why (``problem``; None: they can)."""

    draw: LabelSample | None
    labeled: frozenset[str]
    problem: str | None
    broken: bool = False  # a draw is recorded but is not the draw it describes (edited, or its population changed)

    @property
    def at_random(self) -> bool:
        return self.problem is None


def sample_status(ps: PageSet) -> SampleStatus:
    """The recorded draw checked against the set: drawn again from its held-out documents (the record must be
    that draw, unedited), and every drawn page labeled."""
    s = ps.manifest.label_sample if ps.manifest is not None else None
    if s is None:
        return SampleStatus(None, frozenset(), "no labeling draw recorded (`quantgate pages label-sample`)")
    where = ps.root / MANIFEST_FILE
    docs = heldout_documents(ps)
    again = (f"draw again (`quantgate pages label-sample {ps.root} -n {s.n_documents} --sample-seed {s.seed} "
             "--overwrite`, then label the pages it lists) or remove label_sample from it (the truth then counts as "
             "hand-picked)")
    if _lines_sha256(list(docs)) != s.population_sha256:
        return SampleStatus(s, frozenset(), f"{where}: the held-out documents changed since the draw "
                            f"({s.population_documents} then, {len(docs)} now); {again}", broken=True)
    if s.n_documents > len(docs) or not _same_draw(s, draw(ps, s.n_documents, s.seed)):
        return SampleStatus(s, frozenset(), f"{where}: label_sample is not the draw its seed makes (edited?); "
                            f"{again}", broken=True)
    by_id = ps.by_id()
    labeled = frozenset(i for i in s.page_ids if by_id[i].truth is not None)
    missing = [i for i in s.page_ids if i not in labeled]
    if missing:
        return SampleStatus(s, labeled, f"{len(missing)} of the {len(s.page_ids)} drawn pages have no truth yet "
                            f"({', '.join(missing[:5])}{' …' if len(missing) > 5 else ''}); label them all")
    return SampleStatus(s, labeled, None)


def checked_sample_status(ps: PageSet) -> SampleStatus:
    """:func:`sample_status` for a verdict that judges pages without truth (a study's, ``compare --pages``): a
    draw recorded but edited or stale is refused (DataError naming pageset.json) rather than quietly judged as
    hand-picked truth — a record that says "random" and is not would otherwise go unnoticed. No draw, or one not
    yet fully labeled, is the caller's note (``problem``)."""
    status = sample_status(ps)
    if status.broken:
        raise DataError(str(status.problem))
    return status
