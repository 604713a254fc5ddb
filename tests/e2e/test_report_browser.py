"""Report.html's worst pages as a reviewer sees them, in headless Chromium — the page image as
a thumbnail that opens to the full page, CJK text drawn with real glyphs (not boxes), long texts folded, the
variant without worst pages saying why, a page whose image cannot be read listed as such; still one file with
nothing fetched from elsewhere."""

import io
import json
import os
import re
import shutil

import pytest
from PIL import Image, ImageDraw

from quantgate.reports import load_summary, write_reports
from quantgate.scoring.olmocr_math import chromium
from tests.support.study_folder import finished_study

CJK_TRUTH = "# 第一章 量化模型的评估\n\n本页测试中文字符的渲染。日本語のかなも表示される。\n"
LONG = "lorem ipsum dolor sit amet " * 300  # 8,100 characters: folded


def _worst():
    row = {"metric": "ned", "baseline_value": 0.05, "variant_value": 0.6}
    return {"fp8": [], "bad": [
        {**row, "page_id": "p001", "truth": CJK_TRUTH, "baseline_output": CJK_TRUTH.replace("评估", "评价"),
         "variant_output": "# 第一章\n\n本页测试", "image": "pages/images/p001.png"},
        {**row, "page_id": "p002", "truth": LONG, "baseline_output": LONG, "variant_output": LONG[:4000],
         "image": "pages/images/p002.png"},  # never written: not thumbnailable
    ]}


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    out = finished_study(tmp_path_factory.mktemp("browser") / "out", worst=_worst())
    (out / "pages" / "images").mkdir(parents=True, exist_ok=True)
    img = Image.new("RGB", (1200, 1600), "white")
    d = ImageDraw.Draw(img)
    d.rectangle((100, 100, 1100, 300), fill="black")  # a heading bar, so the thumbnail is not blank
    img.save(out / "pages" / "images" / "p001.png")
    write_reports(load_summary(out), out)  # rendered again, now that the page image is there
    return out / "report.html"


def test_the_html_embeds_the_image_folds_long_texts_and_says_why(report):
    html = report.read_text(encoding="utf-8")
    # p001: thumbnail and full, in the worst pages and again in 'Pages without truth' (bad's largest bounds,
    # which the finished study holds and show the page image too); p002 has none
    assert html.count("data:image/jpeg;base64,") == 4
    assert re.search(r"page image not shown: \S*p002\.png cannot be read", html)
    assert "fp8: no worst pages — no page scored worse than bf16 on ned on any of the 40 pages compared" in html
    assert "show all 8100 characters" in html
    assert "第一章 量化模型的评估" in html
    assert not re.search(r"(src|href)=['\"](https?:)?//", html)  # nothing fetched: one self-contained file


@pytest.mark.skipif(chromium() is None, reason="no Chromium found (install chromium, or set QUANTGATE_CHROMIUM)")
def test_chromium_shows_the_page_image_and_cjk_glyphs(report, tmp_path):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium(), args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1200, "height": 900})
            page.goto(report.as_uri())
            thumb = page.locator("img.thumb").first
            assert page.evaluate("(i) => i.naturalWidth", thumb.element_handle()) > 0
            thumb.click()  # opens the full page
            full = page.locator("img.full").first
            assert full.is_visible()
            assert page.evaluate("(i) => i.naturalWidth", full.element_handle()) == 1200
            page.screenshot(path=str(tmp_path / "open.png"))
            page.mouse.click(5, 5)  # anywhere: closes it
            assert not full.is_visible()
            # CJK glyphs in the worst pages' font stack: a one-stroke and a many-stroke character differ in ink,
            # which boxes for a missing glyph (all alike) would not
            ink = {}
            for ch in "一量":
                page.evaluate("""(ch) => { const s = document.createElement('span'); s.id = 'probe';
                    s.textContent = ch; s.style.fontSize = '48px';
                    document.querySelector('table.worst pre').prepend(s); }""", ch)
                shot = Image.open(io.BytesIO(page.locator("#probe").screenshot())).convert("L")
                ink[ch] = sum(1 for p in shot.tobytes() if p < 128)
                page.evaluate("() => document.getElementById('probe').remove()")
            assert ink["一"] > 0 and ink["一"] < 0.5 * ink["量"], ink
            page.screenshot(path=str(tmp_path / "report.png"), full_page=True)
        finally:
            browser.close()
    keep = os.environ.get("QUANTGATE_SCREENSHOT")  # where to keep the screenshot, to look at it
    if keep:
        shutil.copy(tmp_path / "report.png", keep)
        shutil.copy(tmp_path / "open.png", keep.replace(".png", "-open.png"))
    assert json.loads((report.parent / "summary.json").read_text())["worst_pages"]["bad"][0]["image"]
