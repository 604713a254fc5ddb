"""``quantgate pages synth``: synthetic document pages with exact markdown truth.

Pages are rendered from markdown blocks (headings, paragraphs, lists, pipe tables, numbers) with
Pillow, in a few fonts and sizes, with light noise. The same seed gives the same pages, byte for
byte, on any machine with the same fonts (the manifest records which were used)."""

from __future__ import annotations

import io
import random
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

from quantgate.errors import InputError, UsageError
from quantgate.io import fonts
from quantgate.io.fileio import atomic_write_json, sha256_bytes, sha256_file
from quantgate.io.pageset import MANIFEST_FILE, PAGES_FILE, split_of
from quantgate.schema.pages import PageRecord, PageSetManifest, PageSource, SynthSpec

# DejaVu from installed packages (Debian's first: the demo's pages and the reader were made with it)
FONT_DIRS = fonts.dejavu_dirs()
FONT_FILES = ["DejaVuSans.ttf", "DejaVuSerif.ttf", "DejaVuSansMono.ttf"]
BOLD_FILES = {"DejaVuSans.ttf": "DejaVuSans-Bold.ttf", "DejaVuSerif.ttf": "DejaVuSerif-Bold.ttf",
              "DejaVuSansMono.ttf": "DejaVuSansMono-Bold.ttf"}

# A fixed lowercase vocabulary: pronounceable, deterministic, no downloads.
_ON = ["b", "c", "d", "f", "g", "h", "l", "m", "n", "p", "r", "s", "t", "v", "w"]
_NU = ["a", "e", "i", "o", "u"]
_CO = ["", "n", "r", "s", "t", "l"]


def vocabulary(size: int = 400, seed: int = 1234) -> list[str]:
    rng = random.Random(seed)
    words: set[str] = set()
    while len(words) < size:
        syl = rng.choice([1, 2, 2, 3])
        words.add("".join(rng.choice(_ON) + rng.choice(_NU) + rng.choice(_CO) for _ in range(syl)))
    return sorted(words)


def _font(name: str | None, size: int, bold: bool = False):
    from PIL import ImageFont

    if name:
        for d in FONT_DIRS:
            p = Path(d) / (BOLD_FILES.get(name, name) if bold else name)
            if p.is_file():
                return ImageFont.truetype(str(p), size)
    return ImageFont.load_default(size=size)


def available_fonts() -> list[str | None]:
    found = [f for f in FONT_FILES if any((Path(d) / f).is_file() for d in FONT_DIRS)]
    return found or [None]  # None: Pillow's bundled font


def make_document(rng: random.Random, words: list[str], profile: str = "doc") -> list[tuple[str, object]]:
    """A document as blocks: ("h", text) | ("p", text) | ("ul", [items]) | ("table", rows)."""
    def sentence(lo: int, hi: int) -> str:
        ws = [rng.choice(words) for _ in range(rng.randint(lo, hi))]
        if rng.random() < 0.3:
            ws.insert(rng.randrange(len(ws) + 1), str(rng.randint(0, 9999)))
        return " ".join(ws)

    if profile == "simple":
        blocks: list[tuple[str, object]] = [("h", sentence(1, 3))]
        blocks.append(rng.choice([("p", sentence(3, 6)), ("ul", [sentence(1, 3) for _ in range(rng.randint(2, 3))])]))
        return blocks
    blocks = [("h", sentence(2, 5))]
    for _ in range(rng.randint(2, 4)):
        kind = rng.choices(["p", "ul", "table"], weights=[5, 2, 2])[0]
        if kind == "p":
            blocks.append(("p", sentence(8, 30)))
        elif kind == "ul":
            blocks.append(("ul", [sentence(2, 6) for _ in range(rng.randint(2, 4))]))
        else:
            cols = rng.randint(2, 3)
            header = [rng.choice(words) for _ in range(cols)]
            rows = [[rng.choice(words) if rng.random() < 0.5 else str(rng.randint(0, 999)) for _ in range(cols)]
                    for _ in range(rng.randint(2, 4))]
            blocks.append(("table", [header, *rows]))
        if rng.random() < 0.3:
            blocks.append(("h2", sentence(1, 4)))
    return blocks


