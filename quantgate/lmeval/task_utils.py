"""Functions lm-eval calls from the page task's YAML."""

from __future__ import annotations


def doc_to_image(doc: dict) -> list:
    from PIL import Image

    with Image.open(doc["image"]) as im:
        return [im.convert("RGB")]
