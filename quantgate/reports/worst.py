"""The worst pages as report.html shows them: each page's image embedded (a thumbnail that
opens to the page at up to FULL_PX), long texts folded, differences marked only where difflib stays fast, and a
line for each variant without worst pages saying why. Everything stays inside the one HTML file."""

from __future__ import annotations

import base64
import io
from dataclasses import dataclass
from pathlib import Path

from quantgate.schema.summary import Summary, WorstPage

THUMB_PX = (280, 380)
FULL_PX = 1600  # the long side of the "full" image: readable, and three pages a variant keep the file small
FOLD_CHARS = 1200  # longer texts show this much, the rest behind a click
DIFF_CHARS = 20_000  # difflib is quadratic in the worst case: longer pairs are shown unmarked, and say so


@dataclass(frozen=True)
class PageImage:
    thumb: str | None  # data: URI
    full: str | None
    note: str | None  # why there is no image


def _jpeg(img, box) -> str:
    im = img.copy()
    im.thumbnail(box)
    buf = io.BytesIO()
    im.save(buf, format="JPEG", quality=82)
    return "data:image/jpeg;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def page_image(w: WorstPage, root: Path | None) -> PageImage:
    """The page's image as embedded JPEGs, or the reason it is not shown (the row stays)."""
    if w.image is None:
        return PageImage(None, None, "no page image recorded (a study made before reports showed them)")
    path = Path(w.image) if Path(w.image).is_absolute() or root is None else Path(root) / w.image
    try:
        from PIL import Image

        with Image.open(path) as im:
            im.load()
            rgb = im.convert("RGB")
    except Exception as e:  # noqa: BLE001 — PIL raises many types for a missing, cut or foreign file
        return PageImage(None, None, f"page image not shown: {path} cannot be read ({type(e).__name__}: {e})")
    return PageImage(_jpeg(rgb, THUMB_PX), _jpeg(rgb, (FULL_PX, FULL_PX)), None)


def diffable(a: str | None, b: str | None) -> bool:
    return len(a or "") <= DIFF_CHARS and len(b or "") <= DIFF_CHARS


def no_worst_lines(r: Summary) -> list[str]:
    """A line per candidate that has no worst page: no page scored worse than the baseline on the metric."""
    metric = r.study["metrics"][0]
    out = []
    for v in r.variants:
        if v.name == r.baseline or r.worst_pages.get(v.name):
            continue
        n = next((x.n for x in r.verdicts if x.variant == v.name and x.metric == metric
                  and x.tag is None), None)
        on = f" on any of the {n} pages compared" if n is not None else ""
        out.append(f"{v.name}: no worst pages — no page scored worse than {r.baseline} on {metric}{on}")
    return out
