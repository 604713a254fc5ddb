"""How often the document-aware verdict is wrong, by simulation. Every cell simulates
paired studies and runs the verdict code itself (quantgate.judge.clustered: cluster_summary, cluster_bounds,
damage_in_force, rare_failure_count, classify — vectorised over studies; ``decide`` is the same functions on
one study) on them. The grid below is fixed before the runs.

Targets per cell, at a true page-weighted mean shift of one margin in the bad direction: false
``within_noise`` ≤ 6% with its 95% Clopper–Pearson upper bound ≤ 7% (``inconclusive`` is not a pass); at
shift 0, false ``regression`` ≤ 6%. Beside them: the pages and documents a null candidate (shift 0) needs to
pass with 80% power, per regime; null power at 1,000 pages in 100 documents and 400 in 40 of the skewed
ned model; item 5's delivered power; the interval alone (no count rule) at few documents, which sets
MIN_DOCUMENTS; and the verdict's default 10,000 resamples against the simulation's on the same studies.

    python benchmarks/verdict_calibration_documents.py [--quick] [--studies 4000] [--resamples 1000]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
from results_io import read_json, write_json
from scipy.stats import beta as beta_dist

from quantgate.judge import clustered as C
from quantgate.judge.boundaries import design  # the group-sequential boundaries (Lan–DeMets spending)
from quantgate.schema.settings import DEFAULT_RESAMPLES, VerdictSettings

MARGIN = 0.01
CHECKS_MARGIN = 0.02  # the registry's default margin for checks
ALPHA = C.ALPHA
CHUNK = 250  # studies that share one set of resamples
# gzipped: the per-cell tables and solved parameters are 100 KB of text, and the tracked tree has a size budget
OUT = Path(__file__).parent / "results" / "verdict_calibration_documents.json.gz"


# --- page and document models ------------------------------------------------------------------
# Every generator returns oriented differences d (higher is better) and a mask, both (S, G, P): S studies,
# G documents, P the most pages a document has. Shapes of documents: "one" (1 page: pages are independent),
# "5-15" (uniform 5..15 pages), "10" (exactly 10).
# skewed (the page model of benchmarks/verdict_calibration.py): baseline ned 0 half the time, else
# Beta(1, 12); the candidate changes 40% of pages by N(mu, 0.06), clipped to [0, 1]; each run changes a page
# with probability 0.1 by N(0, 0.03) (batch non-invariance). documents: the same, with each document's own
# share of perfect pages (Beta(2, 2)), share of changed pages (Beta(2, 3)) and shift (mu + N(0, 0.02)), so
# pages of a document are alike.

def _sizes(rng, S, G, shape):
    if shape == "one":
        return np.ones((S, G), int)
    if shape == "10":
        return np.full((S, G), 10)
    return rng.integers(5, 16, (S, G))


def _mask(sizes):
    P = int(sizes.max())
    return np.arange(P)[None, None, :] < sizes[:, :, None]


def _noise(rng, shape):
    return np.where(rng.random(shape) < 0.1, rng.normal(0, 0.03, shape), 0.0)


def _skewed(rng, shape, mu, clustered):
    S, G, P = shape
    if clustered:
        p0, pc = rng.beta(2, 2, (S, G, 1)), rng.beta(2, 3, (S, G, 1))
        mu_i = mu + rng.normal(0, 0.02, (S, G, 1))
    else:
        p0, pc, mu_i = 0.5, 0.4, mu
    b = np.where(rng.random(shape) < p0, 0.0, rng.beta(1, 12, shape))
    cand = np.where(rng.random(shape) < pc, np.clip(b + rng.normal(mu_i, 0.06, shape), 0, 1), b)
    return b, cand


def gen_skewed(rng, S, G, shape, k, p):
    """Independent pages (shape "one") or documents of alike pages: the skewed model shifted by k margins."""
    sizes = _sizes(rng, S, G, shape)
    mask = _mask(sizes)
    b, cand = _skewed(rng, mask.shape, p["mu"][k], shape != "one")
    return -(cand - b) + _noise(rng, mask.shape) - _noise(rng, mask.shape), mask


def gen_normal(rng, S, G, shape, k, p):
    mask = _mask(_sizes(rng, S, G, shape))
    return rng.normal(-k * MARGIN, 0.03, mask.shape), mask


def gen_document_damage(rng, S, G, shape, k, p):
    """Quantization damage that hits whole documents: a document is damaged with probability q_doc, and then
    every page's ned rises by delta (clipped to 1) on top of the skewed documents at shift 0."""
    sizes = _sizes(rng, S, G, shape)
    mask = _mask(sizes)
    b, cand = _skewed(rng, mask.shape, p["mu"][0], True)
    hit = rng.random((S, G, 1)) < p["q_doc"]
    cand = np.where(hit, np.clip(cand + p["delta"][k], 0, 1), cand)
    return -(cand - b) + _noise(rng, mask.shape) - _noise(rng, mask.shape), mask


