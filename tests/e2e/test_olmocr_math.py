"""Math checks: KaTeX in headless Chromium, against upstream olmOCR-bench's own renderer (Playwright)
and comparison. Needs Chromium (installed by .ci/run); the upstream side also needs Playwright and
upstream's katex/render.py in the reference folder, and says which is missing when it skips."""

import itertools
from concurrent.futures import ThreadPoolExecutor

import pytest

from quantgate.errors import QuantgateError
from quantgate.scoring import olmocr_math
from quantgate.scoring.olmocr_checks import run_check, run_checks
from tests.support import upstream_olmocr
from tests.unit.scoring.test_olmocr_checks import SYSTEMS, agreement, outputs, sample_checks

needs_chromium = pytest.mark.skipif(olmocr_math.skip_reason() is not None, reason=olmocr_math.skip_reason() or "")
_up_reason = upstream_olmocr.reference_missing_reason() or upstream_olmocr.upstream_math_reason()
needs_upstream_math = pytest.mark.skipif(_up_reason is not None, reason=_up_reason or "")


@pytest.fixture(scope="module")
def upstream(tmp_path_factory):
    # one equation cache for the module: upstream renders each equation once (about 1 s each)
    return upstream_olmocr.load(tmp_path_factory.mktemp("upstream-math"))


def _as_upstream(upstream, r):
    g = upstream.render_equation.__globals__
    return g["RenderedEquation"](mathml=r.mathml, error=r.error, spans=[
        g["SpanInfo"](s.text, g["BoundingBox"](s.x, s.y, s.width, s.height)) for s in r.spans])


def sample_equations():
    eqs = set()
    for c in sample_checks():
        if c["type"] == "math":
            eqs.add(c["math"])
            for system in SYSTEMS:
                for md in outputs(system, c):
                    eqs.update(olmocr_math.extract_equations(md.read_text("utf-8")))
    return sorted(eqs)


@needs_chromium
@needs_upstream_math
@pytest.mark.slow
def test_renders_are_upstream_renders_exactly(upstream):
    eqs = sample_equations()
    assert len(eqs) >= 50
    ours = olmocr_math.render_many(eqs)
    with ThreadPoolExecutor(4) as pool:  # upstream renders from a pool of threads, one browser each
        upstream_renders = dict(zip(eqs, pool.map(upstream.render_equation, eqs), strict=True))
    different = []
    for e in eqs:
        theirs = upstream_renders[e]
        spans = [(s.text, s.bounding_box.x, s.bounding_box.y, s.bounding_box.width, s.bounding_box.height)
                 for s in theirs.spans]
        if (theirs.mathml, spans, theirs.error) != (ours[e].mathml, [tuple(vars(s).values()) for s in ours[e].spans],
                                                    ours[e].error):
            different.append(e)
    assert different == []


@needs_chromium
@needs_upstream_math
@pytest.mark.slow
@pytest.mark.parametrize("system", SYSTEMS)
def test_math_checks_agree_with_upstream_on_every_system(upstream, system):
    compared, disagreements, _, _ = agreement(upstream, system, {"math"})
    assert compared >= 12
    assert disagreements == []


POOL = ["a^2+b^2=c^2", "a^{2}+b^{2}=c^{2}", "b^2+a^2=c^2", "a^3+b^2=c^2", "\\to", "\\rightarrow", "\\leftarrow",
        "\\frac{1}{2}", "1/2", "\\frac{2}{1}", "\\tfrac12", "x_1+y", "y+x_1", "x_{1}+y", "\\sum_{i=1}^n i",
        "\\sum_{i=1}^{n} i", "\\sum_{n}^{i=1} i", "\\sqrt{x}", "\\sqrt x", "\\sqrt[3]{x}", "\\alpha\\beta", "αβ",
        "\\mathrm{d}x", "dx", "\\begin{pmatrix}1&2\\\\3&4\\end{pmatrix}", "\\begin{pmatrix}1&3\\\\2&4\\end{pmatrix}",
        "\\not\\in", "\\notin", "e^{i\\pi}+1=0", "\\undefinedmacro{x}", "a\\,b", "ab", "x^{2}_{i}", "x_i^2"]


