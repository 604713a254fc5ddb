"""A stand-in for olmOCR-bench's sample where ``../shared`` is absent: pages whose checks are mostly ``absent``
rules (a header, a footer, a watermark an output must leave out) beside a few ``present`` ones, plus one blank
page whose only check is upstream's ``baseline`` (an output of at most 10 characters passes) — the mix on which
reading nothing already passes many checks. Imported as a user imports olmOCR-bench (``pages import --checks``),
from tiny PNGs named ``<pdf stem>_pg1.png`` so each check's pdf and page name its image."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

PRESENT = ("quarterly revenue rose in every region", "the committee approved the second budget")
ABSENT = ("CONFIDENTIAL DRAFT", "Page 1 of 40", "Scanned by the county archive")


@dataclass(frozen=True)
class ChecksSet:
    """The imported page set, its page ids (the blank page last) and what a reader that reads every page writes."""

    root: Path
    ids: list[str]
    blank: str
    reader: dict[str, str]


def checks_pageset(folder: Path, n_pages: int = 40) -> ChecksSet:
    """``n_pages`` pages, each its own document, all held out: ``n_pages - 1`` with the two present and three
    absent checks (an empty output passes 3 of 5), and a blank page (an empty output passes it)."""
    from PIL import Image

    from quantgate.heldout.importer import ImportOptions, import_pages

    folder = Path(folder)
    images, lines = folder / "images", []
    images.mkdir(parents=True)
    stems = [f"doc{i:02d}" for i in range(n_pages - 1)] + ["blank"]
    for stem in stems:
        Image.new("RGB", (64, 64), "white").save(images / f"{stem}_pg1.png")
        if stem == "blank":
            lines.append({"pdf": f"{stem}.pdf", "page": 1, "id": f"{stem}_b", "type": "baseline", "max_length": 10})
            continue
        lines += [{"pdf": f"{stem}.pdf", "page": 1, "id": f"{stem}_p{k}", "type": "present", "text": t}
                  for k, t in enumerate(PRESENT)]
        lines += [{"pdf": f"{stem}.pdf", "page": 1, "id": f"{stem}_a{k}", "type": "absent", "text": t}
                  for k, t in enumerate(ABSENT)]
    checks = folder / "checks.jsonl"
    checks.write_text("".join(json.dumps(x) + "\n" for x in lines), "utf-8")
    root = folder / "pages"
    import_pages([images], root, ImportOptions(checks_file=checks, calibration_fraction=0.0))
    ids = [f"{s}_pg1" for s in stems]
    body = "\n\n".join(PRESENT)
    return ChecksSet(root, ids, ids[-1], {i: "" if i == ids[-1] else body for i in ids})


def write_outputs(folder: Path, texts: dict[str, str]) -> Path:
    """A folder of ``<page id>.md`` files, as any parser writes them."""
    folder = Path(folder)
    folder.mkdir(parents=True)
    for pid, text in texts.items():
        (folder / f"{pid}.md").write_text(text, "utf-8")
    return folder
