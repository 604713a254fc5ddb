"""Where quantgate's fonts come from: installed packages, never copies in the tree.

DejaVu (synthetic pages and the bundled reader's training pages): first ``QUANTGATE_FONT_DIR`` when set,
then Debian's ``fonts-dejavu-core`` (``make system`` installs it; its files, DejaVu 2.37, are the ones the
demo's pages and the reader were made with), then the DejaVu that matplotlib ships (2.35 in matplotlib
3.11: other files; the 90 synthetic pages compared rendered byte-identical, which no test promises for
every glyph, so the page set's notes say where the fonts came from). CJK (reports): Debian's
``fonts-wqy-zenhei``, which ``make system`` installs, or another CJK font fontconfig knows."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
from pathlib import Path

from quantgate.errors import QuantgateError

FONT_DIR_ENV = "QUANTGATE_FONT_DIR"
CJK_FONT_ENV = "QUANTGATE_CJK_FONT"
DEBIAN_DEJAVU = Path("/usr/share/fonts/truetype/dejavu")
CJK_FILES = (Path("/usr/share/fonts/truetype/wqy/wqy-zenhei.ttc"),  # fonts-wqy-zenhei: what `make system` installs
             Path("/usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc"),  # fonts-noto-cjk
             Path("/usr/share/fonts/truetype/wqy/wqy-microhei.ttc"))


def matplotlib_dejavu() -> Path | None:
    """matplotlib's bundled DejaVu folder, found without importing matplotlib (slow to import)."""
    spec = importlib.util.find_spec("matplotlib")
    for root in (spec.submodule_search_locations or []) if spec else []:
        d = Path(root) / "mpl-data" / "fonts" / "ttf"
        if d.is_dir():
            return d
    return None


def dejavu_dirs() -> list[str]:
    """Folders to look for DejaVu files in, first match wins."""
    env = os.environ.get(FONT_DIR_ENV, "").strip()
    mpl = matplotlib_dejavu()
    return [d for d in (env or None, str(DEBIAN_DEJAVU), str(mpl) if mpl else None) if d]


def dejavu_file(name: str, dirs: list[str] | None = None) -> Path | None:
    for d in dejavu_dirs() if dirs is None else dirs:
        p = Path(d) / name
        if p.is_file():
            return p
    return None


def dejavu_notes(names: list[str], dirs: list[str] | None = None) -> list[str]:
    """A note for a page set when some of ``names`` come from elsewhere than Debian's package."""
    found = {dejavu_file(n, dirs) for n in names} - {None}
    other = sorted({str(p.parent) for p in found if p.parent != DEBIAN_DEJAVU})
    if not other:
        return []
    return [f"font files from {', '.join(other)}, not Debian's fonts-dejavu-core: another DejaVu release may "
            "render some glyphs differently"]


def cjk_font() -> Path | None:
    """A font file with Chinese and Japanese glyphs, or None."""
    env = os.environ.get(CJK_FONT_ENV, "").strip()
    if env:
        return Path(env) if Path(env).is_file() else None
    for p in CJK_FILES:
        if p.is_file():
            return p
    fc = shutil.which("fc-list")
    if fc:
        try:
            out = subprocess.run([fc, ":lang=zh", "file"], capture_output=True, text=True, timeout=30).stdout
        except (OSError, subprocess.TimeoutExpired):
            return None
        files = sorted(line.split(":")[0].strip() for line in out.splitlines() if line.strip())
        if files:
            return Path(files[0])
    return None


def require_cjk_font() -> Path:
    p = cjk_font()
    if p is None:
        env = os.environ.get(CJK_FONT_ENV, "").strip()
        where = f"{CJK_FONT_ENV}={env} is not a file; " if env else ""
        raise QuantgateError(f"no CJK font found: {where}run `make system` (installs fonts-wqy-zenhei), or "
                             f"`apt-get install fonts-wqy-zenhei`, or set {CJK_FONT_ENV} to a .ttf/.ttc/.otf file")
    return p
