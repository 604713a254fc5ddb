"""The study side of a tune: the user's study read (it may list the baseline alone), a trial's study
written from it (paths absolute, the tune's variants added), the study run, and the trial's verdicts
read from the report it returns (``TrialStudy``)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path

import yaml

from quantgate.errors import InputError
from quantgate.schema.load import load_yaml
from quantgate.schema.summary import Summary
from quantgate.schema.tune import Measured, TrialStudy


def study_settings_sha(st) -> str:
    """The study's settings that change a verdict; its variants and output are the tune's to extend."""
    d = st.model_dump(mode="json", exclude={"variants", "output", "limit"})
    return hashlib.sha256(json.dumps(d, sort_keys=True).encode()).hexdigest()


def trial_study(st, base: Path, out: Path, variants: list[tuple[str, str]], limit: int | None) -> dict:
    """The user's study with every path absolute (the YAML lives in the tune folder), the tune's
    variants added and the trial's page limit."""
    from quantgate.study.spec import absolute_study

    d = absolute_study(st, base).model_dump(mode="json")
    own = {v["name"] for v in d["variants"]}
    d["variants"] += [{"name": n, "recipe": r} for n, r in variants if n not in own]
    d["output"] = str(out.resolve())
    d["limit"] = limit
    return d


def trial_outcome(report: Summary) -> TrialStudy:
    """What a trial's study gave the tune: each variant's verdicts as the next step reads them, and its size."""
    measured: dict[str, list[Measured]] = {}
    for v in report.verdicts:
        if v.tag is not None:
            continue  # a tune steps on the overall verdicts; the per-tag rows are the report's
        measured.setdefault(v.variant, []).append(Measured(
            source="pages", metric=v.metric, verdict=v.verdict, reason=v.reason, higher_is_better=v.higher_is_better,
            n=v.n, baseline_mean=v.baseline_mean, candidate_mean=v.candidate_mean, delta=v.delta, ci_low=v.ci_low,
            ci_high=v.ci_high, margin=v.margin, pages_needed=v.pages_needed, pages_changed=v.pages_changed))
    for x in report.lm_eval.verdicts if report.lm_eval else []:
        measured.setdefault(x.variant, []).append(Measured(
            source="lm_eval", metric=f"{x.task} {x.metric}", verdict=x.verdict, higher_is_better=x.higher_is_better,
            n=x.n, baseline_mean=x.baseline, candidate_mean=x.candidate, delta=x.delta, ci_low=x.ci_low,
            ci_high=x.ci_high, margin=x.margin))
    return TrialStudy(measured=measured, weights_bytes={v.name: v.weights_bytes for v in report.variants})


def load_user_study(path: Path):
    """The user's study; it may list the baseline alone (a study asks for two variants: the tune adds
    the rest), so a placeholder is added for the check and removed."""
    import tempfile

    from quantgate.study.spec import load_study

    obj = load_yaml(path, "study")  # under the loader's limits: one DataError naming the file and line
    if not (isinstance(obj, dict) and isinstance(obj.get("variants"), list) and len(obj["variants"]) == 1):
        return load_study(path)
    obj["variants"].append({"name": "quantgate-tune-placeholder", "recipe": "bf16"})
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d) / path.name
        tmp.write_text(yaml.safe_dump(obj, sort_keys=False), "utf-8")
        try:
            st = load_study(tmp)
        except InputError as e:
            raise InputError(str(e).replace(str(tmp), str(path))) from None
    return st.model_copy(update={"variants": st.variants[:1]})


def run_study(study_file: Path, out: Path, log: Callable[[str], None]) -> TrialStudy:
    """The trial's study, run (or resumed) in the tune's study folder."""
    from quantgate.study import run_study

    summary = run_study(study_file, out, log=log).summary
    if summary is None:  # pragma: no cover - run_study returns a report unless told to stop early
        raise InputError(f"{study_file}: the study stopped before its report")
    return trial_outcome(summary)