def gen_rare_pages(rng, S, G, shape, k, p):
    """Rare catastrophic pages: each page, independently, is ruined (d = −D) with probability k·m/D."""
    d, mask = gen_skewed(rng, S, G, shape, 0, p)
    return np.where(rng.random(mask.shape) < k * p["m"] / p["D"], -p["D"], d), mask


def gen_ruined_documents(rng, S, G, shape, k, p):
    """Rare ruined documents: each document, independently of its size, is ruined (every page d = −D)."""
    d, mask = gen_skewed(rng, S, G, shape, 0, p)
    return np.where(rng.random((S, G, 1)) < k * MARGIN / p["D"], -p["D"], d), mask


def gen_outright(rng, S, G, shape, k, p):
    """Outright failures: each page, with probability q, reads nothing (candidate ned 1, d = b − 1)."""
    mask = _mask(_sizes(rng, S, G, shape))
    b, cand = _skewed(rng, mask.shape, p["mu"][0], False)
    cand = np.where(rng.random(mask.shape) < p["q"][k], 1.0, cand)
    return -(cand - b) + _noise(rng, mask.shape) - _noise(rng, mask.shape), mask


def _t12(rng, shape):
    return rng.standard_t(1.2, shape)


def gen_heavy(rng, S, G, shape, k, p):
    """Heavy-tailed bounded differences: symmetric c + 0.01·t(1.2), or one-sided c + 0.005·N(0, 1) −
    0.005·|t(1.2)| (most pages a little better, a heavy tail of worse ones); clipped to [−1, 1]."""
    mask = _mask(_sizes(rng, S, G, shape))
    if p["kind"] == "symmetric":
        x = 0.01 * _t12(rng, mask.shape)
    else:
        x = 0.005 * rng.standard_normal(mask.shape) - 0.005 * np.abs(_t12(rng, mask.shape))
    return np.clip(p["c"][k] + x, -1, 1), mask


def gen_checks(rng, S, G, shape, k, p):
    """checks-like discrete scores: a page has 1..8 checks, passed by the baseline with the page's probability
    (Beta(4, 1.5)); the candidate turns a pass into a failure with probability f, a failure into a pass
    with probability 0.03; the score is the share passed, so d takes a few values (multiples of 1/K)."""
    mask = _mask(_sizes(rng, S, G, shape))
    K = rng.integers(1, 9, mask.shape)
    checks = np.arange(8) < K[..., None]
    base = rng.random(checks.shape) < rng.beta(4, 1.5, mask.shape)[..., None]
    flip = rng.random(checks.shape) < np.where(base, p["f"][k], 0.03)
    cand = base ^ flip
    return ((cand & checks).sum(-1) - (base & checks).sum(-1)) / K, mask


GENERATORS = {"skewed": gen_skewed, "normal": gen_normal, "document_damage": gen_document_damage,
              "rare_pages": gen_rare_pages, "ruined_documents": gen_ruined_documents, "outright": gen_outright,
              "heavy": gen_heavy, "checks": gen_checks}


def _page_mean(gen, p, shape, k):
    """The page-weighted mean shift of a model, on one fixed large sample (common random numbers)."""
    d, mask = gen(np.random.default_rng(99), 2000, 100 if shape == "one" else 40, shape, k, p)
    return d[mask].mean()


def _solve(f, lo, hi, target, increasing=True):
    for _ in range(22):
        mid = (lo + hi) / 2
        if (f(mid) < target) == increasing:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


_CALIBRATED: dict = {}  # (model, shape, params) -> solved parameters; --quick reads the committed run's


def _key(model, shape, p) -> str:
    return json.dumps([model, shape, p], sort_keys=True)


def _load_calibration(path: Path) -> None:
    if path.exists():
        for k, v in read_json(path).get("calibrated", {}).items():
            _CALIBRATED[k] = {a: ({int(j): x for j, x in b.items()} if isinstance(b, dict) else b)
                              for a, b in v.items()}


def calibrate(model: str, p: dict, shape: str) -> dict:
    """Solve each model's parameters so the true page-weighted shift is exactly −k margins (k = 0, 1)."""
    key = _key(model, shape, p)
    if key not in _CALIBRATED:
        _CALIBRATED[key] = _calibrate(model, dict(p), shape)
    return _CALIBRATED[key]


