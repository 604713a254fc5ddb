"""olmOCR-bench ``math`` checks: render LaTeX with KaTeX in headless Chromium, then compare layouts.

Upstream (allenai/olmocr, ``olmocr/bench/katex/render.py``, Apache-2.0) renders each equation with
KaTeX 0.16.21 in Chromium driven by Playwright and keeps the MathML and every innermost span's
bounding box; a hypothesis matches when the reference's MathML is contained in its own, or when each
reference glyph can be assigned to a hypothesis glyph with the same up/down/left/right neighbours.

Here the same page, the same KaTeX (npm's ``katex`` 0.16.21, installed at setup: ``quantgate.scoring.katex``) and the
same span extraction run in the system Chromium through its own ``--dump-dom`` command line, many
equations per launch, so no Python browser driver is needed. ``compare_rendered`` is upstream's
``compare_rendered_equations`` ported line for line (it cannot be imported: its module starts
Playwright at import). ``tests/e2e/test_olmocr_math.py`` checks both against upstream's code."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
import urllib.parse
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from quantgate.errors import QuantgateError
from quantgate.scoring import katex

CHROMIUM_ENV = "QUANTGATE_CHROMIUM"  # a path to the browser, or "none" to skip math checks on purpose
_CACHE: dict[str, Rendered] = {}
_CACHE_MAX = 20_000


class MathRenderError(QuantgateError):
    """Chromium is there but did not render: a scoring run must not silently score math as failed."""


@dataclass(frozen=True)
class Span:
    text: str
    x: float
    y: float
    width: float
    height: float


@dataclass(frozen=True)
class Rendered:
    mathml: str
    spans: tuple[Span, ...]
    error: str | None = None  # KaTeX's parse error; upstream keeps it as the MathML, with no spans


def chromium() -> str | None:
    env = os.environ.get(CHROMIUM_ENV, "").strip()
    if env:
        return None if env.lower() == "none" else env
    return shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


def skip_reason() -> str | None:
    """Why math checks cannot run here (they are then skipped and counted), or None when they can."""
    env = os.environ.get(CHROMIUM_ENV, "").strip()
    if env.lower() == "none":
        return f"math: rendering turned off ({CHROMIUM_ENV}=none)"
    exe = chromium()
    if exe is None:
        return f"math: no Chromium found (install chromium, or set {CHROMIUM_ENV} to its path)"
    if not (Path(exe).is_file() or shutil.which(exe)):
        return f"math: {CHROMIUM_ENV}={exe} is not an executable"
    return None


# Upstream's order matters: each delimiter's matches are removed before the next pattern looks.
_DELIMS = (r"\\\((.+?)\\\)", r"\\\[(.+?)\\\]")
_DOLLARS = (r"\$\$(.+?)\$\$", r"\$(.+?)\$")


def extract_equations(content: str, ignore_dollar_delimited: bool = False) -> list[str]:
    equations: list[str] = []
    for pattern in _DELIMS + (() if ignore_dollar_delimited else _DOLLARS):
        equations.extend(e.strip() for e in re.findall(pattern, content, re.DOTALL))
        content = re.sub(pattern, "", content, flags=re.DOTALL)
    return equations


def _page(equations: list[str], css: str, js: str) -> str:
    # Upstream's page and span extraction (render.py: _do_render), looped over many equations in one
    # container; the results go out URI-encoded in a <pre> because --dump-dom only returns the DOM.
    # Upstream's body is 100vh of an 800x400 viewport; it is fixed here because a headless window's
    # viewport is smaller than its --window-size (positions would all shift, measured: 71.5 px in y).
    eqs = json.dumps(equations).replace("<", "\\u003c")  # no "</script>" can end the script early
    return f"""<!DOCTYPE html>
<html><head><style>
body {{ display: flex; justify-content: center; align-items: center; width: 800px; height: 400px; margin: 0;
       background-color: white; color: black; }}
#equation-container {{ padding: 0; font-size: 24px; }}
</style><style>{css}</style><script>{js}</script></head>
<body><div id="equation-container"></div><script>
const eqs = {eqs};
const out = [];
const box = document.getElementById("equation-container");
for (const eq of eqs) {{
  box.innerHTML = "";
  try {{ katex.render(eq, box, {{displayMode: true, throwOnError: true}}); }}
  catch (error) {{ out.push({{error: String(error.message)}}); continue; }}
  const list = [];
  document.querySelectorAll("span").forEach(span => {{
    if (span.children.length === 0 && /\\S/.test(span.textContent)) {{
      const r = span.getBoundingClientRect();
      list.push([span.textContent.trim(), r.x, r.y, r.width, r.height]);
    }}
  }});
  const m = document.querySelector(".katex-mathml math");
  out.push({{mathml: m ? m.outerHTML : "", spans: list}});
}}
document.documentElement.innerHTML = '<body><pre id="quantgate-out">' +
  encodeURIComponent(JSON.stringify(out)) + '</pre></body>';
