"""A study's synthesized page set: reused only while it is what the study's ``pages.synth`` asks for.

Synthesized pages are derived (seconds to remake), so a folder whose recorded ``SynthSpec`` differs
from the study's — or a quantgate synth set made before the spec was recorded — is rebuilt, with a
line in the log saying why. A folder quantgate did not synthesize (an imported set, the user's own
files) is never replaced: that is refused."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from quantgate.errors import InputError
from quantgate.heldout.synth import synth_pages
from quantgate.io.pageset import PAGES_FILE, load_pageset
from quantgate.schema.pages import SynthSpec

_SYNTH_PREFIX = "quantgate pages synth"


def ensure_synth_pages(out: Path, *, n: int, seed: int = 0, calibration_fraction: float = 0.2, profile: str = "doc",
                       noise: float = 0.03, width: int | None = None, page_size: tuple[int, int] | None = None,
                       pages_per_document: int = 1, log: Callable[[str], None] = print) -> bool:
    """Make ``out`` the page set these arguments synthesize; True when it was (re)built."""
    out = Path(out)
    want = SynthSpec(n=n, seed=seed, calibration_fraction=calibration_fraction, profile=profile, noise=noise,
                     width=width, page_size=list(page_size) if page_size else None,
                     pages_per_document=pages_per_document)
    if not (out / PAGES_FILE).exists():
        if out.is_dir() and any(out.iterdir()):
            raise InputError(f"{out}: holds files but no {PAGES_FILE}, so not a page set quantgate synthesized; "
                             "the study's pages.synth would replace it. Move it away")
        log(f"synthesizing {n} pages ({profile}) → {out}")
        synth_pages(out, n, seed=seed, calibration_fraction=calibration_fraction, profile=profile, noise=noise,
                    width=width, page_size=page_size, pages_per_document=pages_per_document)
        return True
    man = load_pageset(out).manifest
    if man is None or not man.created_by.startswith(_SYNTH_PREFIX):
        made = f"made by {man.created_by!r}" if man else "without a pageset.json"
        raise InputError(f"{out}: holds a page set quantgate did not synthesize ({made}); the study's pages.synth "
                         f"would replace it. Move it away, or point the study's pages.path at it")
    if man.synth == want:
        return False
    if man.synth is None:
        why = "it records no synth spec (made by an older quantgate)"
    else:
        old, new = man.synth.model_dump(), want.model_dump()
        why = "the study's pages.synth changed: " + ", ".join(f"{k} {old[k]} → {new[k]}" for k in new if old[k] != new[k])
    log(f"{out}: {why}; rebuilding it ({n} pages, synthesized pages are derived and cheap to remake)")
    synth_pages(out, n, seed=seed, calibration_fraction=calibration_fraction, profile=profile, noise=noise,
                width=width, page_size=page_size, pages_per_document=pages_per_document, overwrite=True)
    return True