@needs_chromium
@needs_upstream_math
def test_comparison_is_upstream_comparison_on_every_pair(upstream):
    renders = olmocr_math.render_many(POOL)
    compare = upstream.compare_rendered_equations
    pairs = list(itertools.product(POOL, repeat=2))
    ours = [olmocr_math.compare_rendered(renders[a], renders[b]) for a, b in pairs]
    theirs = [compare(_as_upstream(upstream, renders[a]), _as_upstream(upstream, renders[b])) for a, b in pairs]
    assert ours == theirs
    assert 0 < sum(ours) < len(pairs)  # both verdicts occur, beyond the identical pairs
    assert sum(ours) > len(POOL)


@needs_chromium
def test_math_checks_run_and_decide():
    c = {"pdf": "x.pdf", "page": 1, "id": "m", "type": "math", "math": "a^2+b^2=c^2"}
    assert run_check(c, "text $a^{2}+b^{2}=c^{2}$ text")  # same layout, different source
    assert run_check(c, "\\[ a^2+b^2=c^2 \\]")  # exact match, any delimiter
    assert not run_check(c, "$a^3+b^2=c^2$")
    assert not run_check(c, "a^2+b^2=c^2 without delimiters")
    assert not run_check(dict(c, ignore_dollar_delimited=True), "$a^{2}+b^{2}=c^{2}$")
    arrow = dict(c, math="x \\to y")
    assert run_check(arrow, "$x \\rightarrow y$") and not run_check(arrow, "$x \\leftarrow y$")
    out = run_checks([c, arrow, dict(c, id="m3", math="\\frac{1}{2}")], "$a^2+b^2=c^2$ and $x\\to y$, $1/2$")
    assert (out.passed, out.failed, sum(out.skipped.values())) == (2, 1, 0)


@needs_chromium
def test_one_launch_renders_a_page_and_survives_hostile_latex():
    eqs = ["</script><script>x=1</script>", "\\frac{a}{b}", "\\begin{x}", "'\"`${1}`"]
    out = olmocr_math.render_many(eqs)
    assert out["\\frac{a}{b}"].error is None and out["\\frac{a}{b}"].spans
    assert out["\\begin{x}"].error and "KaTeX parse error" in out["\\begin{x}"].error
    hostile = out["</script><script>x=1</script>"]  # typeset as characters; the page's own script went on
    assert hostile.error is None and [s.text for s in hostile.spans].count("<") == 2
    assert "Can't use function '$'" in out["'\"`${1}`"].error  # quotes and backticks reached KaTeX intact


def test_broken_chromium_is_an_error_not_a_failed_check(monkeypatch, tmp_path):
    fake = tmp_path / "chromium"
    fake.write_text("#!/bin/sh\necho 'cannot open display' >&2\nexit 3\n")
    fake.chmod(0o755)
    monkeypatch.setenv("QUANTGATE_CHROMIUM", str(fake))
    c = {"pdf": "x.pdf", "page": 1, "id": "m", "type": "math", "math": "q_{unrendered}^{7}"}
    with pytest.raises(QuantgateError, match=r"exited 3 without rendering KaTeX \(cannot open display\)"):
        run_checks([c], "$q^7$")


def test_equation_extraction_order_is_upstreams():
    # upstream takes \\( \\) first, then \\[ \\], $$ $$ and $ $, removing each kind's matches before the next
    content = "a $x$ b $$y$$ c \\(z\\) d \\[w\\] e $$v $ u$$"
    assert olmocr_math.extract_equations(content) == ["z", "w", "y", "v $ u", "x"]
    assert olmocr_math.extract_equations(content, ignore_dollar_delimited=True) == ["z", "w"]
