"""A study's verdicts, made one way: by the study when it finishes, and again by the gate from the
files of a finished study folder (``quantgate.gate.check``), so a summary.json can be checked against
the score files it claims to rest on.

Page verdicts: each candidate against the baseline at the study's first concurrency level, the
baseline's second level as its noise run, per metric, with the declared margin (the registry's when
the study declares none), seed, resamples, min_pages and test. lm-eval verdicts (``study.lmeval``)
join them in one family: ``p_regression_holm`` is Holm's adjustment over every verdict of the study
(``judge.family``). The study gathers what each verdict is made from and hands the whole family to the judge in one
call (a fixed design: ``judge.compare.judge_family``; a sequential one: ``judge.replay.replay_family``). Tag
verdicts (``study.verdicts_by_tag``): after the overall rows, each candidate × metric again on the pages of each
value of each tag key, as their own rows (``VariantVerdict.tag``) in the same family; a value with too few pages
or documents gives an inconclusive row (``judge.compare.too_few_to_judge``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from quantgate.errors import InputError
from quantgate.io.fileio import sha256_file
from quantgate.io.pageset import PageSet
from quantgate.io.scores import read_scores
from quantgate.judge.compare import Names, Pairing, judge_family
from quantgate.judge.replay import Candidate, replay_family
from quantgate.schema.scores import ScoreRow
from quantgate.schema.sequential import SequentialDecision
from quantgate.schema.settings import VerdictSettings
from quantgate.schema.speed import SpeedupInterval
from quantgate.schema.summary import STUDY_AS_RUN, LmEvalVerdict, VariantVerdict, VerdictInputs
from quantgate.study.lmeval import lmeval_files, lmeval_verdicts
from quantgate.study.noise_layout import layout_note, layout_twin
from quantgate.study.plan import study_plan, study_settings
from quantgate.study.spec import Study

SCORES = "scores"
JUDGED_PAGES = "judged-pages.jsonl"  # the copy of a page set's pages.jsonl when the set lies outside the folder
LOCK = ".lock"  # held by a study while it writes the folder (``study.run.study_lock``)
Rows = dict[str, ScoreRow]
ReadScores = Callable[[str], Rows]
Settings = dict[str, VerdictSettings]  # per metric (``study.plan.study_settings``), made once per study_verdicts


def score_file(variant: str, level: int) -> str:
    """Where the study writes a variant's scores at one concurrency level, relative to the study folder."""
    return f"{SCORES}/{variant}-c{level}.jsonl"


def used_score_files(st: Study) -> list[str]:
    files = [score_file(v.name, st.compare_level) for v in st.variants]
    return files + ([score_file(st.baseline, st.noise_level)] if st.noise_level else [])


def bounds_file(variant: str, level: int) -> str:
    """Beside a score file, the page's truth-free damage bounds (``io.bounds``) of that run's outputs against the
    baseline's at the compare level: each candidate's, and the baseline's noise run's (``study.truthfree``)."""
    return f"{SCORES}/{variant}-c{level}.bounds.jsonl"


# What an empty output scores on each judged page, with each metric's own scorer: the mark a baseline must beat
# (``judge.compare.empty_output_mean``). Written beside the score files, it is bound and read like them, so the gate
# judges fitness from the same numbers without the truths (an outside page set's are not in the folder).
EMPTY_SCORES = f"{SCORES}/empty-output.jsonl"


def empty_output_scores(ps: PageSet, metrics: list, split: str, ids: list[str]) -> list[ScoreRow]:
    """The rows of :data:`EMPTY_SCORES`: the empty string scored as every judged page's output (``ids``)."""
    from quantgate.scoring import score_pages

    return score_pages(ps, dict.fromkeys(ids, ""), metrics, split, only=set(ids))


def used_bound_files(st: Study) -> list[str]:
    files = [bounds_file(v.name, st.compare_level) for v in st.variants if v.name != st.baseline]
    return files + ([bounds_file(st.baseline, st.noise_level)] if st.noise_level else [])