def _calibrate(model: str, p: dict, shape: str) -> dict:
    clustered = shape != "one"
    if model in ("skewed", "document_damage", "rare_pages", "ruined_documents", "outright"):
        p["mu"] = {k: _solve(lambda mu, k=k: _page_mean(gen_skewed, {"mu": {k: mu}}, "one" if not clustered
                                                         else "10", k), -0.2, 0.2, -k * MARGIN, increasing=False)
                   for k in ((0, 1) if model == "skewed" else (0,))}
    if model == "document_damage":
        p["delta"] = {0: 0.0, 1: _solve(lambda dl: _page_mean(gen_document_damage, {**p, "delta": {1: dl}}, shape, 1),
                                        0.0, 0.5, -MARGIN, increasing=False)}
    if model == "outright":
        p["q"] = {0: 0.0, 1: _solve(lambda q: _page_mean(gen_outright, {**p, "q": {1: q}}, shape, 1), 0.0, 0.05,
                                    -MARGIN, increasing=False)}
    if model == "heavy":
        p["c"] = {k: _solve(lambda c, k=k: _page_mean(gen_heavy, {**p, "c": {k: c}}, shape, k), -0.2, 0.2,
                            -k * MARGIN) for k in (0, 1)}
    if model == "checks":  # E[d] = 0.03·E[1 − p] − f·E[p], E[p] = 4/5.5: f in closed form
        ep = 4 / 5.5
        p["f"] = {k: (k * CHECKS_MARGIN + 0.03 * (1 - ep)) / ep for k in (0, 1)}
    return p


# --- the grid (fixed before the runs) --------------------------------------------------------------

@dataclass
class Cell:
    name: str
    regime: str
    model: str
    documents: int  # G (for shape "one": pages)
    shape: str
    params: dict = field(default_factory=dict)
    D: float | None = None  # declared worst_page_damage (None: the range, 1)
    D_doc: float | None = None  # declared worst_document_damage (None: D)
    margin: float = MARGIN
    lifted: bool = False  # the interval alone: no count rule, no bounded test, no minimum of documents
    as_pages: bool = False  # documents of 10 pages judged as 10 independent pages each (the old verdict)
    sequential: dict | None = None  # {"n_looks": 4} for the group-sequential design


def grid() -> list[Cell]:
    cells = []

    def add(*a, **k):
        cells.append(Cell(*a, **k))

    for n in (300, 1000):
        add(f"independent skewed, {n} pages", "independent light-tailed pages", "skewed", n, "one")
    add("independent skewed, 100 pages, D=0.3", "independent light-tailed pages", "skewed", 100, "one", D=0.3)
    add("independent normal, 300 pages", "independent light-tailed pages", "normal", 300, "one")
    dd = {"q_doc": 0.1}
    add("document damage, 400 docs of 10", "clustered documents (whole-document damage)", "document_damage", 400, "10",
        dd)
    for g in (20, 40, 60, 100):
        add(f"document damage, {g} docs, D_doc=0.2", "clustered documents (whole-document damage)", "document_damage",
            g, "5-15", dd, D_doc=0.2)
    add("documents skewed, 400 docs of 10", "clustered documents (all documents shift)", "skewed", 400, "10")
    add("documents skewed, 100 docs, D_doc=0.2", "clustered documents (all documents shift)", "skewed", 100, "5-15",
        D_doc=0.2)
    for n, D in ((30, None), (50, None), (30, 0.3), (50, 0.3), (90, 0.3), (100, 0.3), (300, 0.3), (300, None)):
        add(f"rare pages D=0.3, {n} pages" + (", D=0.3 declared" if D else ""), "rare catastrophic pages",
            "rare_pages", n, "one", {"D": 0.3, "m": MARGIN}, D=D)
    for n in (300, 1000):
        add(f"rare pages D=1, {n} pages", "rare catastrophic pages", "rare_pages", n, "one", {"D": 1.0, "m": MARGIN})
    for g in (100, 400):
        add(f"ruined documents D=1, {g} docs of 10", "rare ruined documents", "ruined_documents", g, "10", {"D": 1.0})
    for g in (40, 100, 150):
        add(f"ruined documents D=0.3, {g} docs, D_doc=0.3", "rare ruined documents", "ruined_documents", g, "5-15",
            {"D": 0.3}, D_doc=0.3)
    for kind in ("symmetric", "one_sided"):
        for n in (300, 1000):
            add(f"heavy {kind}, {n} pages", "heavy-tailed bounded differences", "heavy", n, "one", {"kind": kind})
    for n in (150, 300, 1000):
        add(f"checks, {n} pages", "checks-like discrete scores", "checks", n, "one", margin=CHECKS_MARGIN)
    add("sequential outright failures, 400 pages", "sequential, outright failures", "outright", 400, "one",
        sequential={"n_looks": 4})
    add("sequential rare pages D=0.3, 400 pages, D=0.3", "sequential, outright failures", "rare_pages", 400, "one",
        {"D": 0.3, "m": MARGIN}, D=0.3, sequential={"n_looks": 4})
    add("sequential document damage, 150 docs of 10, D_doc=0.2", "sequential, outright failures", "document_damage",
        150, "10", dd, D_doc=0.2, sequential={"n_looks": 3})
    return cells


