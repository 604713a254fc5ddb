"""A verdict from two systems' outputs, with truth for some pages or none: ``compare_outputs`` (exported as
``quantgate.compare_outputs``), what a notebook or another harness calls — no files, no servers. Each page is
bounded from its two outputs (``scoring.bounds.truth_free_bound``), the pages with truth are scored with the
metric registry, and ``judge.truth_free`` makes the one verdict (docs/statistics.md, "Pages without truth").

For the study (and the gate, which remakes its verdicts): ``outputs_verdict(texts, truth, documents, at_random,
settings)`` is the same verdict from a study's texts — ``OutputTexts(baseline, candidate, noise)`` at the compare
level (noise: the baseline's re-run, or None), the truth of the judged pages that have it, each page's document,
the ids of the pages in the recorded random labeling draw (empty unless every drawn page is labeled and the draw
checks out, ``heldout.label.checked_sample_status``; hand-picked truth never goes here) and ``st.verdict_settings(m)``.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass

import numpy as np

from quantgate.errors import DataError, UsageError
from quantgate.io.outputs import MAX_OUTPUT_BYTES
from quantgate.judge.compare import TruthFree, listing, truth_free_outputs
from quantgate.judge.truth_free import OutputPages
from quantgate.schema.scores import ScoreRow
from quantgate.schema.settings import VerdictSettings
from quantgate.schema.verdict import Verdict
from quantgate.scoring.bounds import truth_free_bound
from quantgate.scoring.metrics import get_metric, score_one

__all__ = ["OutputTexts", "compare_outputs", "output_pages", "outputs_verdict"]
Texts = Mapping[str, str]


@dataclass(frozen=True)
class OutputTexts:
    """Page id → output text: the baseline's, the candidate's, and the baseline re-run's (or None)."""

    baseline: Texts
    candidate: Texts
    noise: Texts | None = None


def _checked(texts: object, what: str) -> dict[str, str]:
    """``texts`` as page id → text: a mapping of non-empty string ids to strings without NUL, each within the cap
    on one page's output (``io.outputs.MAX_OUTPUT_BYTES``)."""
    if not isinstance(texts, Mapping):
        raise UsageError(f"{what}: give a dict of page id -> output text, not {type(texts).__name__}")
    for page, text in texts.items():
        if not isinstance(page, str) or not page:
            raise DataError(f"{what}: page id {page!r} is not a non-empty string")
        if not isinstance(text, str):
            raise DataError(f"{what}: page {page!r} is {type(text).__name__}, not text; decode it first")
        if "\x00" in text:
            raise DataError(f"{what}: page {page!r} contains a NUL byte, so it is binary, not a parser's text")
        if len(text.encode("utf-8")) > MAX_OUTPUT_BYTES:
            raise DataError(f"{what}: page {page!r} is over {MAX_OUTPUT_BYTES >> 20} MiB, the cap on one page's "
                            "output; is this the right text?")
    return dict(texts)


def _score_rows(texts: Texts, truth: Texts, documents: Mapping[str, str], metric: str) -> dict[str, ScoreRow]:
    import hashlib

    m = get_metric(metric)
    return {p: ScoreRow(page_id=p, document=documents[p], empty=not texts[p].strip(),
                        output_sha256=hashlib.sha256(texts[p].encode("utf-8")).hexdigest(),
                        **{metric: score_one(m, texts[p], truth[p], [])}) for p in truth}


def outputs_verdict(texts: OutputTexts, truth: Texts, documents: Mapping[str, str], at_random: set[str],
                    settings: VerdictSettings) -> Verdict:
    """The verdict on ``settings.metric`` from checked inputs (``compare_outputs`` checks them; the study's are
    its own records). ``at_random``: pages of the recorded random draw, every one with truth. The baseline's fitness
    on the pages with truth is judged against what an empty output scores there, scored as every page's output is
    (``score_one``; the study reads the same rows from its ``scores/empty-output.jsonl``)."""
    empty = _score_rows(dict.fromkeys(truth, ""), truth, documents, settings.metric)
    return truth_free_outputs(output_pages(texts, truth, documents, at_random, settings.metric), settings, empty)


def output_pages(texts: OutputTexts, truth: Texts, documents: Mapping[str, str], at_random: set[str],
                 metric: str) -> TruthFree:
    """What ``outputs_verdict`` judges, made from the texts with the scorers (which the judge does not import): the
    study hands it to ``judge.compare.judge_family`` with the rest of its family."""
    ids = sorted(texts.baseline)
    base, cand = texts.baseline, texts.candidate
    spec = get_metric(metric).spec
    bound = np.array([truth_free_bound(metric, base[p], cand[p]) for p in ids], dtype=np.float64)
    rows = (_score_rows(base, truth, documents, metric), _score_rows(cand, truth, documents, metric))

    def value(row: ScoreRow) -> float:
        v = row.value(metric)
        return np.nan if v is None else min(float(v), 1.0) if spec.clipped else float(v)

    b_score = np.array([value(rows[0][p]) if p in truth else np.nan for p in ids])
    c_score = np.array([value(rows[1][p]) if p in truth else np.nan for p in ids])
    damage = (b_score - c_score) if spec.higher_is_better else (c_score - b_score)
    docs_with_truth = {documents[p] for p in truth}
    labeled = rows if len(truth) >= 2 and len(docs_with_truth) >= 2 else None
    noise = None if texts.noise is None else np.array(
        [truth_free_bound(metric, base[p], texts.noise[p]) for p in ids], dtype=np.float64)
    pages = OutputPages(ids=ids, documents=[documents[p] for p in ids], bound=bound, damage=damage,
                        at_random=np.array([p in at_random for p in ids], dtype=bool), baseline_score=b_score,
                        changed=np.array([base[p] != cand[p] for p in ids], dtype=bool), noise_bound=noise)
    return TruthFree(pages, labeled)


