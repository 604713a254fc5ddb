"""Fonts come from installed packages: DejaVu from Debian's fonts-dejavu-core first (the bytes the demo's
pages and the reader were made with), matplotlib's DejaVu as the fallback, which a page set made with it
says, and a CJK font (fonts-wqy-zenhei, installed by `make system`) that really draws CJK."""

import json

import pytest

from quantgate.errors import QuantgateError
from quantgate.heldout import synth
from quantgate.io import fonts


def test_lookup_order_env_then_debian_then_matplotlib(monkeypatch, tmp_path):
    monkeypatch.setenv(fonts.FONT_DIR_ENV, str(tmp_path))
    dirs = fonts.dejavu_dirs()
    assert dirs[:2] == [str(tmp_path), str(fonts.DEBIAN_DEJAVU)]
    assert dirs[2] == str(fonts.matplotlib_dejavu()) and (fonts.matplotlib_dejavu() / "DejaVuSans.ttf").is_file()
    monkeypatch.delenv(fonts.FONT_DIR_ENV)
    assert fonts.dejavu_dirs()[0] == str(fonts.DEBIAN_DEJAVU)


@pytest.mark.skipif(not (fonts.DEBIAN_DEJAVU / "DejaVuSansMono.ttf").is_file(), reason="fonts-dejavu-core absent")
def test_a_page_set_made_with_matplotlibs_dejavu_says_so(tmp_path, monkeypatch):
    synth.synth_pages(tmp_path / "debian", 3, seed=2, profile="reader")
    monkeypatch.setattr(synth, "FONT_DIRS", [str(fonts.matplotlib_dejavu())])
    synth.synth_pages(tmp_path / "mpl", 3, seed=2, profile="reader")

    def notes(name):
        return json.loads((tmp_path / name / "pageset.json").read_text())["notes"]

    deb_notes, mpl_notes = notes("debian"), notes("mpl")
    assert deb_notes == ["fonts: DejaVuSans.ttf, DejaVuSerif.ttf, DejaVuSansMono.ttf"]
    assert mpl_notes[0] == deb_notes[0] and len(mpl_notes) == 2
    assert mpl_notes[1].startswith(f"font files from {fonts.matplotlib_dejavu()}, not Debian's fonts-dejavu-core")
    assert fonts.dejavu_file("DejaVuSansMono.ttf", synth.FONT_DIRS).parent == fonts.matplotlib_dejavu()


def test_cjk_font_draws_chinese_and_japanese(monkeypatch, tmp_path):
    from PIL import Image, ImageDraw, ImageFont

    path = fonts.require_cjk_font()  # `make system` installs fonts-wqy-zenhei
    font = ImageFont.truetype(str(path), 32)

    def ink(ch):
        img = Image.new("L", (48, 48), 255)
        ImageDraw.Draw(img).text((4, 4), ch, font=font, fill=0)
        return img.tobytes()

    tofu = ink("\U000f0000")  # a private-use code point no font here draws: the missing-glyph box
    assert len({ink("中"), ink("文"), ink("あ"), ink("カ"), tofu}) == 5
    monkeypatch.setenv(fonts.CJK_FONT_ENV, str(tmp_path / "none.ttc"))
    assert fonts.cjk_font() is None
    with pytest.raises(QuantgateError, match="none.ttc is not a file; run `make system`"):
        fonts.require_cjk_font()