def diagnostics_grid() -> list[Cell]:
    """The interval alone (no count rule, no bounded test): at few documents (where it holds sets
    MIN_DOCUMENTS), on the regimes the count rule and the bounded test are for, on documents judged as
    independent pages, and the sequential design before it judged documents (looks from 100 pages, interval only)."""
    out = []
    for n in (300, 1000):
        out.append(Cell(f"interval alone: heavy one_sided, {n} pages", "diagnostic", "heavy", n, "one",
                        {"kind": "one_sided"}, lifted=True))
    out.append(Cell("interval alone: rare pages D=1, 300 pages", "diagnostic", "rare_pages", 300, "one",
                    {"D": 1.0, "m": MARGIN}, lifted=True))
    out.append(Cell("interval alone: rare pages D=0.3, 100 pages", "diagnostic", "rare_pages", 100, "one",
                    {"D": 0.3, "m": MARGIN}, lifted=True))
    out.append(Cell("interval alone: checks, 150 pages", "diagnostic", "checks", 150, "one", margin=CHECKS_MARGIN,
                    lifted=True))
    for g in (40, 100):
        out.append(Cell(f"as pages: document damage, {g} docs of 10", "diagnostic", "document_damage", g, "10",
                        {"q_doc": 0.1}, lifted=True, as_pages=True))
    out.append(Cell("interval alone: sequential outright failures, looks from 100 pages", "diagnostic", "outright",
                    400, "one", lifted=True, sequential={"n_looks": 4}))
    for g in (10, 15, 20, 30, 40, 60):
        out.append(Cell(f"interval alone: documents skewed, {g} docs", "diagnostic", "skewed", g, "5-15", lifted=True))
        out.append(Cell(f"interval alone: half the documents damaged, {g} docs", "diagnostic", "document_damage", g,
                        "5-15", {"q_doc": 0.5}, lifted=True))
        out.append(Cell(f"interval alone: a tenth of documents damaged, {g} docs", "diagnostic", "document_damage", g,
                        "5-15", {"q_doc": 0.1}, lifted=True))
    return out


LADDER_ONE = (100, 150, 200, 300, 400, 600, 1000, 1500, 2500)
LADDER_DOCS = (30, 40, 60, 100, 150, 200, 300, 400, 600)


# --- judging: the verdict code, vectorised ---------------------------------------------------------

def judge(docs, cell: Cell, alpha: float, counts, look_alpha: float | None = None):
    """What ``decide`` does, for S studies: the interval at ``look_alpha`` (a sequential look's α_k) or
    ``alpha``; the count rule and the bounded test at ``alpha``. Documents are simulated in a random order,
    which is the serving order."""
    cl = C.cluster_summary(docs)
    b = C.cluster_bounds(docs, cell.margin, alpha if look_alpha is None else look_alpha, counts, cl)
    D, Dd, _, _ = C.damage_in_force(docs, cell.D, 1.0, cell.D_doc)
    pr, dr = C.rare_failure_count(cell.margin, D, alpha), C.documents_rule(cell.margin, Dd, cl.size_ratio, alpha)
    bounded = C.log_wealth(docs, cell.margin, Dd)[:, -1] >= np.log(1 / alpha)
    if cell.lifted:
        pr, dr, bounded = 0, 0, True
    zero = (docs.sumsq == 0).all(axis=1)
    v, r = C.classify(cl, b, cell.margin, C.Facts(pages_rule=pr, documents_rule=dr, bounded_ok=bounded, all_zero=zero,
                                                 outputs_identical=zero, noise_floor=None),
                      C.Rules(min_documents=2 if cell.lifted else C.MIN_DOCUMENTS))
    return v, r, cl


def _seed(*parts) -> int:
    return int(hashlib.sha256("\x00".join(map(str, parts)).encode()).hexdigest()[:12], 16)


