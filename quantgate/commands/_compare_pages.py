"""``quantgate compare --pages PAGESET BASELINE CANDIDATE --metric M``: two variants' outputs (run folders or
folders of ``<page_id>.md``) judged on a page set, truth or no truth, by ``quantgate.compare_outputs``.

The page set gives what the outputs cannot: the truth of the pages that have it, each page's document (the
resampling unit), and the labeling draw ``quantgate pages label-sample`` recorded, which says whether the truth is a
random sample of the pages compared (only the drawn pages may tighten the truth-free bound; truth on other pages
shows the baseline's score and fitness, as in a study). Everything is checked before
anything is judged, each problem one error naming the folder or page: outputs that are not text
(``io.outputs``), folders that cover different pages, outputs for pages the set does not hold, and held-out pages
with truth that the outputs leave out (a labeled page not compared would let a hand-picked subset stand in for
the sample). The command writes nothing.

A metric the page set scores without a truth text (``checks``, the OmniDocBench and ParseBench families) has no
truth-free bound: both folders' outputs are scored on the pages they cover and judged as score files are
(``judge.compare.compare_scores``). Either way the baseline must do better than an empty output on the judged
pages (``baseline_unfit`` otherwise, both numbers in the verdict): the empty output is scored on them by the one
function a study uses for its ``scores/empty-output.jsonl`` (``study.verdicts.empty_output_scores``), or, for a
truth text, by ``compare_outputs`` itself."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from quantgate.errors import DataError, UsageError
from quantgate.io.outputs import load_outputs
from quantgate.io.pageset import PageSet, load_pageset
from quantgate.judge.compare import listing


@dataclass(frozen=True)
class PagesInputs:
    """What ``compare_outputs`` is called with, from a page set and two output folders."""

    baseline: dict[str, str]
    candidate: dict[str, str]
    truth: dict[str, str]
    documents: dict[str, str]
    labeled_at_random: frozenset[str]  # the pages of the recorded random draw (each with truth); empty: none
    notes: list[str] = field(default_factory=list)  # why the truth is not the random sample; pages not compared


def _drawn_pages(ps: PageSet, compared: set[str], notes: list[str]) -> frozenset[str]:
    """The pages of the recorded labeling draw when they stand as a random sample of the pages compared: the draw
    checks out (``heldout.label.checked_sample_status``, the study's rule: an edited or stale one is a DataError),
    every drawn page has truth, and the pages compared are the held-out pages it was drawn from. Truth on other
    pages is still given to the verdict for the baseline's score and fitness, never for the rectified estimate."""
    from quantgate.heldout.label import checked_sample_status

    status = checked_sample_status(ps)
    if not status.at_random:
        notes.append(f"labeled pages not used as a random sample: {status.problem}")
        return frozenset()
    heldout = {p.id for p in ps.split("heldout")}
    if compared != heldout:
        notes.append(f"labeled pages not used as a random sample: the draw was made from the {len(heldout)} held-out "
                     f"pages and {len(compared)} are compared")
        return frozenset()
    return status.labeled


def pages_inputs(pageset: str | Path, baseline: str | Path, candidate: str | Path, *,
                 concurrency: int | None = None) -> PagesInputs:
    """The two folders' outputs with the page set's truth, documents and labeling standing, checked (module
    docstring); DataError naming the folder or page, UsageError for a path that is not a folder."""
    ps = load_pageset(pageset)
    base, cand = _same_pages(ps, baseline, candidate, concurrency)
    by_id = ps.by_id()
    compared = set(base)
    left_out = sorted(p.id for p in ps.split("heldout") if p.truth is not None and p.id not in compared)
    if left_out:
        raise DataError(f"{baseline}: {len(left_out)} held-out page(s) of {ps.root} with truth not compared "
                        f"({listing(left_out)}); serve them too, so the labeled pages are judged with the rest")
    truth = {pid: text for pid in base if (text := ps.truth_text(by_id[pid])) is not None}
    notes: list[str] = []
    # the draw matters where a page has no truth (as in a study's verdict, study.judged); truth on every page is
    # judged on its scores alone
    at_random = _drawn_pages(ps, compared, notes if truth else []) if len(truth) < len(compared) else frozenset()
    not_compared = sum(p.id not in compared for p in ps.split("heldout"))
    if not_compared:
        notes.append(f"{not_compared} held-out page(s) without truth are in neither folder (not compared)")
    return PagesInputs(base, cand, truth, {pid: by_id[pid].document for pid in base}, at_random, notes)


def _same_pages(ps: PageSet, baseline: str | Path, candidate: str | Path, concurrency: int | None
                ) -> tuple[dict[str, str], dict[str, str]]:
    """Both folders' outputs, covering the same pages of ``ps``; DataError naming the folder and pages otherwise."""
    base = load_outputs(baseline, concurrency=concurrency)
    cand = load_outputs(candidate, concurrency=concurrency)
    only_b, only_c = sorted(set(base) - set(cand)), sorted(set(cand) - set(base))
    if only_b or only_c:
        parts = [f"{len(ids)} only in {where} ({listing(ids)})" for ids, where in ((only_b, baseline), (only_c, candidate))
                 if ids]
        raise DataError(f"{baseline} and {candidate} cover different pages: {'; '.join(parts)}. Give both variants' "
                        "outputs for the same pages (a failed request leaves its page out of a run: resume that run)")
    by_id = ps.by_id()
    unknown = sorted(set(base) - set(by_id))
    if unknown:
        raise DataError(f"{baseline}: {len(unknown)} output(s) for pages {ps.root} does not hold ({listing(unknown)}); "
                        "are the file names the page ids?")
    return base, cand


def scored_verdict(pageset: str | Path, baseline: str | Path, candidate: str | Path, settings: Any) -> Any:
    """The verdict on a metric the page set scores without a truth text (module docstring): the two folders'
    outputs scored on the pages both cover, judged beside the empty output's scores on the same pages."""
    from quantgate.judge.compare import Names, compare_scores
    from quantgate.scoring import get_metric, score_pages
    from quantgate.study.verdicts import empty_output_scores

    ps = load_pageset(pageset)
    base, cand = _same_pages(ps, baseline, candidate, None)
    ids, metrics = sorted(base), [get_metric(settings.metric)]

    def rows(texts: dict[str, str]) -> dict:
        return {r.page_id: r for r in score_pages(ps, texts, metrics, "all", only=set(ids))}

    b, c = rows(base), rows(cand)
    empty = {r.page_id: r for r in empty_output_scores(ps, metrics, "all", ids)}
    if not any(r.value(settings.metric) is not None for r in b.values()):
        raise DataError(f"{ps.root}: none of the {len(ids)} compared page(s) carries what {settings.metric} scores "
                        "against (checks, OmniDocBench truth or ParseBench rules); import them with the page set")
    # held-out pages the metric scores (an empty output gets a value there) that neither folder covers
    others = [p.id for p in ps.split("heldout") if p.id not in base]
    idle = sum(r.value(settings.metric) is not None for r in empty_output_scores(ps, metrics, "all", others)
               ) if others else 0
    if idle:
        print(f"note: {idle} held-out page(s) scored by {settings.metric} are in neither folder (not compared)",
              file=sys.stderr)
    return compare_scores(b, c, settings, names=Names(str(baseline), str(candidate)), empty=empty)


def compare_pages(pageset: str | Path, baseline: str | Path, candidate: str | Path, settings: Any, *,
                  noise: Path | None = None, allow_missing: bool = False) -> Any:
    """The verdict of ``compare --pages``: :func:`pages_inputs`, then ``quantgate.compare_outputs`` with the
    verdict settings the command line made (a metric with no truth text: :func:`scored_verdict`); the notes (why
    the truth is not the random sample, pages left out) go to stderr. Flags that only mean something for score files are refused, naming the flag."""
    if noise is not None:
        raise UsageError("--noise takes a second baseline's score file; with --pages the verdict needs no noise file "
                         "(leave --noise out, or compare score files)")
    if allow_missing:
        raise UsageError("--allow-missing: with --pages both folders must cover the same pages; leave it out")
    from quantgate.scoring import get_metric
    from quantgate.study.outputs import compare_outputs

    if get_metric(settings.metric).needs != "truth":  # checks, OmniDocBench's, ParseBench's: scored, no bound
        return scored_verdict(pageset, baseline, candidate, settings)
    inp = pages_inputs(pageset, baseline, candidate)
    for note in inp.notes:
        print(f"note: {note}", file=sys.stderr)
    return compare_outputs(inp.baseline, inp.candidate, truth=inp.truth or None, documents=inp.documents,
                           labeled_at_random=inp.labeled_at_random, metric=settings.metric, settings=settings)
