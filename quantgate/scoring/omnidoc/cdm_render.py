"""CDM's renderer (OmniDocBench v1.5's ``metrics/cdm/modules/latex2bbox_color.py`` at 523fd1d, re-implemented from
reading it): a coloured formula document (:func:`quantgate.scoring.omnidoc.cdm_latex.document`) compiled by XeLaTeX,
rasterised at 200 dpi, cropped to the ink, and each token's box found as the extent of the pixels of exactly its
colour.

Toolchain: Debian's ``texlive-xetex``, ``texlive-latex-extra`` (upgreek), ``texlive-lang-chinese`` (xeCJK's
ctexhook), ``fonts-noto-cjk`` and ``ghostscript``, installed by ``make setup-cdm`` (lab/2026-12-05-cdm: ~80 s,
599 MiB). Upstream rasterises with ImageMagick 7's ``magick -density 200``, which hands the PDF to Ghostscript as
its ``ps:alpha`` delegate; Debian 12 ships ImageMagick 6, whose policy forbids PDF, so Ghostscript is called here
with the arguments ImageMagick passes (pngalpha, 4-bit text and graphics anti-aliasing) — the same pixels. The CJK
font upstream names, Source Han Sans SC, is Debian's Noto Sans CJK SC (the same glyphs under Google's name).

A formula the renderer cannot handle (XeLaTeX writes no PDF within :data:`TIMEOUT_S`, the PDF has several pages,
no token has a box) is a :class:`RenderFailed`; the caller scores it 0, as upstream's ``CDM.evaluate`` does."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import numpy as np

from quantgate.errors import InputError

PACKAGES = ("texlive-xetex", "texlive-latex-extra", "texlive-lang-chinese", "fonts-noto-cjk", "ghostscript")
MAKE_TARGET = "make setup-cdm"
CJK_FONT = "Noto Sans CJK SC"
DPI, PAD_PX, TIMEOUT_S = 200, 8, 30
# the files that tell the packages are there: executables, and the LaTeX files the template loads
_EXECUTABLES = {"xelatex": "texlive-xetex", "kpsewhich": "texlive-xetex", "gs": "ghostscript"}
_TEX_FILES = {"upgreek.sty": "texlive-latex-extra", "ctexhook.sty": "texlive-lang-chinese",
              "xeCJK.sty": "texlive-lang-chinese"}


class CdmToolchainMissing(InputError):
    """Formula CDM was asked for where its LaTeX toolchain is not installed."""


class RenderFailed(Exception):
    """One formula could not be rendered into token boxes (upstream scores such a formula 0)."""


def missing_packages() -> list[str]:
    """The Debian packages of the toolchain that are not installed (empty when CDM can run)."""
    missing = {pkg for exe, pkg in _EXECUTABLES.items() if shutil.which(exe) is None}
    if "texlive-xetex" not in missing:
        for name, pkg in _TEX_FILES.items():
            found = subprocess.run(["kpsewhich", name], capture_output=True, text=True, timeout=30).stdout.strip()
            if not found:
                missing.add(pkg)
        fonts = subprocess.run(["fc-list", f":family={CJK_FONT}", "family"], capture_output=True, text=True,
                               timeout=30) if shutil.which("fc-list") else None
        if fonts is None or not fonts.stdout.strip():
            missing.add("fonts-noto-cjk")
    return [p for p in PACKAGES if p in missing]


def require_toolchain() -> None:
    """Raise :class:`CdmToolchainMissing` naming the packages and how to install them."""
    missing = missing_packages()
    if missing:
        raise CdmToolchainMissing(
            f"formula CDM renders formulas with XeLaTeX and Ghostscript; missing Debian packages: "
            f"{' '.join(missing)}. Install them with `{MAKE_TARGET}` (as root: apt-get install -y "
            f"--no-install-recommends {' '.join(PACKAGES)}), or score formulas by edit distance "
            f"(omnidoc15_formula_edit), which needs none")


def _run(cmd: list[str], work: Path) -> None:
    # TeX and Ghostscript caches and temp files stay in the formula's own folder: parallel renders never share them
    env = {**os.environ, "TMPDIR": str(work), "TEXMFVAR": str(work), "TEXMFCACHE": str(work)}
    try:
        subprocess.run(cmd, cwd=work, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, timeout=TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired as e:
        raise RenderFailed(f"{cmd[0]} ran past {TIMEOUT_S} s") from e


def rasterise(document: str, work: Path) -> np.ndarray:
    """The document's single page as RGBA pixels at :data:`DPI` (XeLaTeX's errors are left to it: nonstopmode
    typesets what it can, as upstream lets it)."""
    (work / "f.tex").write_text(document, encoding="utf-8")
    _run(["xelatex", "-interaction=nonstopmode", "-output-directory", str(work), "f.tex"], work)
    if not (work / "f.pdf").is_file():
        raise RenderFailed("XeLaTeX wrote no PDF")
    _run(["gs", "-q", "-dQUIET", "-dSAFER", "-dBATCH", "-dNOPAUSE", "-dNOPROMPT", "-dMaxBitmap=500000000",
          "-dAlignToPixels=0", "-dGridFitTT=2", "-sDEVICE=pngalpha", "-dTextAlphaBits=4", "-dGraphicsAlphaBits=4",
          f"-r{DPI}x{DPI}", f"-sOutputFile={work / 'p-%d.png'}", f"-f{work / 'f.pdf'}"], work)
    pages = sorted(work.glob("p-*.png"))
    if len(pages) != 1:
        raise RenderFailed(f"the formula set {len(pages)} pages, not one")
    from PIL import Image

    with Image.open(pages[0]) as img:
        return np.asarray(img.convert("RGBA"))


def crop(rgba: np.ndarray) -> np.ndarray:
    """RGB pixels of the ink's extent plus :data:`PAD_PX` on each side; outside the page is black, as PIL's crop
    pads it. Ink is any pixel whose grey (alpha ignored) is not white; a blank page keeps its top-left 10 px."""
    from PIL import Image

    img = Image.fromarray(rgba, "RGBA")
    ink = np.nonzero(np.asarray(img.convert("L")) != 255)
    y0, y1, x0, x1 = (int(ink[0].min()), int(ink[0].max()), int(ink[1].min()), int(ink[1].max())) if ink[0].size \
        else (0, 10, 0, 10)
    return np.asarray(img.convert("RGB").crop((x0 - PAD_PX, y0 - PAD_PX, x1 + PAD_PX, y1 + PAD_PX)))


def colour_boxes(rgb: np.ndarray, colours: list[tuple[int, int, int]]) -> list[tuple[int, int, int, int] | None]:
    """Per colour, the box (x_min − 1, y_min − 1, x_max + 1, y_max + 1) of the pixels of exactly that colour, or
    None where it has none (an invisible token)."""
    codes = (rgb[..., 0].astype(np.int64) << 16) | (rgb[..., 1].astype(np.int64) << 8) | rgb[..., 2]
    wanted = {(r << 16) | (g << 8) | b: k for k, (r, g, b) in enumerate(colours)}
    flat = codes.ravel()
    present, inverse = np.unique(flat, return_inverse=True)
    ys, xs = np.divmod(np.arange(flat.size), rgb.shape[1])
    out: list[tuple[int, int, int, int] | None] = [None] * len(colours)
    for u, code in enumerate(present):
        k = wanted.get(int(code))
        if k is None:
            continue
        at = inverse == u
        out[k] = (int(xs[at].min()) - 1, int(ys[at].min()) - 1, int(xs[at].max()) + 1, int(ys[at].max()) + 1)
    return out


def token_boxes(ready: str, work: Path, cjk_font: str = CJK_FONT) -> tuple[list, tuple[int, int]]:
    """The coloured tokens of one formula that have a box, and the cropped image's (width, height). ``ready`` is
    the tokenizer's output as :func:`~quantgate.scoring.omnidoc.cdm_latex.after_tokenizer` leaves it. Raises
    :class:`RenderFailed` where upstream would record no boxes (colouring or rendering failed, no token seen)."""
    from quantgate.scoring.omnidoc import cdm_latex
    from quantgate.scoring.omnidoc.cdm_match import TokenBox

    try:
        normalized = cdm_latex.normalize(ready)
        doc, tokens = cdm_latex.document(normalized, cjk_font)
    except (ValueError, IndexError, RecursionError) as e:  # upstream's walk fails these ways too
        raise RenderFailed(f"the formula cannot be coloured as upstream colours it ({type(e).__name__}: {e})") from e
    rgb = crop(rasterise(doc, work))
    found = colour_boxes(rgb, cdm_latex.colours()[:len(normalized.strip().split(" "))])
    boxes = [TokenBox(t, b) for t, b in zip(tokens, found, strict=False) if b is not None]
    if not boxes:
        raise RenderFailed("no token of the formula shows in the rendering")
    return boxes, (rgb.shape[1], rgb.shape[0])


def score_ready(gt: str, pred: str, workers: int | None = None) -> tuple[float, str | None]:
    """CDM (F1) of a truth and a predicted formula, both as the tokenizer left them, and why it is 0 where a side
    failed to render (then 0, as upstream scores it)."""
    import tempfile
    from concurrent.futures import ThreadPoolExecutor

    from quantgate.scoring.omnidoc.cdm_match import score

    def side(latex: str) -> tuple[list, tuple[int, int]] | str:
        with tempfile.TemporaryDirectory(prefix="quantgate-cdm-") as work:
            try:
                return token_boxes(latex, Path(work))
            except RenderFailed as e:
                return str(e)

    with ThreadPoolExecutor(max_workers=workers or 2) as pool:
        got, made = pool.map(side, (gt, pred))
    for name, result in (("truth", got), ("prediction", made)):
        if isinstance(result, str):
            return 0.0, f"{name}: {result}"
    assert not isinstance(got, str) and not isinstance(made, str)
    return score(got[0], made[0], got[1], made[1]).f1, None