def _simulate(cell: Cell, k: int, studies: int, resamples: int, p: dict, seed_tag=""):
    """Yields (docs, verdicts, reasons, cluster) per chunk of studies (fixed design), or the sequential
    design's final verdict per study, with the fixed design's on the same studies."""
    gen = GENERATORS[cell.model]
    for c0 in range(0, studies, CHUNK):
        s = min(CHUNK, studies - c0)
        rng = np.random.default_rng(_seed(cell.name, k, c0, seed_tag))
        d, mask = gen(rng, s, cell.documents, cell.shape, k, p)
        if cell.as_pages:  # every document has 10 pages: make each page a document
            d, mask = d.reshape(s, -1, 1), mask.reshape(s, -1, 1)
        docs = C.documents_from_padded(d, mask)
        counts = list(C.resample_counts(docs.pages.shape[1], resamples, _seed(cell.name, k, c0, "resamples")))
        yield docs, counts


def _sequential(docs, cell: Cell, counts, resamples):
    """Looks at documents in serving order (the simulated documents are already in a random order)."""
    sizes = docs.pages[0].astype(int)  # shapes "one" and "10": every study has the same sizes
    D0 = cell.D if cell.D is not None else 1.0
    Dd0 = cell.D_doc if cell.D_doc is not None else D0
    if cell.lifted:  # the design before document-level looks: no look before 60 pages (FIRST_LOOK), no count rule
        first_pages, first_documents = 60, 1
    else:
        first_pages = C.rare_failure_count(cell.margin, D0)
        first_documents = max(C.MIN_DOCUMENTS, C.documents_rule(cell.margin, Dd0, sizes.max() / sizes.mean()))
    looks = C.plan_looks(sizes, n_looks=cell.sequential["n_looks"], first_pages=first_pages,
                         first_documents=first_documents)
    pages = [int(sizes[:g].sum()) for g in looks]
    plan = design(pages, n_max=pages[-1])
    S = docs.pages.shape[0]
    final_v = np.full(S, C.VERDICTS.index("inconclusive"))
    final_r = np.full(S, C.REASONS.index("ci_straddles_margin"))
    at = np.zeros(S, int)
    open_ = np.ones(S, bool)
    for j, (g, lb) in enumerate(zip(looks, plan, strict=True)):
        head = docs.head(g)
        cnt = counts if g == docs.pages.shape[1] else list(C.resample_counts(g, resamples, _seed(cell.name, g)))
        v, r, _ = judge(head, cell, ALPHA, cnt, look_alpha=lb.nominal_alpha)
        decisive = np.isin(v, [C.VERDICTS.index(x) for x in ("within_noise", "regression", "not_equivalent")])
        last = j == len(looks) - 1
        take = open_ & (decisive | last)
        final_v[take], final_r[take], at[take] = v[take], r[take], j + 1
        open_ &= ~take
    return final_v, final_r, at, looks, pages, [lb.nominal_alpha for lb in plan]


def _rate(k: int, n: int) -> dict:
    up = float(beta_dist.ppf(0.95, k + 1, n - k)) if k < n else 1.0
    return {"rate": k / n, "count": int(k), "studies": n, "upper95": up}


def run_cell(cell: Cell, studies: dict, resamples: int) -> dict:
    p = calibrate(cell.model, cell.params, cell.shape)
    out = {**{k: v for k, v in asdict(cell).items() if k != "params"}, "params": cell.params}
    t0 = time.perf_counter()
    for k, key in ((1, "at_margin"), (0, "at_zero")):
        n = studies[key]
        if not n:
            continue
        V = np.zeros(n, int)
        R = np.zeros(n, int)
        extra = {"design_effect": [], "effective_n": [], "pages": [], "fixed_within_noise": 0, "looks_at": []}
        i = 0
        for docs, counts in _simulate(cell, k, n, resamples, p):
            s = docs.pages.shape[0]
            if cell.sequential:
                v, r, at, looks, pages, alphas = _sequential(docs, cell, counts, resamples)
                fv, _, _ = judge(docs, cell, ALPHA, counts)
                extra["fixed_within_noise"] += int((fv == 0).sum())
                extra["looks_at"] += at.tolist()
                extra.update(looks_documents=looks, looks_pages=pages, nominal_alpha=alphas)
                cl = C.cluster_summary(docs)
            else:
                v, r, cl = judge(docs, cell, ALPHA, counts)
            V[i:i + s], R[i:i + s] = v, r
            extra["design_effect"] += cl.design_effect.tolist()
            extra["effective_n"] += cl.effective_n.tolist()
            extra["pages"] += cl.pages.tolist()
            i += s
        res = {"within_noise": _rate(int((V == 0).sum()), n), "regression": _rate(int((V == 1).sum()), n),
               "inconclusive": (V == 2).sum() / n,
               "reasons": {C.REASONS[j]: int((R == j).sum()) for j in range(len(C.REASONS)) if (R == j).any()},
               "design_effect_median": float(np.median(extra["design_effect"])),
               "effective_n_median": float(np.median(extra["effective_n"])),
               "pages_mean": float(np.mean(extra["pages"]))}
        if cell.sequential:
            res["fixed_design_within_noise"] = extra["fixed_within_noise"] / n
            res["stopped_at_look"] = {str(j): int(np.sum(np.array(extra["looks_at"]) == j))
                                      for j in range(1, len(extra["looks_documents"]) + 1)}
            res.update(looks_documents=extra["looks_documents"], looks_pages=extra["looks_pages"],
                       nominal_alpha=extra["nominal_alpha"])
        out[key] = res
    out["seconds"] = round(time.perf_counter() - t0, 1)
    return out


