"""The study side of a tune: the user's study read (it may list the baseline alone), a trial's study
written from it (paths absolute, the tune's variants added), the study run, and the trial's verdicts
read back from the report it returns."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import yaml

from quantgate.errors import InputError
from quantgate.schema.tune import Measured


def study_settings_sha(st) -> str:
    """The study's settings that change a verdict; its variants and output are the tune's to extend."""
    d = st.model_dump(mode="json", exclude={"variants", "output", "limit"})
    return hashlib.sha256(json.dumps(d, sort_keys=True).encode()).hexdigest()


def _recipe_ref(recipe: str, base: Path) -> str:
    from quantgate.quantize.recipes import PRESETS_DIR

    if (PRESETS_DIR / f"{recipe}.yaml").is_file():
        return recipe
    for cand in (Path(recipe), base / recipe):  # run_study reads it as given; the study's folder is the intent
        if cand.is_file():
            return str(cand.resolve())
    return recipe


def trial_study(st, base: Path, out: Path, variants: list[tuple[str, str]], limit: int | None) -> dict:
    """The user's study with every path absolute (the YAML lives in the tune folder), the tune's
    variants added and the trial's page limit."""
    from quantgate.study.spec import resolve_path

    d = st.model_dump(mode="json")
    d["model"] = str(resolve_path(base, st.model).resolve())
    if st.pages.path:
        d["pages"]["path"] = str(resolve_path(base, st.pages.path).resolve())
    if st.lm_eval and st.lm_eval.include_path:
        d["lm_eval"]["include_path"] = str(resolve_path(base, st.lm_eval.include_path).resolve())
    cc = d["backend"].get("compile_cache")
    if cc and cc.lower() != "none":
        d["backend"]["compile_cache"] = str(resolve_path(base, cc).resolve())
    d["variants"] = [{**v, "recipe": _recipe_ref(v["recipe"], base)} for v in d["variants"]]
    own = {v["name"] for v in d["variants"]}
    d["variants"] += [{"name": n, "recipe": r} for n, r in variants if n not in own]
    d["output"] = str(out.resolve())
    d["limit"] = limit
    return d


def measured_of(report: dict, variant: str) -> list[Measured]:
    rows = [Measured(source="pages", metric=v["metric"], verdict=v["verdict"], reason=v.get("reason"),
                     higher_is_better=v["higher_is_better"], n=v["n"], baseline_mean=v.get("baseline_mean"),
                     candidate_mean=v.get("candidate_mean"), delta=v["delta"], ci_low=v["ci_low"], ci_high=v["ci_high"],
                     margin=v["margin"], pages_needed=v.get("pages_needed"), pages_changed=v.get("pages_changed"))
            for v in report.get("verdicts", []) if v["variant"] == variant]
    for v in (report.get("lm_eval") or {}).get("verdicts", []):
        if v["variant"] == variant:
            rows.append(Measured(source="lm_eval", metric=f"{v['task']} {v['metric']}", verdict=v["verdict"],
                                 higher_is_better=v["higher_is_better"], n=v["n"], baseline_mean=v["baseline"],
                                 candidate_mean=v["candidate"], delta=v["delta"], ci_low=v["ci_low"],
                                 ci_high=v["ci_high"], margin=v["margin"]))
    return rows


def load_user_study(path: Path):
    """The user's study; it may list the baseline alone (a study asks for two variants: the tune adds
    the rest), so a placeholder is added for the check and removed."""
    import tempfile

    from quantgate.study.spec import load_study

    try:
        obj = yaml.safe_load(path.read_text("utf-8"))
    except (OSError, yaml.YAMLError, UnicodeDecodeError) as e:
        raise InputError(f"{path}: cannot read the study ({e})") from None
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


def run_study(study_file: Path, out: Path, log) -> dict:
    from quantgate.study import run_study

    return run_study(study_file, out, log=log)
