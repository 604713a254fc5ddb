from __future__ import annotations

import argparse
import sys
from pathlib import Path

from quantgate.commands._args import (
    existing_path,
    nonnegative_int,
    page_size,
    positive_float,
    positive_int,
    print_json,
    unit_interval,
)
from quantgate.commands._fields import deprecated, yaml_flag


def add_import_flags(p: argparse.ArgumentParser, *old_seed: str) -> None:
    """The flags that say how pages are imported, shared by `pages import` and `init` (which imports images or
    PDFs given as --pages): one name, one rule, one help text each."""
    p.add_argument("--truth", type=existing_path, help="folder of <page id>.md or .txt ground-truth files, or "
                   "OmniDocBench's JSON (layout_dets; page id = image file stem), which also adds the omnidoc_* metrics")
    p.add_argument("--checks", type=existing_path, action="append",
                   help="olmOCR-bench style JSONL of fact checks; repeat for several files (olmOCR-bench ships one "
                   "per check type)")
    p.add_argument("--parsebench", type=existing_path, metavar="FILE.jsonl",
                   help="a ParseBench dimension file (one rule a line, pages by pdf and page): each page's content-"
                   "faithfulness, semantic-formatting and chart-point rules and table truth, scored by "
                   "parsebench_content, parsebench_formatting, parsebench_charts and parsebench_tables; other "
                   "dimensions' lines are left out")
    p.add_argument("--calibration-fraction", type=unit_interval, default=0.2,
                   help="share of documents for calibration, in [0, 1]: the split is by document (a seeded hash of "
                   "it), so no document is in both; 1 puts every page in calibration (default 0.2)")
    deprecated(p, "--split-seed", *old_seed, type=nonnegative_int, default=0,
               help="seeds the calibration/heldout split, >= 0 (default 0)")
    p.add_argument("--document-pattern", metavar="REGEX", help="group images into documents by this regular "
                   "expression, searched in each file name: its first group names the document (e.g. '^(.+)_p[0-9]+'); "
                   "every image name must match. Default: the sub-folder, else each image its own document")
    p.add_argument("--tag", action="append", default=[], help="tag every imported page (repeatable)")