def passes(cell_result: dict) -> dict:
    m, z = cell_result.get("at_margin"), cell_result.get("at_zero")
    ok_m = m is None or (m["within_noise"]["rate"] <= 0.06 and m["within_noise"]["upper95"] <= 0.07)
    ok_z = z is None or z["regression"]["rate"] <= 0.06
    return {"false_within_noise_ok": bool(ok_m), "false_regression_ok": bool(ok_z)}


# --- power: pages and documents a null candidate needs -----------------------------------------------

def power_at(cell: Cell, size: int, studies: int, resamples: int) -> tuple[float, float]:
    """Share of null studies (shift 0) of ``size`` documents that pass, and their mean pages."""
    c = Cell(**{**asdict(cell), "documents": size, "sequential": None})
    p = calibrate(c.model, c.params, c.shape)
    wins, pages = 0, 0.0
    for docs, counts in _simulate(c, 0, studies, resamples, p, seed_tag="power"):
        wins += int((judge(docs, c, ALPHA, counts)[0] == 0).sum())
        pages += float(docs.pages.sum())
    return wins / studies, pages / studies


def ladder(cell: Cell, studies: int, resamples: int) -> dict:
    rungs = LADDER_ONE if cell.shape == "one" else LADDER_DOCS
    curve, pages = {}, {}
    for size in rungs:
        curve[size], pages[size] = power_at(cell, size, studies, resamples)
        if curve[size] >= 0.8:
            break
    hit = next((s for s, pw in curve.items() if pw >= 0.8), None)
    return {"power_by_documents": {str(s): v for s, v in curve.items()}, "documents_for_80": hit,
            "pages_for_80": None if hit is None else round(pages[hit]), "largest_size_tried": rungs[-1]}


# --- item 5: delivered power of pages_needed ----------------------------------------------------------

def delivered_power(pilots: int, resamples: int, shift_margins: float) -> dict:
    """Pilots of 50 pages with d ~ N(shift, 0.03) (shift −0.8·m), pages_needed planned at the true
    shift (the declared expected_shift), then a fresh study of that size from the same distribution, judged
    with the default rules (D = 1). The fresh studies' bounded tests run together, padded with empty
    documents after each study's last (which change nothing); their intervals one study at a time."""
    rng = np.random.default_rng(_seed("delivered", shift_margins))
    shift = -shift_margins * MARGIN
    x = rng.normal(shift, 0.03, (pilots, 50))
    pilot = C.Documents(np.ones_like(x), x, x * x, x.copy())
    cl = C.cluster_summary(pilot)
    b = C.cluster_bounds(pilot, MARGIN, ALPHA, list(C.resample_counts(50, resamples, _seed("pilot"))), cl)
    pr = C.rare_failure_count(MARGIN, 1.0)
    sizes = C.plan(cl, b, MARGIN, damage_document=1.0, expected_shift=shift, pages_rule=pr,
                   documents_rule=pr).pages
    N = int(sizes.max())
    y = rng.normal(shift, 0.03, (pilots, N))
    keep = np.arange(N)[None, :] < sizes[:, None]
    y = np.where(keep, y, 0.0)
    lw = C.log_wealth(C.Documents(keep.astype(float), y, y * y, np.where(keep, y, np.inf)), MARGIN, 1.0)
    bounded = lw[np.arange(pilots), sizes - 1] >= np.log(1 / ALPHA)
    wins = 0
    for i, n in enumerate(sizes):
        xi = y[i, :n][None]
        docs = C.Documents(np.ones_like(xi), xi, xi * xi, xi.copy())
        cli = C.cluster_summary(docs)
        bi = C.cluster_bounds(docs, MARGIN, ALPHA, list(C.resample_counts(int(n), resamples, _seed("fresh", i))), cli)
        v, _ = C.classify(cli, bi, MARGIN, C.Facts(pages_rule=pr, documents_rule=pr, bounded_ok=bounded[i],
                                                   all_zero=False, outputs_identical=False, noise_floor=None))
        wins += int(v[0] == 0)
    return {"pilots": pilots, "pilot_pages": 50, "true_shift": shift, "planned_at": shift,
            "pages_needed_median": float(np.median(sizes)), "pages_needed_range": [int(sizes.min()), int(sizes.max())],
            "delivered_power": wins / pilots, "target": 0.75, "met": bool(wins / pilots >= 0.75)}


