"""Truth-free bounds (quantgate.scoring.bounds): each bound searched for a counterexample against the metric as it
is really scored (``score_one``, which calls ``get_metric(name).fn`` with its normalization and gives a blank
output the worst value), an exhaustive known answer for ned, and the registry's declaration of a bound kind."""

from __future__ import annotations

import itertools
from fractions import Fraction
from typing import get_args

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError
from rapidfuzz.distance import Levenshtein
from rapidfuzz.process import cdist

from quantgate.errors import DataError
from quantgate.schema.metrics import METRICS, BoundKind, MetricSpec
from quantgate.scoring.bounds import _KINDS, bound_rows, truth_free_bound
from quantgate.scoring.metrics import REGISTRY, get_metric, score_one

SETTINGS = settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))
TOL = 1e-12  # floating point only: t="da", b="cda", c="cd" exceeds ned's bound by 1.1e-16 (test below)


def damage(metric: str, b: str, c: str, t: str) -> float | None:
    """How much worse c scores than b on truth t, as a verdict judges it (cer and wer clipped at 1)."""
    m = get_metric(metric)
    sb, sc = score_one(m, b, t, []), score_one(m, c, t, [])
    if sb is None or sc is None:
        return None
    if m.spec.clipped:
        sb, sc = min(sb, 1.0), min(sc, 1.0)
    return sb - sc if m.higher_is_better else sc - sb


# pieces that the normalizations fold or strip: whitespace runs, NFKC compatibility forms (ﬁ → fi, Ａ → A),
# markdown syntax (bow_f1 strips it), CJK characters (each its own word)
CHARS = st.sampled_from(["a", "b", "c", " ", "  ", "\n", "\t", "ﬁ", "Ａ", "A", "中", "文"])
TOKENS = st.sampled_from(["a", "b", "c", "ab", "中", "文", "**x**", "# ", "- ", "|", "\n", " ", "  ", "ﬁ"])


def texts(pieces):
    return st.lists(pieces, max_size=12).map("".join)


@st.composite
def edited(draw, pieces):
    """Three texts, each an edit of the one before (t → b → c), so most triples are close — where bounds are
    tight — while independent draws are mixed in by hypothesis's own shrinking and the unrelated strategy."""
    t = draw(st.lists(pieces, max_size=12))

    def edit(xs):
        xs = list(xs)
        for _ in range(draw(st.integers(0, 4))):
            op = draw(st.sampled_from(["ins", "del", "sub"]))
            i = draw(st.integers(0, len(xs)))
            if op == "ins":
                xs.insert(i, draw(pieces))
            elif xs and i < len(xs):
                xs[i:i + 1] = [] if op == "del" else [draw(pieces)]
        return xs

    b = edit(t)
    c = edit(b)
    return "".join(b), "".join(c), "".join(t)


PROVEN = [n for n, m in METRICS.items() if m.bound in ("ned", "char_edit_rate", "word_edit_rate", "bag_f1")]


def test_the_proven_bounds_are_the_text_metrics():
    assert sorted(PROVEN) == ["bow_f1", "cer", "ned", "wer"]


@pytest.mark.parametrize("metric", PROVEN)
@SETTINGS
@given(data=st.data())
def test_no_truth_makes_the_damage_exceed_the_bound(metric, data):
    pieces = TOKENS if METRICS[metric].bound in ("word_edit_rate", "bag_f1") else CHARS
    b, c, t = data.draw(st.one_of(edited(pieces), st.tuples(texts(pieces), texts(pieces), texts(pieces))))
    bound = truth_free_bound(metric, b, c)
    assert bound is not None and 0.0 <= bound <= METRICS[metric].margin_ceiling
    d = damage(metric, b, c, t)
    assert d is not None and d <= bound + TOL, (metric, b, c, t, d, bound)
    # the bound needs no truth: the truth equal to either output is one of the truths it covers
    for truth in (b, c):
        assert damage(metric, b, c, truth) <= bound + TOL


@pytest.mark.parametrize("metric", PROVEN)
@settings(max_examples=150, deadline=None)
@given(b=texts(CHARS))
def test_outputs_read_alike_are_bounded_by_zero(metric, b):
    # the same text re-wrapped (whitespace folded by every text metric's normalization) scores alike on any truth
    c = "  " + b.replace(" ", " \n ") + "\t"
    assert truth_free_bound(metric, b, c) == 0.0