def page_pairings(st: Study, settings: Settings, read: ReadScores, pages_file: Path | None = None,
                  empty: Rows | None = None) -> list[Pairing]:
    """What a fixed design's verdicts are made from (``judge.compare.judge_family``): one per candidate × metric,
    then the tags'. ``read`` maps a score file's study-relative path to its rows (``io.scores.read_scores``).
    ``pages_file``: the judged pages (their tags). ``empty``: the rows of :data:`EMPTY_SCORES` (None in a folder
    written before them: fitness by the floor alone)."""
    c0, noise_level = st.compare_level, st.noise_level
    base = read(score_file(st.baseline, c0))
    noise = read(score_file(st.baseline, noise_level)) if noise_level else None
    rows = []
    for v in st.variants:
        if v.name == st.baseline:
            continue
        cand = read(score_file(v.name, c0))
        # a candidate in another TP/DP layout is judged beside the noise of that layout when the study
        # measures it (a layout twin: quantgate.study.noise_layout), else its verdict says it was not measured
        twin = layout_twin(st, v)
        v_noise, noise_name = ((read(score_file(twin.name, c0)), f"{twin.name}@c{c0} (noise run in its layout)")
                               if twin else (noise, f"{st.baseline}@c{noise_level} (noise run)"))
        layout = layout_note(st, v, twin)
        rows += [Pairing(v.name, settings[m], (base, cand, v_noise), Names(f"{st.baseline}@c{c0}", f"{v.name}@c{c0}",
                                                                             noise_name), empty, layout=layout)
                 for m in st.metrics]
    return rows + _tag_pairings(st, settings, read, (base, noise, empty), pages_file)


def page_tags(st: Study, pages_file: Path) -> dict[str, list[str]]:
    """Each value of the study's ``verdicts_by_tag`` keys ("language:english", in key order, then by value) and
    the judged pages that carry it (a page tag is "key:value"; a page may carry several values of one key)."""
    from quantgate.io.fileio import read_jsonl
    from quantgate.schema.base import parse_record
    from quantgate.schema.pages import PageRecord

    groups: dict[str, list[str]] = {}
    for no, obj in read_jsonl(pages_file):
        p = parse_record(PageRecord, obj, where=f"{pages_file}:{no}")
        if st.split != "all" and p.split != st.split:
            continue
        for t in p.tags:
            key = t.partition(":")[0]
            if key in st.verdicts_by_tag and ":" in t:
                groups.setdefault(t, []).append(p.id)
    order = {k: i for i, k in enumerate(st.verdicts_by_tag)}
    return {t: groups[t] for t in sorted(groups, key=lambda t: (order[t.partition(":")[0]], t))}


def _tag_pairings(st: Study, settings_of: Settings, read: ReadScores, sides: tuple[Rows, Rows | None, Rows | None],
                  pages_file: Path | None) -> list[Pairing]:
    """``sides``: the baseline's rows, its noise run's and the empty output's (either None when not there)."""
    base, noise, empty = sides
    if not st.verdicts_by_tag:
        return []
    if pages_file is None:
        raise InputError("verdicts_by_tag: the verdicts per tag need the judged pages.jsonl (the pages' tags)")
    c0 = st.compare_level
    rows = []
    for tag, ids in page_tags(st, pages_file).items():
        def subset(rows_: Rows, ids: list[str] = ids) -> Rows:
            return {i: rows_[i] for i in ids if i in rows_}

        for v in st.variants:
            if v.name == st.baseline:
                continue
            twin = layout_twin(st, v)
            v_noise = read(score_file(twin.name, c0)) if twin else noise
            b, cand = subset(base), subset(read(score_file(v.name, c0)))
            e = None if v_noise is None else subset(v_noise)
            names, layout = Names(f"{st.baseline}@c{c0} [{tag}]", f"{v.name}@c{c0} [{tag}]"), layout_note(st, v, twin)
            for m in st.metrics:
                if not any(r.value(m) is not None and cand[i].value(m) is not None for i, r in b.items() if i in cand):
                    continue  # no page of this value scored on this metric on both sides: nothing to judge
                rows.append(Pairing(v.name, settings_of[m], (b, cand, e), names, empty, tag=tag, layout=layout))
    return rows


