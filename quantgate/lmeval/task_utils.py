"""Functions lm-eval calls from the page task's YAML (its ``utils.py`` passes the task folder)."""

from __future__ import annotations

from pathlib import Path

from quantgate.errors import InputError
from quantgate.io.fileio import sha256_bytes


def page_image(task_dir: Path, doc: dict) -> list:
    """The document's page image, by its path relative to the task folder, checked against the page's sha256."""
    import io

    from PIL import Image

    path = Path(doc["image"])
    if path.is_absolute():  # a task written before image paths were relative
        data = path.read_bytes()
    else:
        data = (Path(task_dir) / path).resolve().read_bytes()
    if doc.get("sha256") and sha256_bytes(data) != doc["sha256"]:
        raise InputError(f"{Path(task_dir) / path}: page {doc.get('doc_id')}'s image changed since the lm-eval task "
                         "was written (sha256 differs); rerun the study")
    with Image.open(io.BytesIO(data)) as im:
        return [im.convert("RGB")]
