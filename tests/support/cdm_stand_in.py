"""A stand-in for formula CDM's renderer, for unit tests (which run no XeLaTeX): a formula pair scores the F1 of its
characters as a multiset, so a pair's value moves with its LaTeX as CDM's token F1 does, and every call is counted.
Everything around the renderer is quantgate's own: v1.5's match picks the pairs, the page's cache, the registry."""

from __future__ import annotations

from collections import Counter

import pytest


def char_f1(gt: str, pred: str) -> float:
    g, p = Counter(gt), Counter(pred)
    if not g and not p:
        return 1.0
    return 2 * (g & p).total() / (g.total() + p.total())


def install(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    """Patch the renderer and the toolchain check; returns the list each rendered pair is appended to. The page
    cache is a fresh one for the test (the real one is put back after it), so no stand-in value outlives it."""
    from functools import lru_cache

    from quantgate.scoring.omnidoc import cdm, cdm_render, v15

    rendered: list[tuple[str, str]] = []

    def formula_cdm(gt: str, pred: str) -> tuple[float, str | None]:
        rendered.append((gt, pred))
        return char_f1(*cdm.cdm_inputs(gt, pred)), None

    monkeypatch.setattr(cdm_render, "require_toolchain", lambda: None)
    monkeypatch.setattr(cdm, "formula_cdm", formula_cdm)
    monkeypatch.setattr(v15, "page_cdm", lru_cache(maxsize=4096)(v15.page_cdm.__wrapped__))
    return rendered
