"""The release gate: an exit code a pipeline can trust, bound to the folder it is given.

It reads nothing outside that folder and takes no verdict on trust. Every path in ``summary.json``
is relative to the study folder; the gate re-hashes each variant's weight files, the judged
``pages.jsonl``, the score files and lm-eval's files against the hashes the study recorded, makes
every verdict again from the score files with the study's margins, seed, resamples, min_pages and
test (``study.verdicts``, the code the study used), and requires summary.json to hold exactly those
verdicts. Then the family rule (docs/statistics.md, "Multiplicity"):

0  every checked verdict is ``within_noise`` (an intersection–union test: no adjustment needed);
1  a definite failure: a regression that stays one after Holm's adjustment over the study's verdicts,
   or ``not_equivalent`` (outputs differ under ``exact``; better beyond the margin under ``equivalence``);
2  anything else short of a pass: inconclusive, or a regression Holm does not confirm; a baseline below its
   floor (``baseline_unfit``) is 2 whatever the other verdicts, its first line naming the metric and score;
3  the folder cannot be trusted or is unfinished: summary.json missing, malformed or from another
   schema, the study incomplete, a verdict missing, extra or different from what the files give,
   a margin not finite/positive/below its metric's range, or any file changed — one line naming it."""

from __future__ import annotations

import math
from enum import IntEnum
from pathlib import Path
from typing import NamedTuple

from quantgate.errors import InputError, QuantgateError, UsageError, one_line
from quantgate.io.fileio import safe_join, sha256_file
from quantgate.judge.family import confirmed as holm_confirmed
from quantgate.schema.settings import MIN_PAGES
from quantgate.schema.verdict import Verdict


class GateCode(IntEnum):
    """The gate's exit codes (the module docstring says what each means)."""

    PASS = 0
    REGRESSION = 1
    INCONCLUSIVE = 2
    INVALID = 3


PASS, REGRESSION, INCONCLUSIVE, INVALID = GateCode
_FLOAT_TOL = dict(rel_tol=1e-9, abs_tol=1e-12)  # recomputation on the same code: equal to the last bits


class GateResult(NamedTuple):
    code: GateCode
    lines: list[str]  # what to print: one per checked verdict (INVALID: the one reason)


def gate(out: Path, metrics: list[str] | None = None, variants: list[str] | None = None,
         lmeval: bool = False, study: Path | None = None, checked: list | None = None) -> GateResult:
    """The exit code and the lines to print. ``lmeval``: lm-eval verdicts are checked too (and their absence
    is invalid). ``study``: the study file the folder must have been run from (e.g. the YAML kept in the
    repository) — summary.json's echo of the study must equal it, so margins or variants edited
    consistently throughout summary.json are caught too. Any reason not to trust the folder is
    ``INVALID`` with one line. ``checked``, when given, receives the verdict rows the gate remade and judged
    (what ``gate --junit`` writes: never the stored ones)."""
    try:
        return _gate(Path(out), metrics, variants, lmeval, study, checked)
    except UsageError:
        raise  # a name the study does not have is the command line's fault (exit 64), not the folder's
    except QuantgateError as e:
        return GateResult(INVALID, [" ".join(str(e).split())])  # one line, whatever the message held


class _Invalid(InputError):
    pass


