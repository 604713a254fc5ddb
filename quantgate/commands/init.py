"""``quantgate init``: a commented study YAML from a checkpoint and pages, and the next command."""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

from quantgate.commands._args import existing_path


def register(sub) -> None:
    from quantgate.commands.pages import add_import_flags

    i = sub.add_parser("init", help="write a study YAML for your checkpoint and pages",
                       description="Inspect a checkpoint (architecture, size, which recipe presets apply, what stays "
                       "BF16) and pages (a page set, or images/PDFs that init imports into a page set beside the YAML, "
                       "as `pages import` does, with the same flags), then write a commented study YAML — variants, "
                       "metrics chosen from what the truth holds, margins, concurrency levels and SLO for the backend "
                       "— that `quantgate study` runs as written. Every path and the output folder are checked before "
                       "the model is loaded; a rerun reuses the pages it imported, or says --overwrite.",
                       epilog="example: quantgate init --model ./ckpt --pages ./pdfs --truth ./md -o study.yaml "
                       "(to try it: --model quantgate/assets/reader, the bundled reader)")
    i.add_argument("--model", required=True, type=existing_path, help="BF16 checkpoint folder (safetensors)")
    i.add_argument("--pages", required=True, type=existing_path,
                   help="a page set (pages.jsonl) or images/PDFs (a file or a folder) to import")
    add_import_flags(i)
    i.add_argument("--pages-out", type=Path, help="where imported pages go (default: pages/ beside the YAML)")
    i.add_argument("--backend", choices=["transformers", "vllm", "openai"], default="transformers",
                   help="how variants are served (default transformers: CPU or one GPU; vllm for speed)")
    i.add_argument("--variants", help="comma list of recipe presets besides bf16 (default: fp8-dynamic, nvfp4, mixed "
                   "where they apply)")
    i.add_argument("--name", help="study name (default: the model folder's name)")
    i.add_argument("-o", "--output", type=Path, default=Path("study.yaml"), help="YAML to write (default study.yaml)")
    i.add_argument("--overwrite", action="store_true", help="replace an existing YAML and import the pages again")
    i.set_defaults(func=cmd_init)


def cmd_init(a: argparse.Namespace) -> int:
    from quantgate.errors import UsageError
    from quantgate.study.init import (
        ImportRequest,
        check_variants,
        inspect_model,
        pages_target,
        prepare_pages,
        render_study,
        write_study,
    )

    # everything that can be refused from the files alone, before the model is inspected (seconds to minutes)
    if a.output.exists() and not a.overwrite:
        raise UsageError(f"-o {a.output}: exists (an earlier init?); pass --overwrite to write it again, or choose "
                         "another path")
    if not a.model.is_dir():
        raise UsageError(f"--model {a.model}: not a folder; give a Hugging Face checkpoint folder (config.json + "
                         "*.safetensors)")
    req = ImportRequest(truth=a.truth, checks=a.checks, parsebench=a.parsebench,
                        calibration_fraction=a.calibration_fraction, split_seed=a.split_seed,
                        document_pattern=a.document_pattern, tags=a.tag)
    # the truth JSON, the checks and the rules, as the import would read them (a rerun's too): refused before the model
    target, reuse = pages_target(a.pages, a.output.resolve().parent, req, import_to=a.pages_out,
                                 overwrite=a.overwrite)
    variants = [v.strip() for v in a.variants.split(",") if v.strip() and v.strip() != "bf16"] if a.variants else None
    mf = inspect_model(a.model)
    check_variants(mf, variants)  # before importing anything
    print(f"model: {mf.architecture}, {mf.params / 1e6:,.1f} M parameters, {mf.weights_bytes / 1e6:,.1f} MB; "
          f"presets that apply: {', '.join(sorted(mf.presets))}; vision encoder + projector: {mf.vision_bf16} modules")
    made = _missing_folders(a.output.resolve().parent)
    try:
        pf = prepare_pages(a.pages, target, a.model, req, reuse=reuse, overwrite=a.overwrite)
    except BaseException:
        _remove_if_empty(made)  # a refused init leaves no empty -o folder behind
        raise
    if pf.reused:
        print(f"pages: reusing {pf.path}, imported earlier from the same files and split (--overwrite imports again)")
    elif pf.imported:
        print(f"imported: {pf.imported}")
    print(f"pages: {pf.n} ({pf.heldout} held out, {pf.heldout_truth} with truth, {pf.heldout_checks} checks; "
          f"{pf.calibration} for calibration)")
    for w in pf.warnings:
        print(f"warning: {w}")
    try:
        text = render_study(mf, pf, a.output, a.backend, variants, a.name)
        write_study(a.output, text, overwrite=a.overwrite)
    except BaseException:
        if pf.imported and not pf.reused:  # no YAML: the pages imported for it go too
            shutil.rmtree(pf.path, ignore_errors=True)
        _remove_if_empty(made)
        raise
    print(f"wrote {a.output}; next: quantgate study {a.output}")
    return 0


def _missing_folders(folder: Path) -> list[Path]:
    """The folders above the YAML that do not exist yet, deepest first: init creates them and removes them again,
    if still empty, when it is refused."""
    out = []
    while not folder.exists():
        out.append(folder)
        folder = folder.parent
    return out


def _remove_if_empty(folders: list[Path]) -> None:
    for f in folders:  # deepest first; one the user filled meanwhile stays
        try:
            f.rmdir()
        except OSError:
            return