def register(sub) -> None:
    p = sub.add_parser("pages", help="page sets: import, synth, check, stats, label-sample",
                       description="Build and inspect page sets (pages.jsonl + PNG images + truth).")
    ps = p.add_subparsers(dest="pages_verb", metavar="ACTION", required=True, parser_class=type(p))

    i = ps.add_parser("import", help="import images/PDFs (+ truth, checks) into a page set",
                      description="Import PNG/JPEG/TIFF/WebP images, folders of them and PDFs (every page rendered, "
                      "~4 MP by default). Page ids: file stem, or <stem>_pg<N> for PDF pages (olmOCR-bench naming). "
                      "Each page belongs to a document: its PDF; for images, --document-pattern's first group in the "
                      "file name, else the sub-folder, else the image alone. Splits documents into calibration and "
                      "heldout by a seeded hash of the document, so no document is in both.")
    i.add_argument("sources", nargs="+", type=existing_path, metavar="SRC", help="images, PDFs, or folders of them")
    i.add_argument("-o", "--output", required=True, type=Path, help="page-set folder to create")
    add_import_flags(i, "--seed")  # `pages import --seed` before the split's seed said what it seeds
    g = i.add_mutually_exclusive_group()
    g.add_argument("--dpi", type=positive_float, help="render PDFs at this resolution")
    g.add_argument("--megapixels", type=positive_float, default=4.0, help="render PDF pages to about this size (default 4)")
    i.add_argument("--max-pixels", type=positive_int, default=64_000_000, help="refuse images larger than this (default 64e6)")
    i.add_argument("--max-pdf-pages", type=positive_int, default=2000, help="refuse PDFs with more pages (default 2000)")
    i.add_argument("--overwrite", action="store_true", help="replace an existing non-empty output folder")
    i.add_argument("--follow-outside-links", action="store_true", help="copy truth files and images in a source "
                   "folder that are links to files outside their folder (with a warning) instead of refusing them")
    i.set_defaults(func=cmd_import)

    s = ps.add_parser("synth", help="render synthetic pages with exact markdown truth",
                      description="Render N synthetic markdown documents (headings, paragraphs, lists, tables, "
                      "numbers; several fonts and sizes; light noise) to page images. Deterministic for a seed.")
    from quantgate.schema.study import SynthPages

    s.add_argument("-o", "--output", required=True, type=Path, help="page-set folder to create")
    yaml_flag(s, SynthPages, "n", default=50, default_says="50; a study's synth block has no default")
    yaml_flag(s, SynthPages, "seed")
    yaml_flag(s, SynthPages, "pages_per_document")
    yaml_flag(s, SynthPages, "profile")
    # not made from pages.synth.calibration_fraction, whose [0, 1) keeps a study's pages held out: a set made
    # here may be only for calibrating (1 puts every page there)
    s.add_argument("--calibration-fraction", type=unit_interval, default=0.2, help="share of documents for "
                   "calibration, in [0, 1]; 1 makes a set only to calibrate on (default 0.2; a study's "
                   "pages.synth.calibration_fraction is below 1)")
    yaml_flag(s, SynthPages, "noise")
    s.add_argument("--page-size", type=page_size, help="fixed page size WxH in pixels, e.g. 1700x2400 (about 4 MP, "
                   "a letter page at 200 dpi) for speed runs; text scales with the width")
    s.add_argument("--overwrite", action="store_true", help="replace an existing non-empty output folder")
    s.set_defaults(func=cmd_synth)

    c = ps.add_parser("check", help="verify hashes, files, encodings and calibration/heldout leakage")
    c.add_argument("pageset", type=existing_path, help="page-set folder")
    c.set_defaults(func=cmd_check)

    ls = ps.add_parser("label-sample", help="draw whole documents at random for the team to write truth for",
                       description="Draw N held-out documents at random (seeded; whole documents, the unit pages "
                       "fail in), write the list the labelers get (pages.csv, the images, README.md) and record the "
                       "draw in pageset.json, so a verdict can check that the labeled pages are this random sample. "
                       "Write truth from the page image only, never by correcting a model's output.")
    ls.add_argument("pageset", type=existing_path, help="page-set folder")
    ls.add_argument("-n", type=positive_int, required=True, metavar="N", help="held-out documents to draw")
    ls.add_argument("--sample-seed", type=nonnegative_int, default=0, help="draw seed, >= 0 (default 0)")
    ls.add_argument("-o", "--output", type=Path, help="the labelers' folder (default PAGESET/label-sample)")
    ls.add_argument("--overwrite", action="store_true", help="replace a different draw already recorded, and a "
                    "non-empty output folder")
    ls.set_defaults(func=cmd_label_sample)

    st = ps.add_parser("stats", help="counts per split and tag, truth length, image sizes")
    st.add_argument("pageset", type=existing_path, help="page-set folder")
    st.add_argument("--json", action="store_true", help="print the statistics as JSON")
    st.set_defaults(func=cmd_stats)


def _progress(total: int | None, desc: str):
    from tqdm import tqdm

    bar = tqdm(total=total, desc=desc, unit="page", file=sys.stderr, disable=None)
    return bar, (lambda _pid: bar.update(1))