def _gate(out: Path, metrics, variants, lmeval, study_file, judged: list | None = None) -> GateResult:
    from quantgate.schema.base import parse_record
    from quantgate.schema.metrics import check_margin
    from quantgate.schema.summary import SUMMARY, load_summary
    from quantgate.study.spec import Study, load_study

    study_writing(out)
    rep = load_summary(out)
    where = str(out / SUMMARY)
    st = parse_record(Study, rep.study, where=f"{where}: study")  # every number checked as it is parsed
    known_names(st, metrics, variants)
    if study_file is not None:
        _same_study(st, load_study(study_file), where, study_file, out)
    _consistent(rep, st, where)
    for m, value in rep.inputs.margins.items():
        check_margin(m, value, where=f"{where}: inputs.margins.{m}")
    _rehash(rep, st, out, where)
    if not rep.complete:
        raise _Invalid(f"{where}: the study is incomplete: rerun `quantgate study` to finish it")
    decisions: dict = {}
    pages, lm = _remake(rep, st, out, where, decisions)
    _same_sequential(rep, decisions, where)
    for row in pages:
        if row.margin != rep.inputs.margins[row.metric]:
            raise _Invalid(f"{where}: the {row.metric} margin is {row.margin:g} now but "
                           f"{rep.inputs.margins[row.metric]:g} in inputs.margins: this quantgate's default "
                           "margin differs from the study's; declare it in the study's margins and rerun it")
    _same(rep.verdicts, pages, lambda r: (r["variant"], r["metric"], *([r["tag"]] if r.get("tag") else [])), where,
          "verdicts")
    _same_claims(rep, st, out, where)
    if st.lm_eval:
        if rep.lm_eval is None:
            raise _Invalid(f"{where}: the study declares lm_eval but summary.json has no lm_eval section")
        _same(rep.lm_eval.verdicts, lm or [], lambda r: (r["variant"], r["task"], r["metric"]), where,
              "lm_eval.verdicts")
        _same_lmeval_runs(rep, st, out, where)
    elif rep.lm_eval is not None:
        raise _Invalid(f"{where}: lm_eval verdicts in a summary whose study declares no lm_eval")
    echo_as_run(rep, out, where)  # last: an echo field a check above makes again is named there, with its evidence

    # the remade verdicts carry p_regression_holm over the whole family (page and lm-eval ones)
    checked: list[tuple[str, str, Verdict]] = [
        (r.label, r.metric, r) for r in pages
        if (not metrics or r.metric in metrics) and (not variants or r.variant in variants)]
    if not checked:
        asked = " and ".join(f"{flag} {', '.join(names)}" for flag, names in (("--metrics", metrics),
                                                                             ("--variants", variants)) if names)
        raise _Invalid(f"no verdict matches {asked or 'the study'} (the study judges "
                       f"{', '.join(st.metrics)} for {', '.join(v.name for v in st.variants if v.name != st.baseline)})")
    if lmeval:
        lm_checked = [r for r in (lm or []) if not variants or r.variant in variants]
        if not lm_checked:
            raise _Invalid("--lmeval: the study has no lm-eval verdicts (add an lm_eval: section and rerun it)")
        checked += [(r.variant, f"lm-eval {r.task} {r.metric}", r) for r in lm_checked]
    if judged is not None:
        judged.extend(r for _, _, r in checked)
    lines = [_line(variant, label, r) for variant, label, r in checked]
    small = sorted({r.n for _, _, r in checked if r.n < MIN_PAGES})
    if small and st.min_pages < MIN_PAGES:  # at the default, such verdicts are inconclusive (too_few_pages)
        lines.append(f"note: verdicts on {small[0]}" + (f"–{small[-1]}" if len(small) > 1 else "") +
                     f" pages, below the calibrated minimum of {MIN_PAGES} (the study lowered min_pages to "
                     f"{st.min_pages}): a smoke test, not a calibrated verdict")
    if pages_outside(rep.inputs.pages):
        lines.append(OUTSIDE_NOTE)
    words = [r for _, _, r in checked]
    unfit = {(r.metric, r.baseline_score, r.baseline_floor, r.empty_output_mean) for r in words
             if r.reason == "baseline_unfit"}
    if unfit:  # no candidate can be judged against a baseline that cannot read the pages: say so first
        return GateResult(INCONCLUSIVE, [
            f"baseline unfit: {st.baseline} scores {score:.4f} {metric} (floor {floor:g}"
            + ("" if empty is None else f", an empty output {empty:.4f} on the same pages") + f"); every verdict on "
            f"{metric} is vacuous until the baseline reads these pages"
            for metric, score, floor, empty in sorted(unfit, key=lambda u: u[:3])] + lines)
    return GateResult(outcome(words), lines)


