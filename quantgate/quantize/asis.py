"""A recipe that quantizes nothing (bf16): the variant is the source as it is, its files put into the build folder
without loading the model — a hard link on one filesystem (no byte written), else a copy hashed as it is copied.

Why not re-save it: loading and re-saving a 4B checkpoint through transformers took 38 s on an H200 machine to
produce the weights the source already holds. Why never a symbolic link: the gate, signing and the server read the
variant folder's own plain files, and a link would point them out of it at a file that can change."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from quantgate.quantize import store
from quantgate.quantize.plan import Plan
from quantgate.recipes import LoadedRecipe
from quantgate.schema.variant import VariantInputs

MANIFEST = "quantgate.json"
# Source files besides the weights that decide the result: config, tokenizer, processor, chat template,
# remote code. Pickled weights (.bin, .pt) are never loaded, so never hashed.
MODEL_FILE_SUFFIXES = {".json", ".jinja", ".txt", ".model", ".tiktoken", ".py"}


def quantizes_nothing(recipe: LoadedRecipe, plan: Plan) -> bool:
    return recipe.recipe is not None and not any(f != "bf16" for f in plan.formats.values())


def source_names(model_dir: Path) -> list[str]:
    """The source files such a variant serves: its safetensors weights and the files transformers and vLLM read
    (config, tokenizer, processor, template) — each one the input fingerprint hashed. Remote code is left out: it
    only runs with trust_remote_code, which serving a plain BF16 checkpoint never needs."""
    return sorted(f.name for f in Path(model_dir).iterdir()
                  if f.is_file() and not f.name.startswith(".") and f.name != MANIFEST
                  and (f.suffix == ".safetensors" or f.suffix in MODEL_FILE_SUFFIXES - {".py"}))


def serve_source_as_is(model_dir: Path, tmp: Path, inputs: VariantInputs, name: str,
                       log: Callable[[str], None], note: Callable[[str], None]) -> None:
    """The source's files into the build folder ``tmp``: hard-linked (same inode, so their hashes are the
    fingerprint's), else — the source on another filesystem — copied and each copy checked against the hash the
    fingerprint took (one read of the weights; a source that changed meanwhile is refused by name)."""
    names = source_names(model_dir)
    if store.link_files(model_dir, tmp, names, follow=True):
        note("linked, not copied")
        log(f"{name} quantizes nothing: the source files hard-linked (no weights loaded or copied)")
        return
    known = {**inputs.model_files, **inputs.model_weights}
    store.copy_verified(model_dir, tmp, {n: known[n] for n in names})
    note("copied: the source is on another filesystem")
    log(f"{name} quantizes nothing, but {model_dir} lies on another filesystem than {tmp.parent} (no hard link "
        "reaches it): its files copied byte for byte and checked against their fingerprinted hashes (no weights "
        "loaded or re-saved)")
