"""``quantgate tune``: recommend → quantize → serve → score → verdict, until every verdict of a
trial is within noise, or ``max_trials``.

Each trial is an ordinary study: the user's study with the trial's variant added (and every earlier
trial's, so the report shows them all), written as ``OUT/tune/<name>/t<k>.study.yaml`` and run by
``run_study`` into the same folder — finished variants and runs are reused by fingerprint, so a
trial costs its own quantize and serve. A trial is appended to ``trials.jsonl`` when it finishes; a
killed tune rerun with the same command replays the recorded actions and resumes at the trial it
was in (its recipe is the same, so its built variant and served pages are reused)."""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path

import yaml

from quantgate.errors import InputError, UsageError
from quantgate.io.fileio import (
    append_jsonl,
    atomic_write_bytes,
    atomic_write_json,
    atomic_write_text,
    exclusive_lock,
    read_jsonl,
    sha256_file,
)
from quantgate.schema.base import parse_record
from quantgate.schema.load import load_json
from quantgate.schema.tune import Trial, TuneFile, TuneInputs
from quantgate.tune import policy
from quantgate.tune import report as _report  # noqa: F401  (registers the tune's section of the study report)
from quantgate.tune.study import load_user_study, run_study, study_settings_sha, trial_study

TUNE_DIR = "tune"
TRIALS = "trials.jsonl"
TUNE_JSON = "tune.json"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


def default_name(budget_bytes: int | None, effective_bits: float | None, speedup: float | None) -> str:
    if budget_bytes is not None:  # exact, in the largest decimal unit it reaches: tune-2.579769MB
        unit, scale = next((u, f) for u, f in (("GB", 10**9), ("MB", 10**6), ("kB", 10**3), ("B", 1))
                           if budget_bytes >= f)
        x = format(Decimal(budget_bytes) / Decimal(scale), "f")
        return f"tune-{x.rstrip('0').rstrip('.') if '.' in x else x}{unit}"
    if effective_bits is not None:
        return f"tune-{effective_bits:g}bits"
    return f"tune-{speedup:g}x"


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _lock(path: Path):
    return exclusive_lock(path, f"{path.parent}: another quantgate tune is running on this study folder; wait for it")


def sensitivity_fingerprint(sens) -> str:
    """sha256 over what a recommendation reads from a sensitivity file — not its timings or date."""
    d = {"model": sens.model_weights_sha256, "formats": sens.formats, "keep_bf16": sens.keep_bf16,
         "bandwidth": sens.bandwidth_gbps, "sizes": sens.sizes.model_dump(),
         "groups": [g.model_dump() for g in sens.groups],
         "measurements": sorted((m.group, m.format, m.kl_mean, m.bytes) for m in sens.measurements),
         "baseline": sens.baseline.kl_mean if sens.baseline else None}
    return hashlib.sha256(json.dumps(d, sort_keys=True).encode()).hexdigest()


def load_trials(tdir: Path) -> list[Trial]:
    path = tdir / TRIALS
    if not path.is_file():
        return []
    return [parse_record(Trial, obj, where=f"{path}:{no}") for no, obj in read_jsonl(path, repair_torn_tail=True)]


def tune_variants(out: Path) -> list[tuple[str, str]]:
    """(variant, recipe path) of every trial recorded under ``out/tune`` (every tune name), in order."""
    seen: dict[str, str] = {}
    root = out / TUNE_DIR
    for tdir in sorted(p for p in root.iterdir() if p.is_dir()) if root.is_dir() else []:
        for t in load_trials(tdir):
            seen.setdefault(t.variant, str((out / t.recipe).resolve()))
    return list(seen.items())


def chosen_trial(trials: list[Trial], mode: str) -> Trial | None:
    """The smallest (or, for a speed budget, fastest) trial whose verdicts are all within noise."""
    ok = [t for t in trials if t.outcome == "within_noise"]
    if not ok:
        return None
    key = (lambda t: (-t.modelled_speedup, t.bytes)) if mode == "speedup" else (lambda t: (t.bytes, t.decode_bytes))
    return min(ok, key=lambda t: (*key(t), t.trial))


