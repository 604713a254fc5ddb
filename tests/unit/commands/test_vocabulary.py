"""Protects one vocabulary across the verbs and the study YAML: every verb and option explains itself, a flag
that sets what a YAML key sets has the key's name, default and bound (the flags are made from the pydantic
fields, and this test probes both with the same values), an old spelling still works for one release with a
warning and is refused beside its new name, and docs/study.md's flag table is the one the code generates."""

from __future__ import annotations

import argparse
import io
import types
import typing
import warnings
from contextlib import redirect_stderr
from typing import Annotated

import pytest
import yaml
from pydantic import TypeAdapter, ValidationError

from quantgate import cli
from quantgate.commands._fields import YAML_KEY, DeprecatedConst, flag_table, walk
from quantgate.errors import DeprecatedSpelling, InputError
from quantgate.schema.study import LmEvalSpec, Study, SynthPages
from tests.support.paths import REPO

# Flags named like a study key that are deliberately not made from it, each with why (anything else named like a
# key must be made from it, so a new flag cannot drift from its key unseen).
NOT_DERIVED = {
    ("demo", "--min-pages"): "unset means: warn when the demo's pages are below the calibrated minimum",
    ("lmeval-compare", "--min-pages"): "counts lm-eval samples, not pages (lm_eval has no such key)",
    ("pages synth", "--calibration-fraction"): "a set made only to calibrate on may take 1; a study's synthesized "
                                               "set must hold pages out ([0, 1))",
    ("lmeval-compare", "--min-documents"): "counts lm-eval samples, each its own document",
    ("serve", "--concurrency"): "a comma list; each level has the YAML's bound (concurrency_level)",
    ("speed-profile", "--concurrency"): "the levels profiled, as speed.profile lists them",
    ("score", "--concurrency"): "which one recorded level of a run to score",
    ("speed-profile", "--max-tokens"): "tokens per profiled request (speed.profile_max_tokens), not a page's budget",
    **{("compare", f): "per metric in the YAML ({ned: 0.1}); the flag is the judged metric's value, same units, "
       "checked against that metric as the YAML's are" for f in ("--worst-page-damage", "--worst-document-damage",
                                                               "--baseline-floor", "--expected-shift")},
}
TEXT_KEYS = {"name", "model", "prompt", "pages", "split", "variants", "baseline", "backend", "metrics", "output"}


def _parser():
    return cli.build_parser()


def _model_for(verb: str):
    return SynthPages if verb == "pages synth" else LmEvalSpec if verb == "lmeval" else Study


def test_every_verb_and_option_has_help():
    missing = []
    for verb, sub in walk(_parser()):
        if not sub.description:
            missing.append(f"{verb} (no description in its --help)")
        for a in sub._actions:
            if isinstance(a, (argparse._HelpAction, argparse._SubParsersAction)) or getattr(a, "of", None):
                continue  # a deprecated spelling is hidden; its current name's help mentions it
            if not a.help or a.help == argparse.SUPPRESS:
                missing.append(f"{verb} {'/'.join(a.option_strings) or a.dest}")
    assert not missing, f"without help text: {missing}"


def _kind(field):
    t = field.annotation
    args = [x for x in typing.get_args(t) if x is not type(None)]
    t = args[0] if typing.get_origin(t) in (typing.Union, types.UnionType) and len(args) == 1 else t
    t = typing.get_args(t)[0] if typing.get_origin(t) is typing.Annotated else t
    return "choice" if typing.get_origin(t) is typing.Literal else t if t in (int, float) else None


def _field_accepts(model, key: str, value) -> bool:
    field = model.model_fields[key]
    try:
        t = Annotated[(field.annotation, *field.metadata)] if field.metadata else field.annotation
        TypeAdapter(t).validate_python(value)
        return True
    except ValidationError:
        return False


def _flag_accepts(action, text: str) -> bool:
    try:
        action.type(text)
        return True
    except (argparse.ArgumentTypeError, ValueError):
        return False


PROBES = ["-1", "0", "0.5", "1", "2", "29", "30", "999", "1000", "86400", "86400.5", "1e9", "-0.01", "0.999"]


def test_flags_and_their_yaml_keys_agree_in_name_default_and_bound():
    seen = 0
    for verb, sub in walk(_parser()):
        model = _model_for(verb)
        for a in sub._actions:
            if not a.option_strings or a.dest not in model.model_fields or a.dest in TEXT_KEYS:
                continue
            field = model.model_fields[a.dest]
            if _kind(field) is None:  # a list, a path, a block: not a value with a default and a bound
                continue
            if getattr(a, "of", None):  # a hidden old spelling: the same destination as the flag it spells
                assert any(getattr(b, YAML_KEY, None) and b.dest == a.dest for b in sub._actions), (verb, a.dest)
                continue
            if isinstance(a, DeprecatedConst):  # an old on/off spelling of a value of the derived flag
                assert any(getattr(b, YAML_KEY, None) and b.dest == a.dest for b in sub._actions), (verb, a.dest)
                continue
            flag = [o for o in a.option_strings if o not in getattr(a, "deprecated_aliases", ())][0]
            key = getattr(a, YAML_KEY, None)
            if key is None:
                assert (verb, flag) in NOT_DERIVED, f"{verb} {flag}: named like {model.__name__}.{a.dest} but not " \
                                                    "made from it (commands._fields.yaml_flag)"
                continue
            seen += 1
            assert key == f"{model.__name__}.{a.dest}"
            assert flag == "--" + a.dest.replace("_", "-"), (verb, flag, a.dest)
            field = model.model_fields[a.dest]
            if getattr(a, "default_says", None) is None:
                assert a.default == field.get_default(call_default_factory=True), (verb, flag)
            else:  # a verb that falls back to something else says what, in its help
                assert a.default_says in a.help.replace("%%", "%"), (verb, flag)
            if a.choices:
                assert tuple(a.choices) == typing.get_args(field.annotation), (verb, flag)
                continue
            for text in PROBES:
                value = float(text) if "." in text or "e" in text else int(text)
                if isinstance(value, float) and _kind(field) is int:  # a count is not written as 1e9 or 0.5
                    continue
                assert _flag_accepts(a, text) == _field_accepts(model, a.dest, value), (verb, flag, text)
    assert seen >= 15