# --- the worked example of docs/statistics.md -----------------------------------------------

def worked_example() -> list[dict]:
    """A seeded multi-page document set (200 documents of 5..15 pages, the skewed document model with a
    tenth of documents damaged by a quarter of a margin in all), judged by ``decide`` three ways."""
    p = calibrate("document_damage", {"q_doc": 0.1}, "5-15")
    rng = np.random.default_rng(2027)
    sizes = rng.integers(5, 16, 200)
    b, cand = _skewed(rng, (1, 200, 15), p["mu"][0], True)
    hit = rng.random((1, 200, 1)) < 0.1
    cand = np.where(hit, np.clip(cand + p["delta"][1] / 4, 0, 1), cand)
    mask = _mask(sizes[None])
    d = (-(cand - b))[mask]
    docs = [f"report-{i:03d}.pdf" for i in range(200) for _ in range(sizes[i])]
    out = []
    for label, ids, kw in (("pages as if independent (one document each)", [f"p{i}" for i in range(len(d))], {}),
                           ("documents, defaults (D = D_doc = 1)", docs, {}),
                           ("documents, worst_document_damage 0.2 declared", docs, {"worst_document_damage": 0.2})):
        dec = C.decide(d, ids, VerdictSettings(metric="ned", margin=MARGIN, seed=7, **kw))
        out.append({"judged_as": label, **asdict(dec), "assumption": C.assumption(dec)})
    return out


# --- main ---------------------------------------------------------------------------------------------

