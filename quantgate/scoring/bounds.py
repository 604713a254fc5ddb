"""Truth-free damage bounds: how much worse the candidate's output can score than the baseline's on a page nobody
wrote truth for, from the two outputs alone (docs/metrics.md, "Truth-free bounds").

Interface (the study, the gate and the verdict code against these names):

- ``truth_free_bound(metric, baseline, candidate) -> float | None`` — one page, one metric;
- ``bound_rows(metric_names, baseline_texts, candidate_texts, documents=None) -> list[BoundRow]`` — per page,
  ``schema.bounds.BoundRow``; written beside the run's score file (``study.verdicts.bounds_file``) by
  ``io.bounds.write_bounds`` and read back by ``io.bounds.read_bounds``.

*Damage* is oriented: m(c, t) − m(b, t) for a lower-is-better metric m, m(b, t) − m(c, t) for a higher-is-better
one, with b the baseline's output, c the candidate's and t the truth; a bound B(b, c) is at least the damage for
**every** t. cer and wer are judged clipped at 1 (``MetricSpec.clipped``), and their bounds are on those values.

Bounds are computed on what the metric reads (``Metric.reads``: its normalization), never on raw text: with
b = "a" + 20 spaces, c = "b" + 20 spaces and t = "a", ned's damage is 1.0, while twice the raw ned(b, c) is 0.095;
normalized, b = "a" and c = "b" and the bound is 1. Blank outputs follow ``score_one``: a blank output scores the
metric's worst value, so a blank candidate is bounded by the metric's range, a blank baseline by 0 (the candidate
cannot score below the worst) and two blank outputs by 0.

Proofs. b, c, t are the texts as the metric reads them (characters, or words for wer and bow_f1), |u| a length,
ED unit-cost Levenshtein distance, e = ED(b, c), x = ED(b, t), y = ED(c, t). Three facts: y ≤ x + e (triangle
inequality), ED(u, v) ≥ ||u| − |v|| and ED(u, v) ≤ max(|u|, |v|).

**ned** (ED / max length, 0 for two empty texts): B = min(1, (e + max(0, |b| − |c|)) / max(|b|, |c|)). Write
Lc = max(|c|, |t|), Lb = max(|b|, |t|). If Lc = 0 then y = 0 and the damage is ≤ 0. (i) |b| ≤ Lc: then Lb ≤ Lc,
so the damage y/Lc − x/Lb ≤ (x + e)/Lc − x/Lb ≤ e/Lc ≤ e/max(|b|, |c|). (ii) |b| > Lc: then Lb = |b| > |c| and
y ≤ min(x + e, Lc), so the damage is ≤ min(x + e, Lc)/Lc − x/|b|, which rises with x up to x = Lc − e and falls
after: ≤ (|b| − Lc + e)/|b| ≤ (|b| − |c| + e)/|b| (when e > Lc the bound is ≥ 1 anyway). ned lies in [0, 1], hence
the cap. As |b| − |c| ≤ e, B ≤ 2·ned(b, c), the bound the design states; B = ned(b, c) when |b| ≤ |c|. Tight:
t = "ba", b = "aba", c = "ab" has damage 1 − 1/3 = 2/3 = B (an exhaustive search over {a, b}* reaches the ratio 2).

**cer, wer** (r(u, t) = min(1, ED(u, t)/T), T = max(|t|, 1)): B = min(1, 2e/(|b| + e)) for e > 0. If x ≥ T,
r(b, t) = 1 and the damage is ≤ 0. Otherwise it is ≤ min(x + e, T)/T − x/T = min(e, T − x)/T. If t is empty, T = 1
forces x = |b| = 0 and the damage is ≤ 1 = min(1, 2e/e). Else T = |t| and x ≥ |b| − T, so the damage is
≤ min(e, 2T − |b|)/T: for T ≥ (|b| + e)/2 that is ≤ e/T ≤ 2e/(|b| + e); below, it is 2 − |b|/T < 2e/(|b| + e).
The truth's length is what normalizes these rates; it is unknown, and the worst case over it is this bound.

**bow_f1** (bags B, C, T of words; f(u, t) = 2|U ∩ T|/(|U| + |T|), 1 when both are empty): with d1 = |B − C|,
d2 = |C − B|, s = |B ∩ C|, x = d1 + max(d1, d2): B = x/(s + x) (0 when x = 0). Write β = |B| = s + d1,
γ = |C| = s + d2, k = |T|, m = |B ∩ T|. Since B ∩ T ⊆ (B ∩ C) + (B − C), |C ∩ T| ≥ m − d1. If β = 0 then x = γ
and B = 1 when γ > 0 (two empty bags score alike). If k = 0 < β, f(b, t) = 0. Otherwise f(b, t) = 2m/(β + k) and
k ≥ m. (i) m < d1: the damage is ≤ 2m/(β + m) < 2d1/(s + 2d1) ≤ x/(s + x) (x ≥ 2d1, and x/(s + x) rises with x).
(ii) m ≥ d1: the damage is ≤ g(m) = 2m/(β + k) − 2(m − d1)/(γ + k). If d2 ≤ d1, g falls with m (γ ≤ β), so
g ≤ 2d1/(β + k) ≤ 2d1/(s + 2d1) = x/(s + x). If d2 > d1, 2m ≤ β + k gives g = [2m/(β + k)]·(γ − β)/(γ + k)
+ 2d1/(γ + k) ≤ (d1 + d2)/(γ + k) ≤ (d1 + d2)/(s + d1 + d2) = x/(s + x).

**range_if_changed** (table_teds, the OmniDocBench family): a metric's score depends on the output only through
what it reads, so equal reads score alike on every truth (0); otherwise the damage is at most the metric's range.
table_teds reads the output's tables, so a page whose text changed and whose tables did not is bounded by 0.
omnidoc15_formula_cdm reads the whole output, not only its formulas: v1.5's hybrid match decides which truth formulas
are scored as formulas, and a text line added beside unchanged formulas can take one into the text match and move
the page's CDM (a test shows it), so only an identical output is bounded by 0.
ned's argument does not carry over to TEDS: its cell rename cost, rapidfuzz's normalized distance, breaks the
triangle inequality (ab → aba → ba costs 1/3 + 1/3, ab → ba costs 1), so the tree edit distance need not obey it.

**none** (checks): a check says what must or must not be on the page; without the checks, any changed character
may be the one a check looks for, and identical outputs are the only thing to go on. No bound: ``None``.

The property tests (tests/unit/scoring/test_bounds.py) search for a counterexample to each bound against the
metric's own implementation, as ``score_one`` calls it.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from quantgate.errors import DataError
from quantgate.schema.bounds import BoundRow
from quantgate.schema.metrics import BoundKind
from quantgate.scoring.metrics import Metric, get_metric, is_blank
from quantgate.scoring.tokenize import words


def _ned(b: str, c: str) -> float:
    from rapidfuzz.distance import Levenshtein

    longest = max(len(b), len(c))
    if longest == 0:
        return 0.0
    e = Levenshtein.distance(b, c)
    return min(1.0, (e + max(0, len(b) - len(c))) / longest)


def _rate(b: Sequence[Any], c: Sequence[Any]) -> float:
    from rapidfuzz.distance import Levenshtein

    e = Levenshtein.distance(b, c)
    return 0.0 if e == 0 else min(1.0, 2 * e / (len(b) + e))


def _bag_f1(b: str, c: str) -> float:
    bb, cc = Counter(words(b)), Counter(words(c))
    d1, d2, s = (bb - cc).total(), (cc - bb).total(), (bb & cc).total()
    x = d1 + max(d1, d2)
    return 0.0 if x == 0 else x / (s + x)


# kind → the bound on what the metric reads of the two outputs (both not blank); range_if_changed and none are
# decided in truth_free_bound, which knows the metric's range
_KINDS: dict[BoundKind, Callable[[Any, Any], float] | None] = {
    "ned": _ned,
    "char_edit_rate": lambda b, c: _rate(b, c),
    "word_edit_rate": lambda b, c: _rate(words(b), words(c)),
    "bag_f1": _bag_f1,
    "range_if_changed": None,
    "none": None,
}


def _worst_is_extreme(m: Metric) -> bool:
    """Whether the value ``score_one`` gives a blank output is the worst the metric can score as judged (clipped
    at 1 for cer and wer): then a blank baseline cannot be beaten downwards."""
    lo, hi = m.spec.range
    return m.worst == (lo if m.higher_is_better else (1.0 if hi is None else hi))


def truth_free_bound(metric: str, baseline: str, candidate: str) -> float | None:
    """The most the candidate's output can be worse than the baseline's on ``metric`` for any truth, in the
    metric's units (the module docstring proves each kind); 0 for outputs the metric reads alike; None for a
    metric without a truth-free bound (``checks``)."""
    m = get_metric(metric)
    kind = m.spec.bound
    if kind == "none":
        return None
    if baseline == candidate:  # the common case for a quantized variant, and the cheapest: no text is read
        return 0.0
    span = m.spec.margin_ceiling
    # score_one's empty rule (a blank output scores the worst value); the OmniDocBench and ParseBench families
    # score a blank output by their own protocol instead
    if m.needs not in ("omnidoc", "parsebench"):
        blank_b, blank_c = is_blank(baseline), is_blank(candidate)
        if blank_b and blank_c:
            return 0.0
        if blank_c:
            return span
        if blank_b and _worst_is_extreme(m):
            return 0.0
    rb, rc = m.reads(baseline), m.reads(candidate)
    if rb == rc:
        return 0.0
    fn = _KINDS[kind]
    return span if fn is None else min(span, fn(rb, rc))


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def bound_rows(metric_names: Sequence[str], baseline_texts: Mapping[str, str], candidate_texts: Mapping[str, str],
               documents: Mapping[str, str | None] | None = None) -> list[BoundRow]:
    """One :class:`BoundRow` per page of ``baseline_texts`` (in its order), the bound of every metric named. Both
    mappings must hold the same pages: a page one output lacks cannot be bounded (DataError naming it)."""
    only_b = [p for p in baseline_texts if p not in candidate_texts]
    only_c = [p for p in candidate_texts if p not in baseline_texts]
    if only_b or only_c:
        side, pages = ("candidate", only_b) if only_b else ("baseline", only_c)
        raise DataError(f"page {pages[0]!r} has no {side} output ({len(pages)} page(s) like it); bounds pair the "
                        "two outputs of each page: give both variants' outputs for the same pages")
    for name in metric_names:
        get_metric(name)  # an unknown name fails here, before any page is bounded
    docs = documents or {}
    return [BoundRow(page_id=pid, document=docs.get(pid), baseline_sha256=_sha256(b),
                     candidate_sha256=_sha256(candidate_texts[pid]),
                     bounds={n: truth_free_bound(n, b, candidate_texts[pid]) for n in metric_names})
            for pid, b in baseline_texts.items()]