def _sequential_family(st: Study, settings: Settings, read: ReadScores, pages_file: Path | None,
                       decisions: dict[str, SequentialDecision] | None, lm: list[LmEvalVerdict],
                       empty: Rows | None = None) -> list:
    """A sequential study's whole family (its page verdicts, then ``lm``, Holm-adjusted) from one call into the judge
    (``judge.replay.replay_family``), each candidate's decision put into ``decisions``. Its rows keep their looks: no
    tag rows and no truth-free remake (``study.judged``) for this design. ``empty``: the rows of :data:`EMPTY_SCORES`
    (every look's baseline fitness, as the pass judged it while serving: ``study.passes``)."""
    if st.sequential is None:
        raise InputError("the study has no sequential block")
    if pages_file is None:
        raise InputError("a sequential study's verdicts need the judged pages.jsonl (the serving order is made from it)")
    c0, noise_level = st.compare_level, st.noise_level
    base = read(score_file(st.baseline, c0))
    noise = read(score_file(st.baseline, noise_level)) if noise_level else None
    names = [v.name for v in st.variants if v.name != st.baseline]
    # the layout notes before the plan, so everything the judge is handed is made before it is called
    layouts = {v.name: layout_note(st, v, None) for v in st.variants if v.name != st.baseline}
    plan = study_plan(st, pages_file)
    candidates = [Candidate(n, (base, read(score_file(n, c0)), noise), layouts[n]) for n in names]
    state, family = replay_family(settings, st.sequential.spending, plan, candidates, lm, empty)
    for n in names:
        dec, nxt = state[n]
        if nxt is not None or dec is None:
            raise InputError(f"{score_file(n, c0)}: the sequential pass of {n} is unfinished ("
                             + ("no look made yet" if dec is None else f"look {dec.look} of {len(plan.looks)} made, "
                                f"{dec.pages_used} pages") + "); rerun `quantgate study` to finish it")
        if decisions is not None:
            decisions[n] = dec
    assert family is not None  # every pass has stopped (checked above)
    return family


def study_verdicts(st: Study, out: Path, read: ReadScores | None = None, pages_file: Path | None = None,
                   decisions: dict[str, SequentialDecision] | None = None
                   ) -> tuple[list[VariantVerdict], list[LmEvalVerdict] | None]:
    """(page verdicts, lm-eval verdicts or None), family-adjusted. ``pages_file``: the judged pages (a sequential
    study's serving order, the tags); ``decisions``: filled with a sequential study's decision per candidate. Judged
    pages without truth: each candidate's verdict on every judged page (``study.judged.truth_free_inputs``)."""
    from quantgate.study.judged import truth_free_inputs

    read = read or (lambda rel: read_scores(Path(out) / rel))
    lm = lmeval_verdicts(st, Path(out)) if st.lm_eval else []
    empty = read(EMPTY_SCORES) if (Path(out) / EMPTY_SCORES).is_file() else None
    settings = study_settings(st)  # each metric's record validated once, for every verdict below
    if st.sequential is not None:
        family = _sequential_family(st, settings, read, pages_file, decisions, lm, empty)
    else:
        pairings = page_pairings(st, settings, read, pages_file, empty)
        free = truth_free_inputs(st, settings, Path(out), pages_file)  # a tag's rows keep their scored verdicts
        family = judge_family([p if p.tag is not None or (p.variant, p.settings.metric) not in free
                               else replace(p, truth_free=free[(p.variant, p.settings.metric)]) for p in pairings], lm)
    pages = [v for v in family if isinstance(v, VariantVerdict)]
    return pages, ([v for v in family if isinstance(v, LmEvalVerdict)] if st.lm_eval else None)


