"""Model-folder checks every stage that loads a checkpoint shares: safetensors only, no remote code."""

from __future__ import annotations

from pathlib import Path

from quantgate.errors import InputError, UnsafeInputError


def check_model_dir(path: Path, trust_remote_code: bool = False) -> None:
    """Refuse what is not a safetensors model folder before any server spends minutes on it."""
    import json

    path = Path(path)
    if not (path / "config.json").is_file():
        raise InputError(f"{path}: not a model folder (no config.json)")
    if not any(path.glob("*.safetensors")):
        if any(path.glob("*.bin")) or any(path.glob("*.pt")) or any(path.glob("*.pth")):
            raise UnsafeInputError(f"{path}: only pickle weights (.bin/.pt); quantgate loads safetensors only "
                                   "— convert them first (e.g. save_pretrained(safe_serialization=True))")
        raise InputError(f"{path}: no *.safetensors weights")
    try:
        cfg = json.loads((path / "config.json").read_text("utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise InputError(f"{path / 'config.json'}: not valid JSON ({e})") from None
    if "auto_map" in cfg and not trust_remote_code:
        raise UnsafeInputError(f"{path / 'config.json'}: has 'auto_map' (custom code); refusing to run it — "
                               "pass --trust-remote-code if you have reviewed that code")
