"""A study YAML is refused when it is read, before any folder is made, for each case that used to be accepted: a
metric or a level listed twice, a count beyond its bound (1e9 synthetic pages filled a disk), a number written as
text or a float where a count is meant (coerced before), a name that is a path (``../../escaped`` wrote outside
the study's folder); and a YAML syntax error or a 20,000-deep flow sequence is one line naming the file."""

from __future__ import annotations

import pytest
import yaml

from quantgate.errors import InputError

BASE = {"name": "s", "model": "m", "pages": {"synth": {"n": 4}}, "metrics": ["ned"],
        "variants": [{"name": "bf16", "recipe": "bf16"}, {"name": "fp8", "recipe": "fp8-dynamic"}]}


def _load(tmp_path, text: str):
    from quantgate.study.spec import load_study

    f = tmp_path / "study.yaml"
    f.write_text(text)
    return load_study(f)


def _with(**fields) -> str:
    d = yaml.safe_load(yaml.safe_dump(BASE))
    for k, v in fields.items():
        if k == "synth_n":
            d["pages"]["synth"]["n"] = v
        else:
            d[k] = v
    return yaml.safe_dump(d)


def test_the_base_study_loads(tmp_path):
    st = _load(tmp_path, _with())
    assert st.name == "s" and st.max_tokens == 1024


@pytest.mark.parametrize("fields,field", [
    ({"metrics": ["ned", "ned"]}, "metrics"),
    ({"concurrency": [1, 8, 1]}, "concurrency"),
    ({"variants": [{"name": "bf16", "recipe": "bf16"}, {"name": "bf16", "recipe": "fp8-dynamic"}]}, "(record)"),
    ({"max_tokens": 1e30}, "max_tokens"),
    ({"max_tokens": 48.0}, "max_tokens"),
    ({"max_tokens": "48"}, "max_tokens"),
    ({"max_tokens": 10**7}, "max_tokens"),
    ({"margins": {"ned": "0.01"}}, "margins.ned"),
    ({"synth_n": 10**9}, "pages.synth.n"),
    ({"synth_n": 1e9}, "pages.synth.n"),
    ({"resamples": 10**9}, "resamples"),
    ({"slo_s": 1e12}, "slo_s"),
    ({"calibration_samples": 10**9}, "calibration_samples"),
    ({"name": "../../escaped"}, "name"),
    ({"name": "a/b"}, "name"),
    ({"name": ".hidden"}, "name"),
    ({"name": 2024}, "name"),
])
def test_bad_fields_are_refused_naming_the_field(tmp_path, fields, field):
    with pytest.raises(InputError) as e:
        _load(tmp_path, _with(**fields))
    msg = str(e.value)
    assert f"field '{field}'" in msg and "\n" not in msg, msg


def test_yaml_that_cannot_be_read_is_one_line(tmp_path):
    with pytest.raises(InputError, match=r"study\.yaml:3: not valid YAML") as e:
        _load(tmp_path, "name: s\nmodel: m\n  pages: [\n")
    assert "\n" not in str(e.value)
    with pytest.raises(InputError, match="nested more than") as e:
        _load(tmp_path, "[" * 20_000 + "\n")
    assert "\n" not in str(e.value)


def test_a_study_named_as_a_path_writes_nothing_outside(tmp_path):
    from tests.support.cli import run_cli

    (tmp_path / "in").mkdir()
    f = tmp_path / "in" / "study.yaml"
    f.write_text(_with(name="../../escaped"))
    code, out, err = run_cli("study", f)
    assert code != 0 and "field 'name'" in err and len(err.splitlines()) == 1, (out, err)
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["in", "study.yaml"]