def outcome(words: list[Verdict]) -> GateCode:
    """The family rule over the checked verdicts (the module docstring): what the gate exits with, and what a
    signed attestation records per checked variant."""
    if any(r.reason == "baseline_unfit" for r in words):
        return INCONCLUSIVE
    if all(r.verdict == "within_noise" for r in words):
        return PASS
    if any(holm_confirmed(r) or r.verdict == "not_equivalent" for r in words):
        return REGRESSION
    return INCONCLUSIVE


def known_names(st, metrics: list[str] | None, variants: list[str] | None) -> None:
    """Every name given to ``--metrics``/``--variants`` is one the study judges: a typo dropped silently left a
    variant unchecked while the PASS (and its signature) seemed to cover it."""
    candidates = [v.name for v in st.variants if v.name != st.baseline]
    for flag, given, known in (("--variants", variants, candidates), ("--metrics", metrics, list(st.metrics))):
        unknown = [n for n in (given or []) if n not in known]
        if unknown:
            hint = " (the baseline, which has no verdicts of its own)" if unknown[0] == st.baseline else ""
            raise UsageError(f"{flag}: {unknown[0]!r}{hint} is not one of the study's: {', '.join(known)}; nothing "
                             "was checked")


def study_writing(out: Path) -> None:
    """Refuse while a study holds the folder's lock (the gate read an old summary.json while a resumed
    study rewrote the folder). Only tested, never taken, and nothing is created: the gate writes nothing."""
    import fcntl
    import os
    import stat

    from quantgate.study.verdicts import LOCK

    try:  # non-blocking: a FIFO in the lock's place would otherwise wait for a writer forever
        fd = os.open(out / LOCK, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return  # no lock file (or a link in its place): no study of this quantgate is writing
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise _Invalid(f"{out / LOCK}: is not a regular file (a FIFO, socket or device in the lock's place); a study "
                       "never makes one — remove it")
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        raise _Invalid(f"{out}: a study is writing this folder (it holds {out / LOCK}); gate it when the study "
                       "has finished") from None
    finally:
        os.close(fd)


def _line(variant: str, label: str, r: Verdict) -> str:
    word = r.verdict
    if word == "regression" and not holm_confirmed(r):
        word = "regression (not after Holm)"
    floor = "–" if r.noise_floor is None else f"{r.noise_floor:.4f}"
    p = r.p_regression_holm
    # 0: no resample reached the margin, below the resolution 1/(2 × resamples)
    shown = f"< {0.5 / r.n_resamples:.2g}" if p == 0 else f"{p:.3g}"
    holm = "" if p is None else f", p_holm {shown}"
    text = (f"{word:<13} {variant} {label} ({r.reason}): delta {r.delta:+.4f} [{r.ci_low:+.4f}, "
            f"{r.ci_high:+.4f}], margin {r.margin:.4f}, noise floor {floor}, n {r.n}{holm}")
    return text if r.verdict == "within_noise" else f"{text} — {r.message}"


def _same_study(echoed, declared, where: str, study_file: Path, out: Path) -> None:
    """The echo is the declared study, paths compared as the study file's folder resolves them. After
    ``quantgate tune`` the echo is its last trial's study (tune.study.trial_study): the declared variants first,
    then trials named ``<tune>-t<k>`` by a tune recorded in ``out/tune/<tune>/``; nothing else may differ."""
    from quantgate.study.spec import absolute_study

    base = Path(study_file).resolve().parent
    a, b = (absolute_study(x, base).model_dump(mode="json") for x in (echoed, declared))
    tunes = [p.parent.name for p in (out / "tune").glob("*/tune.json")]
    extra = a["variants"][len(b["variants"]):]
    if a["variants"][:len(b["variants"])] == b["variants"] and all(
            any(v["name"].startswith(f"{t}-t") for t in tunes) for v in extra):
        a["variants"] = b["variants"]  # a tune's trials, beside the declared variants
    for k in b:
        if k != "output" and a.get(k) != b[k]:
            raise _Invalid(f"{where}: study.{k} is {a.get(k)!r} but {study_file} declares {b[k]!r}: this folder was "
                           "not made by that study, or summary.json was edited")


def _consistent(rep, st, where: str) -> None:
    """summary.json's own parts agree with the study it echoes."""
    names = [v.name for v in st.variants]
    if rep.baseline != st.baseline:
        raise _Invalid(f"{where}: baseline {rep.baseline!r} but the study's is {st.baseline!r}")
    if [v.name for v in rep.variants] != names:
        raise _Invalid(f"{where}: variants {[v.name for v in rep.variants]} but the study declares {names}")
    c0, noise = st.compare_level, st.noise_level
    if (rep.compare_level, rep.noise_level) != (c0, noise):
        raise _Invalid(f"{where}: compare_level/noise_level {rep.compare_level}/{rep.noise_level} but the study's "
                       f"concurrency gives {c0}/{noise}")
    if sorted(rep.inputs.margins) != sorted(st.metrics):
        raise _Invalid(f"{where}: inputs.margins covers {sorted(rep.inputs.margins)}, the study's metrics are "
                       f"{sorted(st.metrics)}")
    for m, value in st.margins.items():
        if rep.inputs.margins[m] != value:
            raise _Invalid(f"{where}: inputs.margins.{m} is {rep.inputs.margins[m]} but the study declares {value}")


def rehash_study(out: Path) -> None:
    """The gate's file check alone, no verdict remade (``quantgate verify --study``): every file summary.json binds
    by hash still has that hash. Raises a QuantgateError naming the first that does not."""
    from quantgate.schema.base import parse_record
    from quantgate.schema.summary import SUMMARY, load_summary
    from quantgate.study.spec import Study

    rep = load_summary(out)
    where = str(Path(out) / SUMMARY)
    _rehash(rep, parse_record(Study, rep.study, where=f"{where}: study"), Path(out), where)


def _rehash(rep, st, out: Path, where: str) -> None:
    """Every file a verdict rests on, re-hashed inside ``out``: variant weights (also against each
    variant's quantgate.json), the judged pages.jsonl and every file in ``inputs.files``."""
    from quantgate.io.fingerprint import weights_fingerprint
    from quantgate.schema.attestation import GIT_PATHS
    from quantgate.schema.base import read_record_file
    from quantgate.schema.run import RunManifest
    from quantgate.schema.variant import VariantManifest
    from quantgate.study.lmeval import lmeval_files
    from quantgate.study.verdicts import relative_inside, required_files, used_bound_files, used_score_files

    problems = []

    def check(rel: str, sha: str, what: str) -> None:
        p = safe_join(out, rel, what=f"{where}: {what}")
        if not p.is_file():
            problems.append(f"{p} is missing")
        elif sha256_file(p) != sha:
            problems.append(f"{p} changed since the verdicts (sha256 differs)")

    for v in rep.variants:
        vdir = safe_join(out, v.path, what=f"{where}: variants.{v.name}.path")
        if not any(f.endswith(".safetensors") for f in v.files):
            problems.append(f"{where}: variant {v.name} lists no weight files")
        for name, sha in v.files.items():
            check(f"{v.path}/{name}", sha, f"variants.{v.name}.files.{name}")
        # every file of the folder is bound: one added beside the weights (a .py, a tokenizer map) changes what serves
        # git's own files left out, as model-signing and the signature leave them out (schema.attestation.GIT_PATHS)
        extra = sorted(f.name for f in vdir.iterdir()
                       if f.name not in v.files and f.name != "quantgate.json" and f.name not in GIT_PATHS) \
            if vdir.is_dir() else []
        if extra:
            problems.append(f"{vdir / extra[0]} is not among the files the verdicts were made with")
        if not problems:
            man = read_record_file(VariantManifest, vdir / "quantgate.json", missing="the variant folder is incomplete")
            if {k: f.sha256 for k, f in man.files.items()} != v.files:
                problems.append(f"{vdir / 'quantgate.json'} and summary.json list different weight hashes")
            run = read_record_file(RunManifest, safe_join(out, f"runs/{v.name}/run.json", what="run"),
                                   missing="the study folder is incomplete")
            # the weights on disk are the ones that were served (run.json's fingerprint, when it has one)
            if run.variant_fingerprint and run.variant_fingerprint != weights_fingerprint(vdir):
                problems.append(f"{vdir}: its weights are not the ones runs/{v.name}/run.json served")
            # the study's echo, proven by the (hashed) run each variant served
            for field, ran in (("prompt", "prompt"), ("max_tokens", "max_tokens"), ("split", "split"),
                               ("slo_s", "slo_p90_latency_s")):
                if getattr(run, ran) != getattr(st, field):
                    problems.append(f"{where}: study.{field} is {getattr(st, field)!r} but runs/{v.name}/run.json "
                                    f"served {getattr(run, ran)!r}")
            problems += _served_as_declared(st, v.name, run, where)
    # folders only: a file beside the variant folders (a README) is served by nothing
    stray = sorted(d.name for d in (out / "variants").iterdir()
                   if d.is_dir() and d.name not in {v.name for v in rep.variants}) \
        if (out / "variants").is_dir() else []
    if stray:
        problems.append(f"{out / 'variants' / stray[0]} is a variant folder the study does not declare")
    files = rep.inputs.files
    if rep.inputs.pages not in files:
        problems.append(f"{where}: inputs.pages {rep.inputs.pages!r} has no hash in inputs.files")
    elif files[rep.inputs.pages] != rep.provenance.pageset_sha256:
        problems.append(f"{where}: inputs.files and provenance.pageset_sha256 disagree on {rep.inputs.pages}")
    # the truth-free bounds: in every study that counts its pages with and without truth (summary.json 4); an older
    # folder has none, and is still gated on what it has
    needed = used_score_files(st) + required_files(st) + (used_bound_files(st) if rep.truth is not None else [])
    if st.lm_eval and not problems:
        needed += [relative_inside(f, out) or str(f) for f in lmeval_files(st, out)]
        # every file of the lm-eval task folder, as the study bound them: one added is a task lm-eval would read
        from quantgate.study.verdicts import bound_files

        needed += [f for f in bound_files(st, out) if f.startswith("lmeval/task/")]
    lacking = [f for f in needed if f not in files]
    if lacking:
        problems.append(f"{where}: inputs.files lists no hash for {', '.join(lacking)}")
    for rel, sha in files.items():
        check(rel, sha, f"inputs.files.{rel}")
    if not problems:
        problems += _page_files(out, rep.inputs.pages, where)
    if problems:
        more = f" (and {len(problems) - 1} more: {'; '.join(problems[1:4])})" if len(problems) > 1 else ""
        raise _Invalid(f"files changed since the verdicts were made: {problems[0]}{more}")


def echo_as_run(rep, out: Path, where: str) -> None:
    """summary.json's ``study`` is the study as run: ``study.json``, which the study writes into its folder before
    any work and summary.json (schema 5) hashes in ``inputs.files`` (its hash is checked with the others). Many of
    the echo's fields — the name the reports carry, the model, the backend, its timeouts, the GPUs — are proven by no
    run.json or variant manifest; bound to that hashed copy, an edit of any of them is refused without ``--study``.
    A schema-4 summary hashed no study.json: its echo is bound only where run.json proves it (docs/reliability.md).
    Raises ``_Invalid`` naming the first field that differs."""
    from quantgate.schema.load import load_json
    from quantgate.schema.summary import STUDY_AS_RUN

    if STUDY_AS_RUN not in rep.inputs.files:
        if rep.schema_version >= 5:
            raise _Invalid(f"{where}: inputs.files lists no hash for {STUDY_AS_RUN} (the study as run, which binds "
                           "summary.json's study echo); summary.json was edited — rerun `quantgate study` to remake it")
        return
    path = safe_join(out, STUDY_AS_RUN, what=f"{where}: inputs.files")
    if sha256_file(path) != rep.inputs.files[STUDY_AS_RUN]:  # as _rehash says; here for `quantgate report`
        raise _Invalid(f"files changed since the verdicts were made: {path} changed since the verdicts (sha256 differs)")
    diff = _first_difference({"study": rep.study}, {"study": load_json(path, "study as run")})
    if diff:
        raise _Invalid(f"{where}: {one_line(diff[0])} is {diff[1]!r} in summary.json but {diff[2]!r} in {STUDY_AS_RUN} (the "
                       "study as run, hashed in inputs.files); summary.json was edited or belongs to another study")


def _served_as_declared(st, name: str, run, where: str) -> list[str]:
    """A variant's declared ``server_args`` (a contiguous run of the flags its server got: the backend's own come
    before, a profiler's after) and ``server_env``, against the hashed run.json that records what was served."""
    i, v = next((i, v) for i, v in enumerate(st.variants) if v.name == name)
    got, want = run.server_args, list(v.server_args)
    if got is not None and want and not any(got[k:k + len(want)] == want for k in range(len(got) - len(want) + 1)):
        return [f"{where}: study.variants.{i}.server_args is {want!r} but runs/{name}/run.json served {got!r}"]
    if run.server_env is not None and run.server_env != dict(v.server_env):
        return [f"{where}: study.variants.{i}.server_env is {dict(v.server_env)!r} but runs/{name}/run.json "
                f"served {run.server_env!r}"]
    return []


def _page_files(out: Path, pages_rel: str, where: str) -> list[str]:
    """The judged page set's images and truths against its (hashed) pages.jsonl, when the set lies in the folder."""
    from quantgate.io.pageset import load_pageset, verify_page_files

    if pages_outside(pages_rel):
        return []
    try:
        verify_page_files(load_pageset(safe_join(out, pages_rel, what=f"{where}: inputs.pages").parent))
    except InputError as e:
        return [str(e)]
    return []


def pages_outside(pages_rel: str) -> bool:
    """Whether the study judged a page set outside its folder and kept only a copy of its pages.jsonl there (a folder
    made before the study copied such a set in whole: ``study.pagecopy``)."""
    from quantgate.study.verdicts import JUDGED_PAGES

    return pages_rel == JUDGED_PAGES


OUTSIDE_NOTE = ("note: the page set lies outside the study folder; the gate re-hashed its pages.jsonl (the copy "
                "kept here) but not its images and truths, and does not vouch for them — rerun the study with this "
                "quantgate, which copies the page set into the folder (pages/) where the gate binds it")


NOT_VOUCHED = ("note: the gate re-derived the verdicts, speeds, sizes, kernels and worst pages from the files it "
               "binds; it does not vouch for report.md, report.html, junit.xml, timings.jsonl, the speed tables "
               "(speed/cost-table.json, speed/prefill-table.json: readings of the bound profiles and waves that a "
               "later speed-profile run rewrites), summary.json's "
               "created, time_budget, provenance.packages and provenance.git_commit, nor, in a schema-4 summary "
               "(which hashed no study.json), the study echo's fields no run.json proves — rebuild the reports from "
               "the checked summary with `quantgate report`")


def _same_claims(rep, st, out: Path, where: str) -> None:
    """What the report shows beside the verdicts, made again from the bound files (``build_summary`` over the
    variants' quantgate.json and run.json; ``worst_pages`` over the score files and records) and required equal:
    speed-ups, pages/s, sizes, formats, kernels, engine, notes, the speed waves' intervals, worst pages,
    the page set's hash."""
    from quantgate.io.pageset import load_pageset
    from quantgate.io.scores import read_scores
    from quantgate.reports import build_summary
    from quantgate.study.truthfree import truth_claims
    from quantgate.study.verdicts import score_file, speed_intervals
    from quantgate.study.worst import worst_pages

    c0 = st.compare_level
    scores = {(v.name, c0): read_scores(safe_join(out, score_file(v.name, c0), what="score file")) for v in st.variants}
    pages_file = safe_join(out, rep.inputs.pages, what=f"{where}: inputs.pages")
    inside = not pages_outside(rep.inputs.pages)
    ps = load_pageset(pages_file.parent) if inside else _without_truths(pages_file)
    worst = worst_pages(st, ps, out, scores, c0)
    dirs = {v.name: safe_join(out, v.path, what=f"{where}: variants.{v.name}.path") for v in rep.variants}
    seq = {v.name: v.sequential for v in rep.variants if v.sequential is not None}  # checked by _same_sequential
    # a report that shows the pages with and without truth and what their outputs bound (summary schema 4): from
    # the bound page set and bounds files too
    truthful = inside and (rep.truth is not None or bool(rep.truth_free))
    made = build_summary(st, out, rep.provenance.pageset_sha256, dirs, rep.verdicts, worst,
                         lm_eval=rep.lm_eval, inputs=rep.inputs, sequential=seq or None,
                         speed_intervals=speed_intervals(st, out),
                         **(truth_claims(st, ps, out)._asdict() if truthful else {})).model_dump()
    have = rep.model_dump()
    if not inside:  # the truths and images of pages outside the folder are not bound: compared without them
        for side in (made, have):
            for rows in side["worst_pages"].values():
                for row in rows:
                    row["truth"] = row["image"] = None
    for part in ("variants", "worst_pages", "complete") + (("truth", "truth_free", "largest_bounds") if truthful else ()):
        diff = _first_difference({part: have[part]}, {part: made[part]})
        if diff:
            raise _Invalid(f"{where}: {diff[0]} is {diff[1]!r} in summary.json but {diff[2]!r} from the study's "
                           "files; summary.json was edited or belongs to other files")
    if have["provenance"]["statistics"] != made["provenance"]["statistics"]:
        raise _Invalid(f"{where}: provenance.statistics is not what the study's verdicts give; summary.json was edited")


def _same_lmeval_runs(rep, st, out: Path, where: str) -> None:
    """summary.json's ``lm_eval.runs`` (what the report shows per variant: scores, versions, limit, fingerprint)
    is each variant's hashed lmeval.json, read again."""
    from quantgate.study.lmeval import lmeval_runs

    have = {k: r.model_dump() for k, r in rep.lm_eval.runs.items()}
    made = {k: r.model_dump() for k, r in lmeval_runs(st, out).items()}
    diff = _first_difference({"lm_eval.runs": have}, {"lm_eval.runs": made})
    if diff:
        raise _Invalid(f"{where}: {diff[0]} is {diff[1]!r} in summary.json but {diff[2]!r} in the lm-eval files; "
                       "summary.json was edited or belongs to other files")


def _without_truths(pages_file: Path):
    """The judged pages from the kept copy of an outside set's pages.jsonl, their truths left out (not in the folder)."""
    from quantgate.io.fileio import read_jsonl
    from quantgate.io.pageset import PageSet
    from quantgate.schema.base import parse_record
    from quantgate.schema.pages import PageRecord

    pages = [parse_record(PageRecord, obj, where=f"{pages_file}:{no}").model_copy(update={"truth": None})
             for no, obj in read_jsonl(pages_file)]
    return PageSet(root=pages_file.parent, pages=pages, manifest=None)


def _remake(rep, st, out: Path, where: str, decisions: dict):
    """Every verdict again, from the hashed files only, with the judged pages bound to the page set."""
    import json

    from quantgate.io.fileio import read_jsonl
    from quantgate.io.scores import read_scores
    from quantgate.study.verdicts import study_verdicts

    pages_file = safe_join(out, rep.inputs.pages, what=f"{where}: inputs.pages")
    judged = set()
    try:
        for _, obj in read_jsonl(pages_file):
            if isinstance(obj, dict) and (st.split == "all" or obj.get("split") == st.split):
                judged.add(obj.get("id"))
    except json.JSONDecodeError as e:
        raise _Invalid(f"{pages_file}: not a pages.jsonl ({e})") from None

    def read(rel: str):
        rows = read_scores(safe_join(out, rel, what=f"{where}: score file"))
        stray = sorted(set(rows) - judged)
        if stray:
            raise _Invalid(f"{out / rel}: {len(stray)} page(s) not in the judged split of {rep.inputs.pages}: "
                           f"{stray[:5]}")
        return rows

    return study_verdicts(st, out, read, pages_file=pages_file, decisions=decisions)


def _same_sequential(rep, decisions: dict, where: str) -> None:
    """A sequential study: each candidate's recorded stopping point and per-metric decisions are the ones
    its score files give (replayed look by look, as the study made them)."""
    for v in rep.variants:
        want = decisions.get(v.name)
        have = v.sequential
        if (want is None) != (have is None):
            raise _Invalid(f"{where}: variants.{v.name}.sequential is "
                           + ("missing" if have is None else "present") + " but the study is "
                           + ("sequential" if want is not None else "not sequential for it")
                           + "; summary.json was edited or belongs to another study")
        if want is not None:
            diff = _first_difference(have.model_dump(), want.model_dump())
            if diff:
                raise _Invalid(f"{where}: variants.{v.name}.sequential.{diff[0]} is {diff[1]!r} in summary.json but "
                               f"{diff[2]!r} from the study's files; summary.json was edited or belongs to other files")


def _first_difference(a, b, path: str = ""):
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            d = _first_difference(a.get(k), b.get(k), f"{path}.{k}" if path else str(k))
            if d:
                return d
        return None
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            d = _first_difference(x, y, f"{path}[{i}]")
            if d:
                return d
        return None
    return None if _equal(a, b) else (path, a, b)


def _same(stored, remade, key, where: str, field: str) -> None:
    """summary.json holds exactly the verdicts the files give: none missing, none extra, every field equal."""
    have = {key(r): r for r in (s.model_dump() for s in stored)}
    want = {key(r): r for r in (s.model_dump() for s in remade)}
    if len(have) != len(stored):
        raise _Invalid(f"{where}: {field} holds a verdict twice")
    missing = [k for k in want if k not in have]
    if missing:
        raise _Invalid(f"{where}: {field} lacks the verdict of {' × '.join(missing[0])}"
                       + (f" (and {len(missing) - 1} more)" if len(missing) > 1 else "")
                       + ": every variant × metric the study declares must have one")
    extra = [k for k in have if k not in want]
    if extra:
        raise _Invalid(f"{where}: {field} holds a verdict the study does not make: {' × '.join(extra[0])}")
    for k, w in want.items():
        h = have[k]
        # every field of either side: a field the remade row leaves out (noise_layout, absent in the baseline's
        # layout) must be absent from the stored one too
        for name in [*w, *(n for n in h if n not in w)]:
            if not _equal(h.get(name), w.get(name)):
                raise _Invalid(f"{where}: {field} {' × '.join(k)}: {name} is {h.get(name)!r} in summary.json but "
                               f"{w.get(name)!r} from the study's files; summary.json was edited or belongs to other "
                               "files")


def _equal(a, b) -> bool:
    """Equal, numbers to within float rounding (NaN equals nothing)."""
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool) | isinstance(b, bool):
        return math.isfinite(a) and math.isfinite(b) and math.isclose(a, b, **_FLOAT_TOL)
    return a == b
