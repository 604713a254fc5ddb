"""report.html's "Metric families" section at 1,400 px in headless Chromium: with the per-unit headlines (ParseBench's
rule types under upstream's long names beside the dimensions, OmniDocBench's pooled table TEDS) and with score files
written before rows kept units (the notes that say so), nothing runs past the right edge."""

import pytest

from quantgate.scoring.olmocr_math import chromium
from tests.e2e.test_report_outcome_browser import WIDTH, _overflow
from tests.support.family_units import METRICS, RULE_TYPES, study_with_units
from tests.support.study_folder import finished_study

pytestmark = pytest.mark.skipif(chromium() is None, reason="no Chromium found (install chromium, or set "
                                "QUANTGATE_CHROMIUM)")


@pytest.mark.parametrize("units", [True, False])
def test_the_families_section_fits_at_1400_px(tmp_path, units):
    from playwright.sync_api import sync_playwright

    out = (study_with_units(tmp_path / "s") if units else
           finished_study(tmp_path / "s", metrics=METRICS, worst_page_damage={m: 0.1 for m in METRICS}))
    html = (out / "report.html").read_text()
    assert "<h2>Metric families</h2>" in html
    if units:
        assert all(f"rule_{t}_pass_rate" in html for t in RULE_TYPES)
    else:
        assert "scored before score rows kept" in html
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium(), args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": WIDTH, "height": 900})
            page.goto((out / "report.html").as_uri())
            assert page.locator("h2", has_text="Metric families").is_visible()
            assert _overflow(page) == []
        finally:
            browser.close()
