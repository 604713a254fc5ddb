"""The CI examples in docs/ci work as written: each parses as YAML, every quantgate command in them is a verb of this
parser with flags it knows and files that exist in the repository, quantgate is installed with pip from the checkout
(not `make setup`, which only works inside quantgate's own tree), every variant of the study is cached under the
study's output folder with one path per line and a key built from files that exist, the gate's junit.xml is the file
published, and the study they run loads."""

import glob
import re
import shlex
from pathlib import Path

import pytest
import yaml

from quantgate import cli
from quantgate.study.spec import load_study
from tests.support.paths import REPO

CI = REPO / "docs" / "ci"
STUDY = "docs/ci/study.yaml"


def _github():
    doc = yaml.safe_load((CI / "github-actions.yml").read_text())
    (job,) = doc["jobs"].values()
    steps = job["steps"]
    runs = [line for s in steps if "run" in s for line in s["run"].splitlines() if line.strip()]
    caches = [(s["with"]["path"].splitlines(), s["with"]["key"]) for s in steps
              if s.get("uses", "").startswith("actions/cache@")]
    junit = [s["with"]["report_paths"] for s in steps if s.get("uses", "").startswith("mikepenz/action-junit-report@")]
    return runs, caches, junit


def _gitlab():
    doc = yaml.safe_load((CI / "gitlab-ci.yml").read_text())
    (job,) = doc.values()
    runs = job["before_script"] + job["script"]
    caches = [(c["paths"], c["key"]) for c in job["cache"]]
    return runs, caches, [job["artifacts"]["reports"]["junit"]]


def _commands(runs):
    """Each shell command of the run lines, split as the shell would (`a && b` is two)."""
    for line in runs:
        for part in re.split(r"\s*&&\s*", line):
            yield shlex.split(part)


def _quantgate_argv(runs):
    return [argv[1:] for argv in _commands(runs) if argv[0] == "quantgate"]


def _option(argv, flag):
    return argv[argv.index(flag) + 1] if flag in argv else None


SYSTEMS = {"github": _github, "gitlab": _gitlab}


@pytest.mark.parametrize("system", list(SYSTEMS))
def test_every_quantgate_command_is_a_verb_with_known_flags_and_existing_files(system):
    runs, _, _ = SYSTEMS[system]()
    parser = cli.build_parser()
    verbs = next(a for a in parser._actions if a.dest == "verb").choices
    argvs = _quantgate_argv(runs)
    assert [a[0] for a in argvs] == ["study", "gate"]
    study, gate = argvs
    for argv in argvs:
        sub = verbs[argv[0]]
        known = sub._option_string_actions
        flags = [t for t in argv[1:] if t.startswith("-")]
        assert all(f in known for f in flags), (argv, [f for f in flags if f not in known])
    assert study[1] == STUDY and (REPO / STUDY).is_file()
    out = _option(study, "-o")
    assert gate[1] == out, "the gate checks the folder the study wrote"
    assert _option(gate, "--study") == STUDY
    assert Path(_option(gate, "--junit")).parent == Path(out)
    # the study's own parse (paths given as the repository root sees them; the output folder is made by the study)
    args = parser.parse_args([study[0], str(REPO / study[1]), *study[2:]])
    assert args.func.__name__ == "cmd_study"


@pytest.mark.parametrize("system", list(SYSTEMS))
def test_quantgate_is_installed_with_pip_from_the_checkout(system):
    runs, _, _ = SYSTEMS[system]()
    cmds = list(_commands(runs))
    assert not [c for c in cmds if c[0] == "make"], "make setup works only inside quantgate's own checkout"
    pip = [c for c in cmds if c[0] == "pip"]
    assert pip and all(c[1] == "install" for c in pip)
    (install,) = pip
    assert install[-1] == "." and (REPO / "pyproject.toml").is_file()
    assert (REPO / _option(install, "-c")).is_file()


@pytest.mark.parametrize("system", list(SYSTEMS))
def test_every_variant_is_cached_by_its_recipe_under_the_study_output(system):
    """Each variant's weights are cached under a key naming its recipe and the study; its served run under a key
    naming the study and the pinned packages, so a new serving stack serves it again instead of re-judging old
    outputs. Every path once, one path per line, each cache entry its own key."""
    runs, caches, junit = SYSTEMS[system]()
    study_argv = _quantgate_argv(runs)[0]
    out = _option(study_argv, "-o")
    st = load_study(REPO / STUDY)
    recipes = {v.name: v.recipe for v in st.variants}
    seen: list[str] = []
    for paths, key in caches:
        assert all(" " not in p for p in paths), f"one path per line: {paths}"
        files = re.findall(r"'([^']+)'", key) if isinstance(key, str) else key["files"]
        assert files and all(glob.glob(str(REPO / f)) for f in files), files
        for p in paths:
            kind, name = Path(p).parent.name, Path(p).name
            assert p == f"{out}/{kind}/{name}" and kind in ("variants", "runs") and name in recipes, p
            need = {STUDY, f"quantgate/recipes/presets/{recipes[name]}.yaml"} if kind == "variants" else {
                STUDY, "constraints.txt"}
            assert need <= set(files), (p, files)
            seen.append(p)
    assert sorted(seen) == sorted(f"{out}/{k}/{n}" for n in recipes for k in ("variants", "runs"))
    assert len({str(k) for _, k in caches}) == len(caches), "each cache entry its own key"
    assert junit == [_option(_quantgate_argv(runs)[1], "--junit")]


def test_the_example_study_loads_and_its_model_is_in_the_repository():
    st = load_study(REPO / STUDY)
    model = (REPO / "docs" / "ci" / st.model).resolve()
    assert (model / "config.json").is_file() and model.is_relative_to(REPO)


def test_a_study_that_does_not_exist_is_a_usage_error(tmp_path):
    from tests.support.cli import run_cli

    code, out, err = run_cli("study", tmp_path / "release" / "study.yaml", "-o", tmp_path / "study-out")
    assert code == 64 and "study.yaml: no such file or folder" in err and len(err.splitlines()) == 1
    assert not (tmp_path / "study-out").exists()
