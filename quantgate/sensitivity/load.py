"""A sensitivity file read back (``quantgate sensitivity`` writes it): complete, and measured on the weights it
is used with."""

from __future__ import annotations

from pathlib import Path

from quantgate.errors import InputError
from quantgate.io.fingerprint import weights_fingerprint
from quantgate.schema.base import parse_record
from quantgate.schema.load import load_json
from quantgate.schema.sensitivity import SensitivityFile


def load_sensitivity(path: str | Path) -> SensitivityFile:
    path = Path(path)
    if not path.is_file():
        raise InputError(f"{path}: no such sensitivity file (make one with `quantgate sensitivity`)")
    obj = load_json(path, "sensitivity file")  # under the loader's limits: one DataError naming the file and line
    if not isinstance(obj, dict) or obj.get("kind") != "quantgate.sensitivity":
        raise InputError(f"{path}: not a quantgate sensitivity file (kind is not 'quantgate.sensitivity')")
    s = parse_record(SensitivityFile, obj, where=str(path))
    missing = [(g.name, f) for g in s.groups for f in s.formats if (g.name, f) not in s.table()]
    if missing:
        raise InputError(f"{path}: incomplete — no measurement for {missing[0][0]} × {missing[0][1]} "
                         f"({len(missing)} missing); rerun `quantgate sensitivity` with the same -o to finish it")
    return s


def check_model(sens: SensitivityFile, model_dir: Path, where: str) -> None:
    """Refuse a sensitivity file measured on other weights than ``model_dir``'s."""
    got = weights_fingerprint(Path(model_dir))
    if got != sens.model_weights_sha256:
        raise InputError(f"{where}: measured on other weights (sha256 {sens.model_weights_sha256[:12]}…, from "
                         f"{sens.model}) than {model_dir} (sha256 {got[:12]}…); run `quantgate sensitivity "
                         f"{model_dir} ...` for this model")
