"""Every variant's recipe is read and planned before the first quantize — a typo in the last
variant is one error naming it, before BF16 has been written."""

from pathlib import Path

import pytest
import yaml

from quantgate.errors import InputError
from quantgate.study.demo import READER
from quantgate.study.preflight import check_recipes
from quantgate.study.spec import load_study


def _study(tmp_path, recipes):
    body = {"name": "s", "model": str(READER), "pages": {"synth": {"n": 4, "profile": "reader"}},
            "variants": [{"name": Path(r).stem, "recipe": r} for r in recipes]}
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(body))
    return load_study(tmp_path / "s.yaml")


def test_a_typo_in_the_last_recipe_is_found_before_any_quantize(tmp_path):
    st = _study(tmp_path, ["bf16", "fp8-dynamic", "nvfp4-typo"])
    with pytest.raises(InputError, match=r"variant 'nvfp4-typo'"):
        check_recipes(st, READER)
    assert not (tmp_path / "s-out").exists()


def test_a_recipe_file_with_a_typo_is_found_too(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: bad\nrules:\n  - {kinds: [attention, mlp], format: fp9}\n")
    st = _study(tmp_path, ["bf16", str(bad)])
    with pytest.raises(InputError, match="variant"):
        check_recipes(st, READER)


def test_recipes_that_apply_pass(tmp_path):
    check_recipes(_study(tmp_path, ["bf16", "fp8-dynamic"]), READER)