@pytest.mark.parametrize("metric, b, c, t, bound", [
    ("ned", "aba", "ab", "ba", 2 / 3),
    ("cer", "aaa", "aaaa", "aa", 0.5),
    ("wer", "a a a", "a a a a", "a a", 0.5),
    ("bow_f1", "a b", "a", "b", 2 / 3),
])
def test_each_proven_bound_is_reached(metric, b, c, t, bound):
    """Found by exhaustive search over short strings: the truth t makes the damage equal the bound, so no smaller
    function of the same quantities bounds it."""
    assert truth_free_bound(metric, b, c) == pytest.approx(bound, abs=1e-15)
    assert damage(metric, b, c, t) == pytest.approx(bound, abs=1e-15)


def test_raw_outputs_would_break_the_bound():
    """The bound is computed on normalized texts: on raw ones it fails by a factor of ten."""
    b, c, t = "a" + " " * 20, "b" + " " * 20, "a"
    assert damage("ned", b, c, t) == 1.0
    raw = 2 * Levenshtein.normalized_distance(b, c)
    assert raw == pytest.approx(2 / 21) and raw < 0.1
    assert truth_free_bound("ned", b, c) == 1.0


def test_floating_point_exceeds_the_exact_bound_by_one_ulp():
    b, c, t = "cda", "cd", "da"
    d, bound = damage("ned", b, c, t), truth_free_bound("ned", b, c)
    assert 0 < d - bound < 1e-15  # 1 - 1/3 in floats is one ulp above 2/3
    exact = Fraction(Levenshtein.distance(c, t), 2) - Fraction(Levenshtein.distance(b, t), 3)
    assert exact == Fraction(2, 3) == Fraction(1 + (3 - 2), 3)  # the bound, (e + |b| - |c|) / |b|, reached exactly


def _all_strings(alphabet: str, n: int) -> list[str]:
    return ["".join(p) for k in range(n + 1) for p in itertools.product(alphabet, repeat=k)]


def test_ned_exhaustively_on_two_letters():
    """Every (t, b, c) up to length 5 on {a, b}, in exact integer arithmetic: ned's damage never exceeds
    2·ned(b, c), the ratio 2 is reached (t = "ba", b = "aba", c = "ab"), and the tighter bound quantgate uses
    holds too and is reached; so does the edit-rate bound of cer."""
    s = _all_strings("ab", 5)
    n = np.array([len(x) for x in s], dtype=np.int64)
    ed = cdist(s, s, scorer=Levenshtein.distance, dtype=np.int64, workers=1)
    # indices [t, b, c]
    x, y = ed[:, :, None], ed[:, None, :]  # ED(b, t), ED(c, t)
    e = ed[None, :, :]  # ED(b, c)
    nt, nb, nc = n[:, None, None], n[None, :, None], n[None, None, :]
    lb, lc = np.maximum(np.maximum(nb, nt), 1), np.maximum(np.maximum(nc, nt), 1)
    mbc = np.maximum(np.maximum(nb, nc), 1)
    dmg_num, dmg_den = y * lb - x * lc, lb * lc  # damage = y/lc - x/lb (ED is 0 where a length is 0)
    # damage <= 2 e / mbc, exactly
    assert (dmg_num * mbc <= 2 * e * dmg_den).all()
    ratio_two = (dmg_num * mbc == 2 * e * dmg_den) & (e > 0)
    t, b, c = s.index("ba"), s.index("aba"), s.index("ab")
    assert ratio_two[t, b, c]
    # quantgate's bound, min(1, (e + max(0, |b| - |c|)) / mbc), holds exactly and is reached
    tight = e + np.maximum(nb - nc, 0)
    assert ((dmg_num * mbc <= tight * dmg_den) | (dmg_num <= dmg_den)).all()
    assert ((dmg_num * mbc == tight * dmg_den) & (e > 0)).any()
    # and it is what truth_free_bound returns
    for i, j in [(b, c), (s.index("abab"), s.index("b")), (s.index("a"), s.index("bbbb"))]:
        assert truth_free_bound("ned", s[i], s[j]) == pytest.approx(min(1, tight[0, i, j] / mbc[0, i, j]), abs=1e-15)
    # cer, clipped at 1: min(1, y/T) - min(1, x/T) <= min(1, 2e / (|b| + e)), T = max(|t|, 1)
    tt = np.maximum(nt, 1)
    cer_num = np.minimum(y, tt) - np.minimum(x, tt)  # over tt
    bound_num, bound_den = 2 * e, np.maximum(nb + e, 1)
    assert ((cer_num * bound_den <= bound_num * tt) | (cer_num <= 0)).all()


