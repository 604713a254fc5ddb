"""Page sets where only some pages have truth, as a team's own pages come: a synthesized set with the truth taken
off every page outside ``keep`` (the files stay, unlisted, so a stub server can still answer from the full set)."""

from __future__ import annotations

import json
from pathlib import Path

from quantgate.io.fileio import sha256_file


def drop_truth(root: Path, keep: set[str]) -> int:
    """Take the truth off every page of the set at ``root`` whose id is not in ``keep``; returns how many kept it.
    The manifest's ``pages_sha256`` is brought up to date, as a re-import without their truth would leave it."""
    root = Path(root)
    lines, kept = [], 0
    for line in (root / "pages.jsonl").read_text("utf-8").splitlines():
        rec = json.loads(line)
        if rec["id"] in keep:
            kept += rec["truth"] is not None
        else:
            rec.update(truth=None, truth_sha256=None)
        lines.append(json.dumps(rec) + "\n")
    (root / "pages.jsonl").write_text("".join(lines), "utf-8")
    man = json.loads((root / "pageset.json").read_text("utf-8"))
    man["pages_sha256"] = sha256_file(root / "pages.jsonl")
    (root / "pageset.json").write_text(json.dumps(man, indent=2), "utf-8")
    return kept