</script></body></html>"""


def _launch(exe: str, equations: list[str]) -> list[Rendered]:
    css, js = katex.assets()
    with tempfile.TemporaryDirectory(prefix="quantgate-katex-") as tmp:
        page = Path(tmp) / "render.html"
        page.write_text(_page(equations, css, js), "utf-8")
        cmd = [exe, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--mute-audio",
               "--no-first-run", "--disable-extensions", "--window-size=800,600",
               f"--user-data-dir={Path(tmp) / 'profile'}", "--dump-dom", page.as_uri()]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120 + len(equations) // 10)
        except (OSError, subprocess.TimeoutExpired) as e:
            raise MathRenderError(f"math checks: headless Chromium ({exe}) did not run: {e}; fix it, or set "
                                  f"{CHROMIUM_ENV}=none to skip math checks") from None
    m = re.search(r'<pre id="quantgate-out">([^<]*)</pre>', proc.stdout)
    if not m:
        tail = (proc.stderr or "").strip().splitlines()[-3:]
        raise MathRenderError(f"math checks: headless Chromium ({exe}) exited {proc.returncode} without rendering "
                              f"KaTeX ({' | '.join(tail) or 'no output'}); fix it, or set {CHROMIUM_ENV}=none "
                              "to skip math checks")
    out = []
    for r in json.loads(urllib.parse.unquote(m.group(1))):
        if "error" in r:
            out.append(Rendered(mathml=r["error"], spans=(), error=r["error"]))
        else:
            out.append(Rendered(mathml=r["mathml"], spans=tuple(Span(*s) for s in r["spans"])))
    if len(out) != len(equations):
        raise MathRenderError(f"math checks: Chromium returned {len(out)} renders for {len(equations)} equations")
    return out


def render_many(equations: Iterable[str]) -> dict[str, Rendered]:
    """Renders (cached per process) for every equation, with one Chromium launch for all uncached ones."""
    wanted = list(dict.fromkeys(equations))
    todo = [e for e in wanted if e not in _CACHE]
    if todo:
        exe = chromium()
        if exe is None or skip_reason():
            raise MathRenderError(skip_reason() or "math: no Chromium")
        if len(_CACHE) + len(todo) > _CACHE_MAX:
            _CACHE.clear()
        _CACHE.update(zip(todo, _launch(exe, todo), strict=True))
    return {e: _CACHE[e] for e in wanted}


def _extract_inner(mathml: str) -> str:
    from bs4 import BeautifulSoup

    try:  # the "xml" parser is lxml's, as upstream's; without lxml upstream falls back to the raw string
        soup = BeautifulSoup(mathml, "xml")
        semantics = soup.find("semantics")
        if semantics:
            return "".join(str(c) for c in semantics.contents if getattr(c, "name", None) != "annotation")
        return str(soup)
    except Exception:
        return mathml


def _norm(s: str) -> str:
    return re.sub(r"[\s\u200a-\u200d\u2060\ufeff]+", "", s, flags=re.UNICODE)


def _chars(spans: Iterable[Span]) -> list[Span]:
    out = []
    for s in spans:
        t = _norm(s.text)
        for i, c in enumerate(t):
            out.append(Span(c, s.x + s.width * i / len(t), s.y, s.width / len(t), s.height))
    return out


def _neighbors(spans: list[Span], tol: float = 5) -> list[dict[str, int | None]]:
    out = []
    for i, s in enumerate(spans):
        cx, cy = s.x + s.width / 2, s.y + s.height / 2
        best: dict[str, tuple[int | None, float]] = {k: (None, 0.0) for k in ("up", "down", "left", "right")}
        for j, o in enumerate(spans):
            if i == j:
                continue
            ox, oy = o.x + o.width / 2, o.y + o.height / 2
            for d, ok, dist in (("up", oy < cy and abs(ox - cx) <= tol, cy - oy),
                                ("down", oy > cy and abs(ox - cx) <= tol, oy - cy),
                                ("left", ox < cx and abs(oy - cy) <= tol, cx - ox),
                                ("right", ox > cx and abs(oy - cy) <= tol, ox - cx)):
                if ok and (best[d][0] is None or dist < best[d][1]):
                    best[d] = (j, dist)
        out.append({d: v[0] for d, v in best.items()})
    return out


def compare_rendered(reference: Rendered, hypothesis: Rendered) -> bool:
    """Upstream's compare_rendered_equations: MathML containment, else a neighbour-preserving glyph match."""
    if _norm(_extract_inner(reference.mathml)) in _norm(_extract_inner(hypothesis.mathml)):
        return True
    ref = _chars(s for s in reference.spans if _norm(s.text))
    hyp = _chars(s for s in hypothesis.spans if _norm(s.text))
    candidates = [[j for j, h in enumerate(hyp) if h.text == r.text] for r in ref]
    if not all(candidates):
        return False
    ref_nb, hyp_nb = _neighbors(ref), _neighbors(hyp)
    used, assignment = [False] * len(hyp), {}

    def backtrack(i: int) -> bool:  # upstream's search, same order, so the same answer
        if i == len(ref):
            return True
        for cand in candidates[i]:
            if used[cand]:
                continue
            assignment[i], used[cand] = cand, True
            valid = True
            for d in ("up", "down", "left", "right"):
                want, got = ref_nb[i][d], hyp_nb[cand][d]
                if want is None:
                    continue
                if got is None or (assignment[want] != got if want in assignment else hyp[got].text != ref[want].text):
                    valid = False
                    break
            if valid and backtrack(i + 1):
                return True
            used[cand] = False
            del assignment[i]
        return False

    return backtrack(0)


def equations_to_render(check: dict, content: str) -> list[str]:
    """What a prepared math check needs rendered for this page (nothing when an exact match decides it)."""
    hyps = extract_equations(content, check["ignore_dollar_delimited"])
    return [] if check["math"] in hyps else [check["math"], *hyps]


def run_math(check: dict, content: str) -> bool:
    """A prepared math check (see olmocr_checks). Needs Chromium: callers check ``skip_reason`` first."""
    hyps = extract_equations(content, check["ignore_dollar_delimited"])
    if check["math"] in hyps:
        return True
    renders = render_many([check["math"], *hyps])
    reference = renders[check["math"]]
    return any(compare_rendered(reference, renders[h]) for h in hyps)