def replay(trials: list[Trial]) -> tuple[dict[str, list[str]], int | None, bool]:
    """(exclude, limit, finished) after the recorded trials."""
    exclude: dict[str, list[str]] = {}
    limit = None
    for t in trials:
        exclude, limit = t.exclude, t.limit
        a = t.action
        if a.kind in ("done", "stop"):
            return exclude, limit, True
        if a.kind == "promote":
            exclude = policy.merge_exclude(exclude, a.promote)
        elif a.kind == "tighten":
            limit = a.limit
    return exclude, limit, False


class Tuner:
    """One tune: its inputs, its folder, and the step a trial takes (``run_trial``). The study step
    is a parameter so tests can drive the loop without serving."""

    def __init__(self, study_path: Path, sensitivity_path: Path, *, budget_bytes: int | None = None,
                 effective_bits: float | None = None, speedup: float | None = None, max_trials: int = 5,
                 out: Path | None = None, name: str | None = None, formats: list[str] | None = None,
                 target: str = "hopper", run_study: Callable | None = None, log: Callable[[str], None] = print,
                 speed_table: Path | None = None, speed_concurrency: int | None = None,
                 prefill_table: Path | None = None):
        from quantgate.sensitivity import check_model, load_sensitivity
        from quantgate.sensitivity.recommend import recommend
        from quantgate.study.spec import resolve_path

        if max_trials < 1:
            raise UsageError(f"--max-trials {max_trials}: must be at least 1")
        self.study_path = Path(study_path)
        self.st = load_user_study(self.study_path)
        self.base = self.study_path.resolve().parent
        self.out = Path(out) if out else resolve_path(self.base, self.st.output or f"{self.st.name}-out")
        self.sens_path = Path(sensitivity_path)
        self.sens = load_sensitivity(self.sens_path)
        check_model(self.sens, resolve_path(self.base, self.st.model), str(self.sens_path))
        self.budget = {"budget_bytes": budget_bytes, "effective_bits": effective_bits, "speedup": speedup}
        if speed_table is not None:  # --speedup (and every trial's speed-up) from the measured cost table
            from quantgate.schema.speed import load_cost_table

            self.budget.update(speed_table=load_cost_table(speed_table), speed_table_source=str(speed_table),
                               speed_concurrency=speed_concurrency)
            if prefill_table is not None:  # the served speed-up, the waves' prefill phase included
                from quantgate.speed.served import load_prefill_table

                self.budget.update(prefill_table=load_prefill_table(prefill_table),
                                   prefill_table_source=str(prefill_table))
        elif prefill_table is not None:
            from quantgate.errors import UsageError as _Usage

            raise _Usage("--prefill-table needs --speed-table (the decode step it adds the prefill phase to)")
        self.formats = formats or list(self.sens.formats)
        self.target = target
        # a budget outside what the formats allow is refused here, before any work
        first = recommend(self.sens, **self.budget, formats=self.formats, target=target)
        self.mode, self.limit_value = first.mode, first.limit
        self.name = name or default_name(budget_bytes, effective_bits, speedup)
        if not _NAME.match(self.name):
            raise UsageError(f"--name {self.name!r}: letters, digits, '.', '_' and '-' only (it names study variants)")
        clash = [v.name for v in self.st.variants if v.name.startswith(f"{self.name}-t")]
        if clash:
            raise InputError(f"{self.study_path}: variant {clash[0]!r} would clash with this tune's trial names; "
                             "rename it or pass --name")
        self.max_trials = max_trials
        self.tdir = self.out / TUNE_DIR / self.name
        self.run_study = run_study
        self.log = log
        sha, fp = sha256_file(self.sens_path), sensitivity_fingerprint(self.sens)
        # named by content, not by file: a rerun of `quantgate sensitivity` rewrites the file's timings, and the
        # name is written into every recipe (whose text is part of the variant's fingerprint)
        self.sens_copy = self.out / TUNE_DIR / f"sensitivity-{fp[:12]}.json"
        self.inputs = TuneInputs(study=str(self.study_path.resolve()), study_sha256=study_settings_sha(self.st),
                                 sensitivity=str(self.sens_path.resolve()), sensitivity_sha256=sha,
                                 sensitivity_fingerprint=fp,
                                 model_weights_sha256=self.sens.model_weights_sha256, mode=self.mode,
                                 limit=self.limit_value, formats=formats, target=target,
                                 speed_table_sha256=sha256_file(Path(speed_table)) if speed_table else None,
                                 prefill_table_sha256=sha256_file(Path(prefill_table)) if prefill_table else None,
                                 speed_concurrency=first.speed.concurrency if first.speed else None)

    # --- files ---------------------------------------------------------------------------------------

    def _check_resume(self, overwrite: bool) -> None:
        path = self.tdir / TUNE_JSON
        if not path.is_file():
            if (self.tdir / TRIALS).is_file() and not overwrite:
                raise InputError(f"{self.tdir}: has trials but no {TUNE_JSON}; pass --overwrite to start this tune again")
            return
        old = parse_record(TuneFile, load_json(path, "tune record"), where=str(path))  # under the loader's limits
        same_anyway = {"study", "sensitivity", "sensitivity_sha256"}  # paths, and the file's timings and date
        mine, theirs = self.inputs.model_dump(exclude=same_anyway), old.inputs.model_dump(exclude=same_anyway)
        if mine != theirs and not overwrite:
            diff = sorted(k for k in mine if mine[k] != theirs.get(k))
            raise InputError(f"{self.tdir}: holds a tune with other inputs ({', '.join(diff)}); pass --name to keep "
                             "both, or --overwrite to start this one again (built variants are reused where they match)")
        if mine != theirs or overwrite:
            for p in (self.tdir / TRIALS, path):
                p.unlink(missing_ok=True)

    def _write(self, trials: list[Trial], status: str, message: str, current: int | None = None) -> TuneFile:
        chosen = chosen_trial(trials, self.mode)
        tf = TuneFile(name=self.name, inputs=self.inputs, sensitivity_copy=str(self.sens_copy.relative_to(self.out)),
                      max_trials=self.max_trials, status=status, current_trial=current,
                      chosen=chosen.trial if chosen else None, message=message, trials=trials, updated_utc=_now())
        atomic_write_json(self.tdir / TUNE_JSON, tf.model_dump(mode="json"))
        return tf

    def _refresh_report(self) -> None:
        from quantgate.reports import load_summary, write_reports
        from quantgate.schema.summary import SUMMARY

        if (self.out / SUMMARY).is_file():
            write_reports(load_summary(self.out), self.out)

    def _available(self) -> int | None:
        from quantgate.io.pageset import load_pageset
        from quantgate.study.spec import resolve_path

        d = self.out / "pages" if self.st.pages.synth else resolve_path(self.base, self.st.pages.path)
        try:
            return len(load_pageset(d).split(self.st.split))
        except InputError:
            return None

    def _feasible(self, exclude: dict[str, list[str]]) -> bool:
        from quantgate.sensitivity.recommend import recommend

        try:
            recommend(self.sens, **self.budget, formats=self.formats, target=self.target, exclude=exclude)
        except InputError:
            return False
        return True

    # --- the loop ------------------------------------------------------------------------------------

    def run(self, overwrite: bool = False) -> TuneFile:
        self.out.mkdir(parents=True, exist_ok=True)
        with _lock(self.out / TUNE_DIR / ".lock"):
            self.tdir.mkdir(parents=True, exist_ok=True)
            self._check_resume(overwrite)
            if not self.sens_copy.is_file():
                atomic_write_bytes(self.sens_copy, self.sens_path.read_bytes())
            trials = load_trials(self.tdir)
            exclude, limit, finished = replay(trials)
            if not trials:
                limit = self.st.limit
            if finished:
                return self._finish(trials, trials[-1].action.text)
            while len(trials) < self.max_trials:
                stop = self.run_trial(trials, exclude, limit)
                if stop is not None:
                    return self._finish(trials, stop)
                exclude, limit, finished = replay(trials)
                if finished:
                    return self._finish(trials, trials[-1].action.text)
            return self._finish(trials, f"--max-trials {self.max_trials} reached")

    def _finish(self, trials: list[Trial], why: str) -> TuneFile:
        chosen = chosen_trial(trials, self.mode)
        if chosen:
            msg = (f"trial {chosen.trial} ({chosen.variant}, {chosen.recipe}): every verdict within noise; "
                   f"{chosen.bytes:,} bytes predicted ({chosen.weights_bytes or 0:,} built)")
        else:
            msg = f"no trial got every verdict within noise ({len(trials)} trial(s)): {why}"
        tf = self._write(trials, "found" if chosen else "not_found", msg)
        self._refresh_report()
        return tf

    def run_trial(self, trials: list[Trial], exclude: dict[str, list[str]], limit: int | None) -> str | None:
        """Run trial ``len(trials) + 1``; append it to ``trials``. Returns a reason to stop without a
        trial (no recipe under the budget avoids the forbidden formats), else None."""
        from quantgate.sensitivity.recommend import recommend
        from quantgate.sensitivity.write import recipe_yaml

        k = len(trials) + 1
        try:
            rec = recommend(self.sens, **self.budget, formats=self.formats, target=self.target, exclude=exclude)
        except InputError as e:
            return f"no recipe under the budget avoids the formats that failed ({e})"
        same = next((t for t in trials if t.assignment == rec.assignment), None)
        if same and same.limit == limit:
            return f"the solver returned trial {same.trial}'s recipe again"
        if same:  # the same recipe on more pages: the same variant, served further
            variant, recipe_file = same.variant, self.out / same.recipe
        else:
            variant, recipe_file = f"{self.name}-t{k}", self.tdir / f"t{k}.yaml"
            atomic_write_text(recipe_file, recipe_yaml(self.sens, rec, name=variant,
                                                       source=f"{self.sens_copy.name} (quantgate tune {self.name})"))
        variants = tune_variants(self.out)
        if variant not in dict(variants):
            variants.append((variant, str(recipe_file.resolve())))
        spec = trial_study(self.st, self.base, self.out, variants, limit)
        study_file = self.tdir / f"t{k}.study.yaml"
        atomic_write_text(study_file, f"# trial {k} of `quantgate tune` {self.name}: the study {self.study_path} with "
                          "the tune's variants\n" + yaml.safe_dump(spec, sort_keys=False, allow_unicode=True))
        self._write(trials, "running", f"trial {k} running", current=k)
        self.log(f"[tune] trial {k}: {variant}, {rec.total_bytes:,} bytes, predicted KL {rec.predicted_kl:.3e}"
                 + (f", {limit} pages" if limit else ""))
        t0 = time.time()
        run = self.run_study or run_study
        result = run(study_file, self.out, self.log)
        measured = result.measured.get(variant, [])
        weights = result.weights_bytes.get(variant)
        action = policy.next_action(self.sens, rec.assignment, measured, formats=self.formats, exclude=exclude,
                                    limit=limit, available=self._available(), feasible=self._feasible)
        trial = Trial(trial=k, variant=variant, recipe=str(recipe_file.relative_to(self.out)),
                      recipe_sha256=sha256_file(recipe_file), study=str(study_file.relative_to(self.out)),
                      exclude=exclude, limit=limit, assignment=rec.assignment, bytes=rec.total_bytes,
                      weights_bytes=weights, effective_bits=rec.effective_bits, decode_bytes=rec.decode_bytes,
                      modelled_decode_ms=rec.modelled_decode_ms, modelled_speedup=rec.modelled_speedup,
                      speed_basis=rec.speed_basis,
                      predicted_kl=rec.predicted_kl, verdicts=measured, outcome=policy.outcome(measured),
                      action=action, wall_s=round(time.time() - t0, 1), finished_utc=_now())
        append_jsonl(self.tdir / TRIALS, trial.model_dump(mode="json"), fsync=True)
        trials.append(trial)
        self.log(f"[tune] trial {k}: {trial.outcome}; {action.kind}: {action.text}")
        self._write(trials, "running", f"trial {k} finished")
        self._refresh_report()
        return None


def tune(study_path: Path, sensitivity_path: Path, *, overwrite: bool = False, **kw) -> TuneFile:
    """Run (or resume) a tune; see :class:`Tuner` for the arguments."""
    return Tuner(study_path, sensitivity_path, **kw).run(overwrite=overwrite)