def _drawn(labeled_at_random: object, labels: Texts) -> set[str]:
    """The pages ``labeled_at_random`` names as drawn at random: every page in truth (True), none (False), or
    those listed, each one that has truth (a page without it cannot measure the bound's excess)."""
    if labeled_at_random is True or labeled_at_random is False:
        if labeled_at_random and not labels:
            raise UsageError("labeled_at_random: no truth given; it says the pages in truth were drawn at random")
        return set(labels) if labeled_at_random else set()
    if isinstance(labeled_at_random, (str, bytes, Mapping)) or not isinstance(labeled_at_random, Collection):
        raise UsageError(f"labeled_at_random: give True, False or a collection of the page ids drawn at random, not "
                         f"{type(labeled_at_random).__name__}")
    drawn = set(labeled_at_random)
    odd = sorted(repr(p) for p in drawn if not isinstance(p, str))
    if odd:
        raise UsageError(f"labeled_at_random: {odd[0]} is not a page id (a string)")
    unlabeled = sorted(drawn - set(labels))
    if unlabeled:
        raise DataError(f"labeled_at_random: page {unlabeled[0]!r} has no truth ({len(unlabeled)} such page(s): "
                        f"{listing(unlabeled)}); every page drawn at random needs its truth, given in truth")
    return drawn


def compare_outputs(baseline, candidate, *, truth=None, documents=None, labeled_at_random=False, metric="ned",
                    margin=None, seed=0, settings=None) -> Verdict:
    """Is the candidate's output as good as the baseline's on these pages? ``baseline``/``candidate``: page id →
    output text, the same pages; ``truth``: page id → truth text for the pages that have it (any, or none);
    ``documents``: page id → document (the resampling unit; default: each page its own); ``labeled_at_random``:
    True when every page in ``truth`` was drawn at random from the pages compared (whole documents, ``quantgate
    pages label-sample``), or the ids of those that were (each in ``truth``): only they sharpen the truth-free
    bound (the rectified estimate), while every page in ``truth`` gives the baseline's score and fitness — as in a
    study, where truth beyond the recorded draw does the same; ``settings``: a ``VerdictSettings`` (then leave
    ``metric``, ``margin`` and ``seed`` out). Returns the ``Verdict`` (``.verdict``: within_noise, regression or
    inconclusive; ``.reason``; ``.message``; the numbers). Bad input is one error naming the page."""
    if settings is None:
        settings = VerdictSettings.model_validate({"metric": metric, "margin": margin, "seed": seed})
    elif not isinstance(settings, VerdictSettings):
        raise UsageError(f"settings: give a quantgate.schema.settings.VerdictSettings, not {type(settings).__name__}")
    elif margin is not None or seed != 0 or metric not in ("ned", settings.metric):
        raise UsageError("give the metric, margin and seed either in settings or as arguments, not both")
    if get_metric(settings.metric).needs != "truth":
        raise UsageError(f"metric {settings.metric!r} scores against {get_metric(settings.metric).needs}, not a "
                         "truth text: compare_outputs takes ned, cer, wer, bow_f1 or table_teds")
    base, cand = _checked(baseline, "baseline"), _checked(candidate, "candidate")
    if set(base) != set(cand):
        only_b, only_c = set(base) - set(cand), set(cand) - set(base)
        side = f"{len(only_b)} only in baseline ({listing(only_b)})" if only_b else ""
        side += ("; " if only_b and only_c else "") + (f"{len(only_c)} only in candidate ({listing(only_c)})"
                                                       if only_c else "")
        raise DataError(f"the pages differ between baseline and candidate: {side}; give both outputs for the same pages")
    if len(base) < 2:
        raise DataError(f"{len(base)} page(s) compared; a verdict needs at least 2")
    labels = _checked(truth or {}, "truth")
    stray = set(labels) - set(base)
    if stray:
        raise DataError(f"truth: page {sorted(stray)[0]!r} is not compared ({len(stray)} such page(s): "
                        f"{listing(stray)}); truth is only for pages both outputs cover")
    at_random = _drawn(labeled_at_random, labels)
    if settings.test != "non_inferiority" and len(labels) < len(base):
        raise UsageError(f"test {settings.test!r} needs truth on every page; pages without truth are judged by "
                         "non-inferiority only")
    docs = {p: p for p in base} if documents is None else documents
    if not isinstance(docs, Mapping):
        raise UsageError(f"documents: give a dict of page id -> document, not {type(docs).__name__}")
    lacking = [p for p in base if not isinstance(docs.get(p), str) or not docs.get(p)]
    if lacking:
        raise DataError(f"documents: page {lacking[0]!r} has no document ({len(lacking)} such page(s)); give every "
                        "compared page its document (a string), or leave documents out")
    return outputs_verdict(OutputTexts(base, cand), labels, {p: docs[p] for p in base}, at_random, settings)