def cmd_import(a: argparse.Namespace) -> int:
    from PIL import Image

    from quantgate.heldout.importer import ImportOptions, import_pages
    from quantgate.study.init import truth_folder

    # PIL's decompression-bomb guard is process-wide: this process imports pages, so it guards at --max-pixels
    Image.MAX_IMAGE_PIXELS = a.max_pixels

    # OmniDocBench's JSON is read whole before any page is imported, and staged as the truth folder it stands for
    with truth_folder(a.truth) as truth:
        opts = ImportOptions(truth_dir=truth, checks_file=a.checks, dpi=a.dpi, megapixels=a.megapixels,
                             calibration_fraction=a.calibration_fraction, seed=a.split_seed, max_pixels=a.max_pixels,
                             max_pdf_pages=a.max_pdf_pages, tags=a.tag, follow_outside_links=a.follow_outside_links,
                             document_pattern=a.document_pattern)
        if a.parsebench:  # every rule checked as scoring reads it, before any page is written (file:line, type)
            from quantgate.scoring.parsebench.dataset import read_rules

            rules = read_rules(a.parsebench)
            opts.parsebench = rules.by_page
            for kind, n in sorted(rules.skipped.items()):
                print(f"note: {a.parsebench}: {n} {kind} rule(s) left out (another ParseBench dimension)",
                      file=sys.stderr)
        if a.checks:  # every check as scoring reads it, before any page is written (one DataError: file:line, id)
            from quantgate.io.fileio import read_jsonl
            from quantgate.scoring.olmocr_checks import validate_checks

            validate_checks((f"{f}:{no}", c) for f in (a.checks if isinstance(a.checks, list) else [a.checks])
                            for no, c in read_jsonl(f, final_newline_optional=True))
        bar, cb = _progress(None, "importing")
        try:
            rep = import_pages(a.sources, a.output, opts, overwrite=a.overwrite, progress=cb)
        finally:
            bar.close()
        staged = str(truth) if truth != a.truth else None
    for w in rep.warnings:
        print(f"warning: {w.replace(staged, str(a.truth)) if staged else w}", file=sys.stderr)
    print(f"{a.output}: {rep.n_pages} pages ({rep.n_truth} with truth, {rep.n_checks} checks, "
          f"{rep.n_neither} with neither)")
    return 0


def cmd_synth(a: argparse.Namespace) -> int:
    from quantgate.heldout.synth import synth_pages

    bar, cb = _progress(a.n, "rendering")
    try:
        synth_pages(a.output, a.n, seed=a.seed, calibration_fraction=a.calibration_fraction, profile=a.profile,
                    noise=a.noise, overwrite=a.overwrite, page_size=a.page_size,
                    pages_per_document=a.pages_per_document, progress=cb)
    finally:
        bar.close()
    docs = -(-a.n // a.pages_per_document)
    print(f"{a.output}: {a.n} synthetic pages in {docs} document(s) (seed {a.seed}, profile {a.profile})")
    return 0


def cmd_check(a: argparse.Namespace) -> int:
    from quantgate.errors import InputError
    from quantgate.heldout.check import check_pageset
    from quantgate.io.pageset import load_pageset
    from quantgate.scoring.olmocr_checks import pageset_checks, validate_checks

    ps = load_pageset(a.pageset)
    validate_checks(pageset_checks(a.pageset))  # as scoring reads them: one DataError naming file:line and check id
    problems = check_pageset(ps)
    for pr in problems:
        print(pr, file=sys.stderr)
    if problems:
        raise InputError(f"{a.pageset}: {len(problems)} problem(s), listed above")
    labeled = sum(p.truth is not None for p in ps.pages)  # a set may mix pages with and without truth
    print(f"{a.pageset}: {len(ps.pages)} pages OK (hashes, files, encodings, no leakage between splits); {labeled} "
          f"with truth, {len(ps.pages) - labeled} without")
    if ps.manifest is not None and ps.manifest.label_sample is not None:
        from quantgate.heldout.label import describe, sample_status

        st = sample_status(ps)
        print(f"labeling draw: {describe(ps.manifest.label_sample)}; "
              + ("every drawn page has truth" if st.at_random else str(st.problem)))
    return 0


def cmd_label_sample(a: argparse.Namespace) -> int:
    from quantgate.heldout.label import describe, label_sample, sample_status
    from quantgate.io.pageset import load_pageset

    s, wrote = label_sample(a.pageset, a.n, a.sample_seed, out=a.output, overwrite=a.overwrite)
    st = sample_status(load_pageset(a.pageset))
    print(f"{a.pageset}: {'drew' if wrote else 'already records this draw:'} {describe(s)}; "
          f"{len(st.labeled)} of them have truth")
    return 0


def cmd_stats(a: argparse.Namespace) -> int:
    from quantgate.heldout.check import pageset_stats
    from quantgate.io.pageset import load_pageset

    st = pageset_stats(load_pageset(a.pageset)).model_dump()
    if a.json:
        print_json(st)
    else:
        for k, v in st.items():
            print(f"{k:>20}: {v}")
    return 0