READER_CELL = 32  # one glyph per 32x32 cell = one merged vision token of the Qwen-VL processors
READER_COLS = 12


def make_reader_page(rng: random.Random, words: list[str]) -> tuple[list[tuple[str, object]], int]:
    """A page within a tiny model's reach: a heading line and one or two text lines on a grid."""
    short = [w for w in words if len(w) <= 6]

    def line(max_len: int) -> str:
        out = ""
        while True:
            w = rng.choice(short) if rng.random() < 0.8 else str(rng.randint(0, 999))
            cand = f"{out} {w}".strip()
            if len(cand) > max_len:
                return out or w[:max_len]
            out = cand
            if rng.random() < 0.25:
                return out

    blocks: list[tuple[str, object]] = [("h", line(READER_COLS))]
    blocks.append(("p", " ".join(line(READER_COLS) for _ in range(rng.randint(1, 2)))))
    return blocks, READER_COLS


def render_reader(blocks, rng: random.Random, noise: float):
    """Monospace glyphs centred in grid cells; the heading in bold. Line breaks in the image are
    spaces in the truth, as in any paragraph."""
    from PIL import Image, ImageDraw

    lines: list[tuple[str, bool]] = [(str(blocks[0][1]), True)]
    words = str(blocks[1][1]).split(" ")
    cur = ""
    for w in words:
        if len(f"{cur} {w}".strip()) > READER_COLS:
            lines.append((cur, False))
            cur = w
        else:
            cur = f"{cur} {w}".strip()
    lines.append((cur, False))
    c = READER_CELL
    img = Image.new("L", (READER_COLS * c, len(lines) * c), 255)
    d = ImageDraw.Draw(img)
    size = rng.choice([24, 26, 28])
    for row, (text, bold) in enumerate(lines):
        f = _font("DejaVuSansMono.ttf", size, bold=bold)
        for col, ch in enumerate(text):
            if ch != " ":
                d.text((col * c + c / 2 + rng.uniform(-1.5, 1.5), row * c + c / 2 + rng.uniform(-1.5, 1.5)), ch,
                       font=f, fill=rng.randint(0, 60), anchor="mm")
    if noise > 0:
        import numpy as np

        arr = np.asarray(img, dtype=np.float32)
        arr = arr + np.random.default_rng(rng.randrange(2**32)).normal(0, 255 * noise, arr.shape)
        img = Image.fromarray(arr.clip(0, 255).astype("uint8"))
    return img.convert("RGB")


def reader_sample(seed: int, i: int, words: list[str] | None = None, noise: float = 0.03):
    """(image, truth markdown) of reader page ``i`` for ``seed`` — used by synth and training."""
    rng = random.Random(f"reader:{seed}:{i}")
    blocks, _ = make_reader_page(rng, words or vocabulary())
    return render_reader(blocks, rng, noise), to_markdown(blocks), blocks


def to_markdown(blocks: list[tuple[str, object]]) -> str:
    out: list[str] = []
    for kind, val in blocks:
        if kind == "h":
            out.append(f"# {val}")
        elif kind == "h2":
            out.append(f"## {val}")
        elif kind == "p":
            out.append(str(val))
        elif kind == "ul":
            out.append("\n".join(f"- {it}" for it in val))  # type: ignore[union-attr]
        elif kind == "table":
            rows = val  # type: ignore[assignment]
            lines = ["| " + " | ".join(rows[0]) + " |", "| " + " | ".join("---" for _ in rows[0]) + " |"]
            lines += ["| " + " | ".join(r) + " |" for r in rows[1:]]
            out.append("\n".join(lines))
    return "\n\n".join(out) + "\n"