def speed_intervals(st: Study, out: Path) -> dict[str, dict[str, SpeedupInterval]] | None:
    """Each variant's speed levels (its run.json, bound with the speed.jsonl they come from) against the baseline's
    at the same concurrency, seeded by the study's seed; None without a ``speed:`` block. The study
    reports them and the gate makes them again."""
    from quantgate.io.fileio import safe_join
    from quantgate.judge.speed import level_interval
    from quantgate.schema.base import read_record_file
    from quantgate.schema.run import RunManifest

    if st.speed is None:
        return None
    runs = {v.name: read_record_file(RunManifest, safe_join(Path(out), f"runs/{v.name}/run.json", what="run"),
                                     missing="the study folder is incomplete") for v in st.variants}
    base = {lv.concurrency: lv for lv in runs[st.baseline].speed}
    return {name: {str(lv.concurrency): level_interval(lv, base.get(lv.concurrency), level=st.speed.interval,
                                                       seed=st.seed, resamples=st.resamples)
                   for lv in run.speed} for name, run in runs.items()}


def relative_inside(path: Path, out: Path) -> str | None:
    """``path`` relative to the study folder ``out`` (posix), or None when it lies outside it."""
    try:
        return Path(path).resolve().relative_to(Path(out).resolve()).as_posix()
    except ValueError:
        return None


def inside(path: Path, out: Path, what: str) -> str:
    rel = relative_inside(path, out)
    if rel is None:
        raise InputError(f"{what} {path} lies outside the study folder {out}; the study keeps every file a "
                         "verdict rests on inside its folder")
    return rel


def bound_files(st: Study, out: Path) -> list[str]:
    """Beyond the score files, what a reported claim rests on (the gate binds every claim): each variant's
    run.json (speeds, kernels, the server command), requests.jsonl (the outputs scored and shown), speed.jsonl (a
    speed level's waves), its decode profiles under speed/ and quantgate.json
    (recipe, sizes, formats, weight hashes); the truth-free bounds beside the score files (``used_bound_files``); the
    page set's pageset.json when it lies in the folder; the lm-eval page task's files. Study-relative; those that
    must exist are ``required_files``."""
    out = Path(out)
    files = required_files(st) + used_bound_files(st)  # the truth-free bounds, bound like the scores
    if (out / STUDY_AS_RUN).is_file():  # the study as run: what binds summary.json's echo of it (summary schema 5)
        files.append(STUDY_AS_RUN)
    if (out / EMPTY_SCORES).is_file():  # what an empty output scores: the baselines' fitness rests on it
        files.append(EMPTY_SCORES)
    if (out / "pages" / "pageset.json").is_file():
        files.append("pages/pageset.json")
    # the speed waves the speed-up intervals are computed from
    files += [f"runs/{v.name}/speed.jsonl" for v in st.variants if (out / "runs" / v.name / "speed.jsonl").is_file()]
    # what the report's Decode step shows — each variant's decode profiles (speed.profile, or speed-profile
    # into the folder before the report) and the copy bandwidth their bound divides by; not the cost table, a
    # reading of the profiles that a later speed-profile run rewrites
    names = {v.name for v in st.variants}
    files += sorted(p.relative_to(out).as_posix() for p in (out / "speed").glob("*/c*.profile.json")
                    if p.parent.name in names)
    if (out / "speed" / "copy-bandwidth.json").is_file():
        files.append("speed/copy-bandwidth.json")
    task = out / "lmeval" / "task"
    if st.lm_eval and task.is_dir():
        files += sorted(p.relative_to(out).as_posix() for p in task.rglob("*") if p.is_file())
    return files


def required_files(st: Study) -> list[str]:
    return [f for v in st.variants for f in (f"runs/{v.name}/run.json", f"runs/{v.name}/requests.jsonl",
                                             f"variants/{v.name}/quantgate.json")]


def verdict_inputs(st: Study, out: Path, pages_file: Path) -> VerdictInputs:
    """``summary.json``'s ``inputs``: the margins as used and the sha256 of every file the verdicts rest
    on, by study-relative path (``pages_file``: the judged pages.jsonl, inside the study folder)."""
    out = Path(out)
    files = [pages_file] + [out / f for f in used_score_files(st)] + [out / f for f in bound_files(st, out)]
    if st.lm_eval:
        files += lmeval_files(st, out)
    rels = {inside(f, out, "file"): f for f in files}
    return VerdictInputs(margins=st.margins_used(), pages=inside(pages_file, out, "pages.jsonl"),
                         files={rel: sha256_file(f) for rel, f in rels.items()})