def test_a_sample_of_the_exhaustive_damages_is_the_metric_s_own():
    # the integer arithmetic above is rapidfuzz's normalized distance, as the registered ned computes it
    for t, b, c in [("ba", "aba", "ab"), ("", "a", "ab"), ("abba", "ab", "")]:
        lb, lc = max(len(b), len(t)), max(len(c), len(t))
        mine = (Levenshtein.distance(c, t) / lc if lc else 0) - (Levenshtein.distance(b, t) / lb if lb else 0)
        theirs = get_metric("ned").fn(c, t) - get_metric("ned").fn(b, t)
        assert mine == pytest.approx(theirs, abs=1e-15)


def test_blank_outputs_follow_the_scorer():
    for metric in PROVEN:
        assert truth_free_bound(metric, "  ", "\n") == 0.0  # both scored worst
        assert truth_free_bound(metric, "text", " ") == METRICS[metric].margin_ceiling  # candidate read nothing
        assert truth_free_bound(metric, " ", "text") == 0.0  # nothing scores below the worst
        for t in ("", "text", "other words"):
            assert damage(metric, " ", "text", t) <= 0.0


def test_table_teds_is_bounded_by_zero_when_only_text_around_the_tables_changed():
    table = "| a | b |\n|---|---|\n| 1 | 2 |\n"
    b, c = "Intro words.\n\n" + table, "Other intro entirely.\n\n" + table
    assert truth_free_bound("table_teds", b, c) == 0.0
    for t in (table, "| a | b |\n|---|---|\n| 1 | 3 |\n", "| x |\n|---|\n| y |\n"):
        assert damage("table_teds", b, c, t) == 0.0
    changed = c.replace("| 1 | 2 |", "| 1 | 9 |")
    assert truth_free_bound("table_teds", b, changed) == 1.0
    assert damage("table_teds", b, changed, table) > 0


@st.composite
def tables(draw):
    cell = st.sampled_from(["a", "b", "1", "x y"])
    rows = draw(st.lists(st.lists(cell, min_size=1, max_size=3), min_size=1, max_size=3))
    width = max(len(r) for r in rows)
    md = "| " + " | ".join(["h"] * width) + " |\n|" + "---|" * width + "\n"
    md += "".join("| " + " | ".join(r + [""] * (width - len(r))) + " |\n" for r in rows)
    return draw(st.sampled_from(["", "Words before.\n\n", "# Title\n"])) + md


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(b=tables(), c=tables(), t=tables())
def test_range_if_changed_holds_for_table_teds(b, c, t):
    bound = truth_free_bound("table_teds", b, c)
    d = damage("table_teds", b, c, t)
    assert d is not None and d <= bound + TOL


@pytest.mark.parametrize("metric", [n for n, m in METRICS.items() if m.family == "omnidoc"])
def test_the_omnidoc_family_falls_back_to_its_range(metric):
    b = "# Title\n\nSome text here.\n\n$$x^2$$\n"
    assert truth_free_bound(metric, b, b) == 0.0
    assert truth_free_bound(metric, b, b + " ") == 1.0  # the protocol reads the text as given: no folding assumed
    t = "# Title\n\nSome text there.\n\n$$x^3$$\n"
    d = damage(metric, b, b + "\n\nextra", t)
    assert d is None or d <= 1.0


def test_checks_has_no_bound_without_its_checks():
    assert truth_free_bound("checks", "a", "b") is None
    assert truth_free_bound("checks", "a", "a") is None


def test_every_registered_metric_declares_an_implemented_bound():
    assert set(_KINDS) == set(get_args(BoundKind))
    for name, m in REGISTRY.items():
        assert m.spec.bound in _KINDS, name
    spec = METRICS["ned"].model_dump()
    spec.pop("bound")
    with pytest.raises(ValidationError, match="bound"):
        MetricSpec(**spec)  # a metric added later must say how it is bounded


def test_bound_rows_pair_the_outputs_of_each_page():
    rows = bound_rows(["ned", "bow_f1", "checks"], {"p1": "same text", "p2": "a b c"},
                      {"p1": "same  text\n", "p2": "a b d"}, documents={"p1": "doc1"})
    assert [r.page_id for r in rows] == ["p1", "p2"]
    assert rows[0].document == "doc1" and rows[1].document is None
    assert rows[0].bounds == {"ned": 0.0, "bow_f1": 0.0, "checks": None} and not rows[0].identical
    assert rows[1].bounds["ned"] == pytest.approx(truth_free_bound("ned", "a b c", "a b d"))
    with pytest.raises(DataError, match="'p2' has no candidate output"):
        bound_rows(["ned"], {"p1": "a", "p2": "b"}, {"p1": "a"})
    with pytest.raises(DataError, match="'p3' has no baseline output"):
        bound_rows(["ned"], {"p1": "a"}, {"p1": "a", "p3": "b"})