def _wrap(draw, text: str, font, width: int) -> list[str]:
    lines, cur = [], ""
    for w in text.split():
        trial = f"{cur} {w}".strip()
        if draw.textlength(trial, font=font) <= width or not cur:
            cur = trial
        else:
            lines.append(cur)
            cur = w
    if cur:
        lines.append(cur)
    return lines


def render(blocks, rng: random.Random, width: int, font_name: str | None, base: int, noise: float):
    from PIL import Image, ImageDraw, ImageFilter

    margin = max(12, width // 20)
    inner = width - 2 * margin
    # Render on a tall canvas, then crop to the content: page height follows the document.
    img = Image.new("L", (width, 4000), 255)
    d = ImageDraw.Draw(img)
    y = margin
    body = _font(font_name, base)
    for kind, val in blocks:
        if kind in ("h", "h2"):
            f = _font(font_name, int(base * (1.6 if kind == "h" else 1.3)), bold=True)
            for line in _wrap(d, str(val), f, inner):
                d.text((margin, y), line, font=f, fill=0)
                y += int(f.size * 1.3)
            y += base // 2
        elif kind == "p":
            for line in _wrap(d, str(val), body, inner):
                d.text((margin, y), line, font=body, fill=0)
                y += int(base * 1.35)
            y += base // 2
        elif kind == "ul":
            for it in val:
                d.text((margin, y), "•", font=body, fill=0)
                for line in _wrap(d, str(it), body, inner - base * 2):
                    d.text((margin + base * 2, y), line, font=body, fill=0)
                    y += int(base * 1.35)
            y += base // 2
        elif kind == "table":
            rows = val
            ncol = len(rows[0])
            cw = min(inner // ncol, max(int(max(d.textlength(r[c], font=body) for r in rows)) + base
                                          for c in range(ncol)) + base)
            rh = int(base * 1.7)
            for ri, r in enumerate(rows):
                f = _font(font_name, base, bold=(ri == 0))
                for ci, cell in enumerate(r):
                    x0 = margin + ci * cw
                    d.rectangle([x0, y, x0 + cw, y + rh], outline=0, width=1)
                    d.text((x0 + base // 3, y + (rh - base) // 2 - 1), cell, font=f, fill=0)
                y += rh
            y += base
    img = img.crop((0, 0, width, min(4000, y + margin)))
    if noise > 0:
        import numpy as np

        arr = np.asarray(img, dtype=np.float32)
        arr = arr + np.random.default_rng(rng.randrange(2**32)).normal(0, 255 * noise, arr.shape)
        img = Image.fromarray(arr.clip(0, 255).astype("uint8"))
        if rng.random() < 0.5:
            img = img.filter(ImageFilter.GaussianBlur(radius=0.4))
    return img.convert("RGB")


def fit_on_page(img, size: tuple[int, int]):
    """Paste the rendered document on a fixed-size white page (shrunk first if it is taller)."""
    from PIL import Image

    w, h = size
    if img.height > h:
        img = img.resize((max(1, round(img.width * h / img.height)), h), Image.Resampling.LANCZOS)
    page = Image.new("RGB", (w, h), (255, 255, 255))
    page.paste(img, (0, 0))
    return page


def synth_page_id(seed: int, i: int) -> str:
    return f"synth-{seed}-{i:05d}"


def synth_document(seed: int, i: int, pages_per_document: int = 1) -> str:
    """Page ``i``'s document (what its split is drawn from): the page itself when documents are single pages."""
    if pages_per_document == 1:
        return synth_page_id(seed, i)
    return f"synth-{seed}-doc{i // pages_per_document:05d}"


def synth_pages(out: Path, n: int, seed: int = 0, calibration_fraction: float = 0.2, profile: str = "doc",
                width: int | None = None, noise: float = 0.03, overwrite: bool = False,
                page_size: tuple[int, int] | None = None, progress: Callable[[str], None] | None = None,
                pages_per_document: int = 1) -> int:
    """``pages_per_document`` > 1: pages i·K … i·K+K−1 form document i (one font, width and size, split together);
    1 keeps each page its own document, with the pages and splits sets made before documents had."""
    import imagehash

    if n < 1:
        raise UsageError(f"--n must be at least 1, got {n}")
    if pages_per_document < 1:
        raise UsageError(f"--pages-per-document must be at least 1, got {pages_per_document}")
    if profile not in ("doc", "simple", "reader"):
        raise InputError(f"unknown profile {profile!r}: use doc, simple or reader")
    if page_size and (profile == "reader" or min(page_size) < 64):
        raise UsageError("--page-size needs the doc or simple profile and sides of at least 64 px")
    out = Path(out)
    if out.exists() and any(out.iterdir()) and not overwrite:
        raise UsageError(f"{out}: folder exists and is not empty; choose another -o or pass --overwrite")
    words = vocabulary()
    used = available_fonts()
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.synth.", dir=out.parent))
    try:
        (tmp / "images").mkdir()
        (tmp / "truth").mkdir()
        lines = []
        for i in range(n):
            pid, doc = synth_page_id(seed, i), synth_document(seed, i, pages_per_document)
            rng = random.Random(f"{seed}:{i}")
            # a document's pages share their look, as a real document's do; one page alone draws it itself
            style = rng if pages_per_document == 1 else random.Random(f"{seed}:document:{i // pages_per_document}")
            if profile == "reader":
                img, md, blocks = reader_sample(seed, i, words, noise)
                font = "DejaVuSansMono.ttf"
            else:
                blocks = make_document(rng, words, profile)
                md = to_markdown(blocks)
                font = style.choice(used)
                w = width or (style.choice([320, 384]) if profile == "simple" else style.choice([640, 768, 896]))
                base = style.choice([16, 18]) if profile == "simple" else style.choice([14, 16, 18, 20])
                if page_size:
                    w, base = page_size[0], round(base * page_size[0] / 768)
                img = render(blocks, rng, w, font, base, noise)
                if page_size:
                    img = fit_on_page(img, page_size)
            buf = io.BytesIO()
            img.save(buf, format="PNG")
            data = buf.getvalue()
            (tmp / f"images/{pid}.png").write_bytes(data)
            (tmp / f"truth/{pid}.md").write_text(md, encoding="utf-8")
            tags = [f"font:{font or 'pillow'}"] + sorted({f"has:{k}" for k, _ in blocks})
            rec = PageRecord(id=pid, document=doc, image=f"images/{pid}.png", sha256=sha256_bytes(data), phash=str(imagehash.phash(img)),
                             width=img.width, height=img.height, source=PageSource(file=f"synth:{profile}:{seed}:{i}"),
                             truth=f"truth/{pid}.md", truth_sha256=sha256_bytes(md.encode()),
                             split=split_of(doc, seed, calibration_fraction), tags=tags)
            lines.append(rec.model_dump_json() + "\n")
            if progress:
                progress(pid)
        (tmp / PAGES_FILE).write_text("".join(lines), encoding="utf-8")
        atomic_write_json(tmp / MANIFEST_FILE, PageSetManifest(
            created_by=f"quantgate pages synth --profile {profile}", seed=seed,
            calibration_fraction=calibration_fraction, n_pages=n, pages_sha256=sha256_file(tmp / PAGES_FILE),
            synth=SynthSpec(n=n, seed=seed, calibration_fraction=calibration_fraction, profile=profile, noise=noise,
                            width=width, page_size=list(page_size) if page_size else None,
                            pages_per_document=pages_per_document),
            notes=[f"fonts: {', '.join(f or 'pillow-default' for f in used)}",
                   *fonts.dejavu_notes([f for f in used if f], FONT_DIRS)]).model_dump())
        if out.exists():
            shutil.rmtree(out)
        tmp.rename(out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return n
