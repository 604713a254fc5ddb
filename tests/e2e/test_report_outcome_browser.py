"""report.html as a reader sees it at 1,400 px in headless Chromium: the outcome banner is the first thing on the
page and says the gate's word, and nothing — the verdict table with every row's details opened, the plots, the
worst pages with long and CJK texts — runs past the right edge (a horizontal scroll bar hides the last columns)."""

import pytest

from quantgate.reports import load_summary, write_reports
from quantgate.scoring.olmocr_math import chromium
from tests.support.study_folder import finished_study

WIDTH = 1400
LONG = "lorem ipsum dolor sit amet " * 300
CJK = "# 第一章 量化模型的评估\n\n本页测试中文字符的渲染。\n"

pytestmark = pytest.mark.skipif(chromium() is None, reason="no Chromium found (install chromium, or set "
                                "QUANTGATE_CHROMIUM)")


def _worst():
    row = {"metric": "ned", "baseline_value": 0.05, "variant_value": 0.6, "image": "pages/images/none.png"}
    return {"fp8": [], "bad": [
        {**row, "page_id": "p001", "truth": CJK, "baseline_output": CJK, "variant_output": "# 第一章"},
        {**row, "page_id": "p002", "truth": LONG, "baseline_output": LONG, "variant_output": LONG[:4000]},
        {**row, "page_id": "p003", "truth": "x" * 3000, "baseline_output": "y" * 3000, "variant_output": "z" * 900},
    ]}


def _overflow(page) -> list:
    """Elements whose right edge lies past the viewport, and the document's own scroll width."""
    return page.evaluate("""(w) => {
        const past = [...document.body.querySelectorAll('*')].filter(e => e.getBoundingClientRect().right > w + 0.5)
            .slice(0, 5).map(e => e.tagName + '.' + (e.getAttribute('class') || '') + ' ' +
                                   Math.round(e.getBoundingClientRect().right));
        const doc = document.documentElement.scrollWidth;
        return doc > w ? [`document scrollWidth ${doc}`, ...past] : past; }""", WIDTH)


@pytest.mark.parametrize(("candidates", "word"), [({"fp8": 0.0005}, "PASS"), (None, "FAIL")])
def test_the_banner_leads_and_nothing_overflows_at_1400_px(tmp_path, candidates, word):
    from playwright.sync_api import sync_playwright

    out = finished_study(tmp_path / "s", candidates, worst=_worst() if candidates is None else None)
    write_reports(load_summary(out), out)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium(), args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": WIDTH, "height": 900})
            page.goto((out / "report.html").as_uri())
            banner = page.locator("#outcome")
            box = banner.bounding_box()
            assert box is not None and box["y"] < 150 and banner.is_visible()  # above the fold, under the title
            assert banner.inner_text().startswith(f"{word} — ")
            first_table = page.locator("table").first.bounding_box()
            assert first_table is not None and first_table["y"] > box["y"] + box["height"]
            assert _overflow(page) == []
            for d in page.locator(".why details").all():  # every verdict's folded details, opened
                d.evaluate("(e) => e.open = true")
            assert _overflow(page) == []
            page.screenshot(path=str(tmp_path / "report-1400.png"), full_page=True)
        finally:
            browser.close()
    assert (tmp_path / "report-1400.png").stat().st_size > 10_000


def test_the_check_sees_an_overflow(tmp_path):
    """The overflow check fails on a page wider than the window: a table forced past 1,400 px is found."""
    from playwright.sync_api import sync_playwright

    out = finished_study(tmp_path / "s", {"fp8": 0.0005})
    html = (out / "report.html").read_text().replace("</style>", "table.verdicts{min-width:1700px}</style>", 1)
    (out / "wide.html").write_text(html)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium(), args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": WIDTH, "height": 900})
            page.goto((out / "wide.html").as_uri())
            found = _overflow(page)
        finally:
            browser.close()
    assert found and found[0].startswith("document scrollWidth") and any("TABLE.verdicts" in x for x in found)