@st.composite
def html_pages(draw):
    """A page with zero to two small HTML tables (a <th> row sometimes) and text around them."""
    cell = st.sampled_from(["a", "b", "1", "x y", ""])
    parts = [draw(st.sampled_from(["", "Words.", "## Title"]))]
    for _ in range(draw(st.integers(0, 2))):
        rows = draw(st.lists(st.lists(cell, min_size=1, max_size=3), min_size=1, max_size=3))
        tag = draw(st.sampled_from(["td", "th"]))
        parts.append("<table>" + "".join("<tr>" + "".join(f"<{tag if i == 0 else 'td'}>{c}</{tag if i == 0 else 'td'}>"
                                                          for c in r) + "</tr>" for i, r in enumerate(rows))
                     + "</table>")
        parts.append(draw(st.sampled_from(["", "After.", "Title"])))
    return "\n".join(parts)


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(b=html_pages(), c=html_pages(), t=html_pages())
def test_range_if_changed_holds_for_parsebench_tables(b, c, t):
    """The ParseBench table score reads only outputs with a "<table": two without one bound 0, any other change
    the range."""
    m, rules = get_metric("parsebench_tables"), [{"type": "expected_markdown", "expected_markdown": t}]
    sb, sc = (score_one(m, x, None, [], parsebench=rules) for x in (b, c))
    bound = truth_free_bound("parsebench_tables", b, c)
    assert (sb is None) == (sc is None)
    assert sb is None or sb - sc <= bound + TOL  # type: ignore[operator]


# formula CDM's bound: the renderer is a stand-in here (tests/support/cdm_stand_in.py), the match and cache are real
CDM_TRUTH = "Some words.\n\n$$a+b=c$$\n\n$$x^2$$\n"
CDM_PIECES = st.sampled_from(["Some words.", "a+b=c", "$$a+b=c$$", "$$a+b=d$$", "$$q$$", "$$x^2$$", "x2"])


def _cdm_damage(b: str, c: str, t: str) -> float | None:
    m = get_metric("omnidoc15_formula_cdm")
    sb, sc = (score_one(m, x, None, [], omnidoc_truth=t) for x in (b, c))
    return None if sb is None or sc is None else sb - sc


def test_formula_cdm_reads_the_whole_output_not_only_its_formulas(monkeypatch):
    """The hybrid match decides which truth formulas are scored as formulas: a text line added next to unchanged
    formulas takes a truth formula into the text match and moves the page's CDM, so the bound reads the output."""
    from tests.support import cdm_stand_in

    cdm_stand_in.install(monkeypatch)
    b = "Some words.\n\na+b=c\n\n$$q$$\n\n$$x^2$$\n"
    c = "Some words.\n\n$$q$$\n\n$$x^2$$\n"  # the same formulas, one text line fewer
    d = _cdm_damage(b, c, CDM_TRUTH)
    # 1.0 (x^2 alone) → the mean with a+b=c scored against q
    assert d == pytest.approx(1 - (1 + cdm_stand_in.char_f1(r"\[a+b=c\]", r"\[q\]")) / 2) and d > 0
    assert truth_free_bound("omnidoc15_formula_cdm", b, c) == 1.0
    assert truth_free_bound("omnidoc15_formula_cdm", b, b) == 0.0


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(b=st.lists(CDM_PIECES, max_size=5), c=st.lists(CDM_PIECES, max_size=5),
       t=st.lists(CDM_PIECES, min_size=1, max_size=4))
def test_range_if_changed_holds_for_formula_cdm(monkeypatch, b, c, t):
    from tests.support import cdm_stand_in

    cdm_stand_in.install(monkeypatch)
    b_text, c_text, t_text = ("\n\n".join(x) + "\n" for x in (b, c, t))
    bound = truth_free_bound("omnidoc15_formula_cdm", b_text, c_text)
    d = _cdm_damage(b_text, c_text, t_text)
    assert bound == (0.0 if b_text == c_text else 1.0)
    assert d is None or d <= bound + TOL