def _parse(argv):
    err = io.StringIO()
    with redirect_stderr(err):
        try:
            return _parser().parse_args(argv), err.getvalue(), None
        except SystemExit as e:
            return None, err.getvalue(), e.code


SERVE = ["serve", "m", "--pages", ".", "-o", "r"]


@pytest.mark.parametrize(("argv", "dest", "value", "old"), [
    (SERVE + ["--slo", "5"], "slo_s", 5.0, "--slo"),
    (SERVE + ["--timeout", "30"], "timeout_s", 30.0, "--timeout"),
    (["compare", ".", ".", "--metric", "ned", "--seed", "7"], "bootstrap_seed", 7, "--seed"),
    (["compare", ".", ".", "--metric", "ned", "--exact"], "test", "exact", "--exact"),
    (["pages", "import", ".", "-o", "p", "--seed", "3"], "split_seed", 3, "--seed"),
    (["quantize", ".", "--recipe", "bf16", "-o", "v", "--samples", "8"], "calibration_samples", 8, "--samples"),
])
def test_a_deprecated_spelling_still_works_with_a_warning(argv, dest, value, old):
    args, err, code = _parse(argv)
    assert code is None and getattr(args, dest) == value
    assert f"{old} is deprecated" in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize(("argv", "old", "new"), [
    (SERVE + ["--slo", "5", "--slo-s", "6"], "--slo", "--slo-s"),
    (["compare", ".", ".", "--metric", "ned", "--bootstrap-seed", "1", "--seed", "2"], "--seed", "--bootstrap-seed"),
    (["compare", ".", ".", "--metric", "ned", "--test", "equivalence", "--exact"], "--exact", "--test"),
])
def test_a_deprecated_spelling_beside_its_new_name_is_a_usage_error(argv, old, new):
    _, err, code = _parse(argv)
    assert code == 64 and old in err and new in err and len(err.strip().splitlines()) == 1, err


def test_recommend_takes_sensitivity_as_tune_does(tmp_path):
    from quantgate.commands.sensitivity import _sensitivity_file
    from quantgate.errors import UsageError

    f = tmp_path / "sens.json"
    f.write_text("{}")
    args, _, _ = _parse(["recommend", "--sensitivity", str(f), "--budget", "1MB", "-o", "r.yaml"])
    _sensitivity_file(args)
    assert args.sensitivity == f
    args, _, _ = _parse(["recommend", str(f), "--budget", "1MB", "-o", "r.yaml"])  # the old positional
    err = io.StringIO()
    with redirect_stderr(err):
        _sensitivity_file(args)
    assert args.sensitivity == f and "deprecated" in err.getvalue()
    args, _, _ = _parse(["recommend", str(f), "--sensitivity", str(f), "--budget", "1MB", "-o", "r.yaml"])
    with pytest.raises(UsageError, match="--sensitivity"):
        _sensitivity_file(args)


STUDY = {"name": "v", "model": "m", "pages": {"path": "p"}, "variants": [{"name": "bf16", "recipe": "bf16"},
                                                                         {"name": "fp8", "recipe": "fp8-dynamic"}]}


def test_the_yaml_seed_key_is_read_as_bootstrap_seed_with_a_warning(tmp_path):
    from quantgate.study.spec import load_study

    f = tmp_path / "s.yaml"
    f.write_text(yaml.safe_dump(STUDY | {"seed": 5}))
    with pytest.warns(DeprecatedSpelling, match="'seed' is deprecated, use 'bootstrap_seed'"):
        st = load_study(f)
    assert st.bootstrap_seed == 5 and "seed" not in st.model_dump()
    f.write_text(yaml.safe_dump(STUDY | {"bootstrap_seed": 5}))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert load_study(f).bootstrap_seed == 5
    f.write_text(yaml.safe_dump(STUDY | {"seed": 5, "bootstrap_seed": 6}))
    with pytest.raises(InputError, match="'seed' is the old name of 'bootstrap_seed'"):
        load_study(f)


def test_docs_flag_table_is_the_generated_one():
    text = (REPO / "docs" / "study.md").read_text("utf-8")
    begin, end = "<!-- flag-table: generated by quantgate.commands._fields.flag_table -->", "<!-- /flag-table -->"
    assert begin in text and end in text
    committed = text.split(begin, 1)[1].split(end, 1)[0].strip("\n") + "\n"
    assert committed == flag_table(_parser()), "regenerate docs/study.md's table: python -c 'from quantgate import " \
        "cli; from quantgate.commands._fields import flag_table; print(flag_table(cli.build_parser()))'"


def test_the_demo_says_which_variant_is_the_baseline():
    demo = dict(walk(_parser()))["demo"]
    [variants] = [a for a in demo._actions if "--variants" in a.option_strings]
    assert "FIRST is the baseline" in variants.help