def _row(r: dict) -> str:
    m, z = r.get("at_margin"), r.get("at_zero")
    fm = f"{m['within_noise']['rate']:.4f} ({m['within_noise']['upper95']:.4f})" if m else "-"
    pw = f"{z['within_noise']['rate']:.3f}" if z else "-"
    rg = f"{z['regression']['rate']:.3f}" if z else "-"
    deff = f"{(z or m)['design_effect_median']:.2f}"
    ok = passes(r)
    flag = "" if ok["false_within_noise_ok"] and ok["false_regression_ok"] else "  <-- MISSES TARGET"
    return f"{r['name']:<52}{fm:>18}{rg:>8}{pw:>8}{deff:>7}{flag}"


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="a few hundred studies per cell, no ladders (for tests)")
    ap.add_argument("--studies", type=int, default=4000)
    ap.add_argument("--zero-studies", type=int, default=1000)
    ap.add_argument("--resamples", type=int, default=1000)
    ap.add_argument("--check-resamples", type=int, default=DEFAULT_RESAMPLES)
    ap.add_argument("--out", type=Path, default=OUT)
    a = ap.parse_args(argv)
    if a.quick:
        a.studies, a.zero_studies, a.resamples = 250, 0, 1000
        _load_calibration(OUT)
    t0 = time.perf_counter()
    print(f"{'cell':<52}{'false pass (95% up)':>18}{'regr@0':>8}{'pass@0':>8}{'deff':>7}")
    cells = []
    for cell in grid():
        cells.append(run_cell(cell, {"at_margin": a.studies, "at_zero": a.zero_studies}, a.resamples))
        cells[-1]["targets"] = passes(cells[-1])
        print(_row(cells[-1]), flush=True)
    args = argv if argv is not None else sys.argv[1:]
    res = {"command": "python " + " ".join([Path(sys.argv[0]).as_posix(), *args]),
           "quick": a.quick, "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                                          "numpy": np.__version__},
           "margin": MARGIN, "checks_margin": CHECKS_MARGIN, "alpha_one_sided": ALPHA, "resamples": a.resamples,
           "min_pages": C.MIN_PAGES, "min_documents": C.MIN_DOCUMENTS, "cells": cells}
    if not a.quick:
        res["worked_example"] = worked_example()
        for w in res["worked_example"]:
            print(f"  {w['judged_as']:<48} {w['verdict']} ({w['reason']}), deff {w['design_effect']:.2f}")
        print("diagnostics: the interval alone (no count rule, no bounded test, no minimum of documents):")
        res["diagnostics"] = []
        for cell in diagnostics_grid():
            res["diagnostics"].append(run_cell(cell, {"at_margin": a.studies // 2, "at_zero": a.studies // 2},
                                               a.resamples))
            print(_row(res["diagnostics"][-1]), flush=True)
        print("null power, skewed documents of 10 pages:")
        res["null_power"] = []
        for g in (100, 40):
            for D_doc in (None, 0.3, 0.2, 0.1):
                c = Cell(f"null power, {g * 10} pages in {g} docs" + (f", D_doc={D_doc}" if D_doc else ""),
                         "null power", "skewed", g, "10", D_doc=D_doc)
                pw = power_at(c, g, 2000, a.resamples)[0]
                res["null_power"].append({"pages": g * 10, "documents": g, "D_doc": D_doc, "power": pw})
                print(f"  {c.name:<50} power {pw:.3f}", flush=True)
        print("pages and documents a null candidate needs for 80% power:")
        res["needed_for_80"] = []
        seen = set()
        for cell in grid():
            key = (cell.regime, cell.model, cell.shape, cell.D, cell.D_doc, tuple(sorted(cell.params.items())))
            if cell.sequential or key in seen:
                continue
            seen.add(key)
            lad = ladder(cell, 400, a.resamples)
            what = cell.params.get("kind") or (f"damage {cell.params['D']}" if "D" in cell.params else "")
            pages = "1 page" if cell.shape == "one" else f"{cell.shape} pages"
            label = (f"{cell.model} {what} ({pages} per document), D={cell.D or 1}"
                     + (f", D_doc={cell.D_doc}" if cell.D_doc else ""))
            res["needed_for_80"].append({"regime": cell.regime, "label": label, "model": cell.model,
                                         "shape": cell.shape, "D": cell.D, "D_doc": cell.D_doc,
                                         "params": cell.params, **lad})
            print(f"  {label:<50} {lad['pages_for_80']} pages, {lad['documents_for_80']} documents "
                  f"{lad['power_by_documents']}", flush=True)
        print("item 5, delivered power:")
        res["delivered_power"] = [delivered_power(n, a.resamples, s) for n, s in ((400, 0.8), (200, 0.0))]
        for dp in res["delivered_power"]:
            print(f"  true shift {dp['true_shift']:+.4f}: median {dp['pages_needed_median']:.0f} pages, "
                  f"delivered power {dp['delivered_power']:.3f}", flush=True)
        if a.check_resamples and a.check_resamples != a.resamples:
            print(f"the same studies at {a.check_resamples} resamples:")
            res["resamples_check"] = []
            names = ("rare pages D=0.3, 100 pages, D=0.3 declared", "document damage, 100 docs, D_doc=0.2",
                     "checks, 300 pages", "heavy one_sided, 1000 pages", "interval alone: documents skewed, 30 docs",
                     "interval alone: checks, 150 pages", "interval alone: heavy one_sided, 300 pages")
            for cell in grid() + diagnostics_grid():
                if cell.name in names:  # false passes at one margin and passes at shift 0, same studies
                    lo = run_cell(cell, {"at_margin": 1000, "at_zero": 1000}, a.resamples)
                    hi = run_cell(cell, {"at_margin": 1000, "at_zero": 1000}, a.check_resamples)
                    row = {"cell": cell.name, "studies": 1000}
                    for key in ("at_margin", "at_zero"):
                        row[key] = {str(a.resamples): lo[key]["within_noise"]["rate"],
                                    str(a.check_resamples): hi[key]["within_noise"]["rate"]}
                    res["resamples_check"].append(row)
                    print(f"  {cell.name:<50} pass at m {row['at_margin']}, at 0 {row['at_zero']}", flush=True)
    res["calibrated"] = dict(_CALIBRATED)
    res["all_targets_met"] = all(c["targets"]["false_within_noise_ok"] and c["targets"]["false_regression_ok"]
                                 for c in cells)
    res["wall_s"] = round(time.perf_counter() - t0, 1)
    if not a.quick or a.out != OUT:
        a.out.parent.mkdir(parents=True, exist_ok=True)
        write_json(a.out, res)
    print(f"every cell meets its targets: {res['all_targets_met']}; wall {res['wall_s']:.0f} s")
    return res


if __name__ == "__main__":
    main()
