"""Recipes: the per-layer format model, preset YAML files, and compilation to llmcompressor's
recipe format. Imports no other stage (and no torch)."""

from __future__ import annotations

from pathlib import Path

from quantgate.errors import InputError
from quantgate.recipes.model import (
    FORMATS,
    KINDS,
    NEEDS_CALIBRATION,
    PRESET,
    ModuleInfo,
    Recipe,
    resolve,
    to_llmcompressor,
)
from quantgate.schema.base import parse_record

PRESETS_DIR = Path(__file__).parent / "presets"

__all__ = ["FORMATS", "KINDS", "NEEDS_CALIBRATION", "PRESET", "LoadedRecipe", "ModuleInfo", "Recipe", "list_presets",
           "load_recipe", "resolve", "to_llmcompressor"]


class LoadedRecipe:
    """A quantgate recipe, or a raw llmcompressor recipe (``raw`` set, ``recipe`` None)."""

    def __init__(self, source: str, text: str, recipe: Recipe | None, raw: dict | None):
        self.source, self.text, self.recipe, self.raw = source, text, recipe, raw

    @property
    def name(self) -> str:
        return self.recipe.name if self.recipe else Path(self.source).stem


def list_presets() -> list[str]:
    return sorted(p.stem for p in PRESETS_DIR.glob("*.yaml"))


def _is_raw_llmcompressor(obj: dict) -> bool:
    # llmcompressor recipes are stages of modifiers: {<x>_stage: {<y>_modifiers: {...}}} or a
    # top-level "*Modifier" mapping; quantgate recipes have "name" and "rules".
    if "rules" in obj or "name" in obj:
        return False
    return any(k.endswith("_stage") or k.endswith("_modifiers") or k.endswith("Modifier") for k in obj)


def load_recipe(spec: str | Path) -> LoadedRecipe:
    """A preset name (``fp8-dynamic``) or a YAML file path."""
    spec = str(spec)
    path = PRESETS_DIR / f"{spec}.yaml" if (PRESETS_DIR / f"{spec}.yaml").is_file() else Path(spec)
    if not path.is_file():
        raise InputError(f"recipe {spec!r}: no such preset or file (presets: {', '.join(list_presets())})")
    from quantgate.schema.load import parse_yaml, read_regular

    raw = read_regular(path, "recipe")
    obj = parse_yaml(raw, str(path))  # under the loader's limits, one DataError naming the file and line
    text = raw.decode("utf-8").removeprefix("\ufeff")
    if not isinstance(obj, dict):
        raise InputError(f"{path}: a recipe is a YAML mapping")
    if _is_raw_llmcompressor(obj):
        return LoadedRecipe(str(path), text, None, obj)
    return LoadedRecipe(str(path), text, parse_record(Recipe, obj, where=str(path)), None)
