""""unbounded waits and silent nonsense": every numeric command-line flag and every numeric
field of a study's YAML is checked before any work starts — one line naming the flag or field, exit 2,
no traceback, nothing written.

The rules below (``FLAGS``, ``STUDY_FIELDS``) are this test's own statement of what each value may be;
they are written out, not read from the code, so a loosened or forgotten check fails here. Every numeric
flag the parser has must appear in ``FLAGS``: a new one without a rule fails
``test_every_numeric_flag_has_a_rule``."""

from __future__ import annotations

import io
import math
import subprocess
import sys
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from quantgate import cli
from quantgate.errors import InputError
from tests.support.paths import REPO

INVALID = object()

# --- the rules: what each numeric flag accepts ------------------------------------------------------------


def ints(lo, hi=None):
    return "int", lambda v: v >= lo and (hi is None or v <= hi)


def floats(lo, hi=None, lo_open=True, hi_open=False):
    def ok(v):
        above = v > lo if lo_open else v >= lo
        below = hi is None or (v < hi if hi_open else v <= hi)
        return above and below

    return "float", ok


CONC = ints(1, 65_535)  # each request in flight holds a connection
FLAGS = {
    ("serve", "--concurrency"): ("int_list", lambda v: all(1 <= c <= 65_535 for c in v)),
    ("serve", "--max-tokens"): ints(1, 1_000_000),  # flags made from a study field carry its bound (MAX_COUNT)
    ("serve", "--slo-s"): floats(0, 86_400),
    ("serve", "--timeout-s"): floats(0, 86_400),  # 0 used to mean "no timeout": a hang
    ("serve", "--limit"): ints(1, 1_000_000),
    ("serve", "--waves"): floats(0, 1e6),
    ("lmeval", "--limit"): ints(1, 1_000_000),
    ("lmeval", "--concurrent"): ints(1, 1_000_000),
    ("lmeval-compare", "--margin"): floats(0),
    ("lmeval-compare", "--bootstrap-seed"): ints(0),
    ("lmeval-compare", "--min-pages"): ints(2),
    ("lmeval-compare", "--min-documents"): ints(2),
    ("lmeval-compare", "--worst-sample-damage"): floats(0),
    ("pages import", "--dpi"): floats(0),
    ("pages import", "--megapixels"): floats(0),
    ("pages import", "--calibration-fraction"): floats(0, 1, lo_open=False, hi_open=False),  # 1 = every page
    ("pages import", "--split-seed"): ints(0),
    ("pages import", "--max-pixels"): ints(1),
    ("pages import", "--max-pdf-pages"): ints(1),
    ("pages synth", "--n"): ints(2, 100_000),  # as a study's pages.synth.n
    ("pages synth", "--seed"): ints(0),
    ("pages synth", "--calibration-fraction"): floats(0, 1, lo_open=False, hi_open=False),  # 1: a calibration-only set
    ("pages synth", "--noise"): floats(0, 1, lo_open=False),
    ("pages synth", "--page-size"): ("page_size", lambda v: min(v) >= 64 and v[0] * v[1] <= 64_000_000),
    ("quantize", "--calibration-samples"): ints(1, 1_000_000),
    ("quantize", "--max-seq-len"): ints(64),
    ("quantize", "--devices"): ("int_list", lambda v: all(d >= 0 for d in v) and len(set(v)) == len(v)),
    ("score", "--concurrency"): CONC,
    ("demo", "--pages"): ints(2),
    ("demo", "--min-pages"): ints(2),
    ("sensitivity", "--calibration-samples"): ints(1, 1_000_000),
    ("sensitivity", "--max-new-tokens"): ints(1),
    ("sensitivity", "--max-seq-len"): ints(64),
    ("sensitivity", "--bandwidth"): floats(0),
    ("sensitivity", "--batch-pages"): ints(1),
    ("recommend", "--effective-bits"): floats(0, 16),
    ("recommend", "--speedup"): floats(1),
    ("recommend", "--speed-concurrency"): ints(1, 100_000),
    # the statistics rework owns these three and checks them at parse time
    ("compare", "--margin"): floats(0),
    ("compare", "--bootstrap-seed"): ints(0),
    ("compare", "--min-pages"): ints(2, 1_000_000),
    ("report", "--min-pages"): ints(2, 1_000_000),
    ("compare", "--resamples"): ints(1000, 1_000_000),
    ("compare", "--worst-page-damage"): floats(0),  # then above the margin, within the metric's range: compare
    ("compare", "--worst-document-damage"): floats(0),
    ("compare", "--baseline-floor"): floats(0, lo_open=False),  # then within the metric's range: compare
    ("compare", "--min-documents"): ints(2, 1_000_000),
    ("compare", "--expected-shift"): floats(0, lo_open=False),  # then below the margin: compare
    ("tune", "--effective-bits"): floats(0),
    ("tune", "--speedup"): floats(0),
    ("tune", "--speed-concurrency"): ints(1, 100_000),
    ("tune", "--max-trials"): ints(1, 100),
    ("speed-profile", "--concurrency"): ("int_list", lambda v: all(1 <= c <= 65_535 for c in v)),
    ("speed-profile", "--steps"): ints(1),
    ("speed-profile", "--delay"): ints(0),
    ("speed-profile", "--copy-gbs"): floats(0),
    ("init", "--calibration-fraction"): floats(0, 1, lo_open=False, hi_open=False),
    ("init", "--split-seed"): ints(0),
    ("pages synth", "--pages-per-document"): ints(1, 1_000_000),
    ("pages label-sample", "-n"): ints(1),
    ("pages label-sample", "--sample-seed"): ints(0),
    ("speed-profile", "--max-tokens"): ints(1),
    ("speed-profile", "--startup-timeout"): floats(0),
}
BACKEND_FLAGS = {  # serve and lmeval both take them
    "--tensor-parallel-size": ints(1),
    "--data-parallel-size": ints(1),
    "--max-model-len": ints(1),
    "--gpu-memory-utilization": floats(0, 1),
    "--startup-timeout-s": floats(0),
    "--threads": ints(1),  # transformers only: with --backend vllm a valid value is refused for the backend instead
}
for _verb in ("serve", "lmeval"):
    FLAGS.update({(_verb, f): rule for f, rule in BACKEND_FLAGS.items()})

# flags another branch validates; strict, so the merge that validates them makes this list shrink
PENDING: set[tuple[str, str]] = set()  # flags whose checks land on another branch (none now)
# verbs that do heavy work on valid values: for them a valid value is only parsed
PARSE_ONLY = {"pages synth", "demo"}


def numeric_actions() -> dict[tuple[str, str], object]:
    """(verb, flag) → argparse action, for every flag with a type that is not a path or text: a number."""
    from quantgate.commands._args import existing_path

    found = {}

    def walk(parser, verb):
        for act in parser._actions:
            if act.choices and isinstance(act.choices, dict):  # a subparsers action
                for name, sub in act.choices.items():
                    walk(sub, f"{verb} {name}".strip())
            elif act.type not in (None, str, Path, existing_path):
                # a flag by its name, not by a deprecated spelling it still accepts
                names = [o for o in act.option_strings if o not in getattr(act, "deprecated_aliases", ())]
                if act.option_strings and not names:
                    continue  # a hidden deprecated spelling: its rule is its current name's
                found[(verb, names[-1] if names else act.dest)] = act

    walk(cli.build_parser(), "")
    return found


def expected(kind: str, ok, s: str):
    """The value a flag given ``s`` must end up with, or INVALID."""
    try:
        if kind == "int":
            v = int(s)
        elif kind == "float":
            v = float(s)
            if not math.isfinite(v):
                return INVALID
        elif kind == "page_size":
            w, h = (int(x) for x in s.lower().split("x"))
            v = (w, h)
        else:
            v = [int(x) for x in s.split(",") if x.strip()]
            if not v:
                return INVALID
    except ValueError:
        return INVALID
    return v if ok(v) else INVALID


# --- running the real entry point in-process -------------------------------------------------------------


def run_main(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        try:
            rc = cli.main(argv)
        except SystemExit as e:
            rc = e.code
    return rc, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def places(tmp_path_factory):
    root = tmp_path_factory.mktemp("validation")
    (root / "empty").mkdir()
    return root


def base_argv(verb: str, flag: str, places: Path) -> list[str]:
    """Everything a verb needs besides the flag, pointing at inputs that do not hold what it needs:
    a valid number gets through parsing and the command then fails on the input, cheaply."""
    empty, out = str(places / "empty"), str(places / "out")
    argv = {
        "serve": ["serve", empty, "--pages", empty, "-o", out],
        "lmeval": ["lmeval", empty, "--page-task", empty, "-o", out + "-lm"],
        "lmeval-compare": ["lmeval-compare", empty, empty],
        "pages import": ["pages", "import", empty, "-o", out],
        "pages synth": ["pages", "synth", "-o", out],
        "pages label-sample": ["pages", "label-sample", empty] + ([] if flag == "-n" else ["-n", "1"]),
        "quantize": ["quantize", empty, "--recipe", "fp8-dynamic", "-o", out],
        "score": ["score", "--pages", empty, "--predictions", empty, "-o", out + "/s.jsonl"],
        "compare": ["compare", empty, empty, "--metric", "ned"],
        "report": ["report", out + "-report", "--pages", empty, "--predictions", empty, empty],
        "demo": ["demo", "-o", out],
        "sensitivity": ["sensitivity", empty, "--calibration", empty, "-o", out + "/sens.json"],
        "recommend": ["recommend", "--sensitivity", empty, "-o", out + "/r.yaml"] + (["--budget", "1MB"] if flag == "--speed-concurrency" else []),
        "speed-profile": ["speed-profile", empty, "--pages", empty, "-o", out],
        "init": ["init", "--model", empty, "--pages", empty, "-o", out + "-init/study.yaml"],
        "tune": ["tune", empty, "--sensitivity", empty, "-o", out] + (["--budget", "1MB"] if flag in ("--max-trials", "--speed-concurrency") else []),
    }[verb]
    if flag in BACKEND_FLAGS:
        argv += ["--backend", "vllm"]
    return argv


def check_flag(verb: str, flag: str, s: str, places: Path, action) -> None:
    kind, ok = FLAGS[(verb, flag)]
    want = expected(kind, ok, s)
    argv = base_argv(verb, flag, places) + [f"{flag}={s}"]
    if want is INVALID:
        rc, out, err = run_main(argv)
        assert rc == 64, (argv, rc, err)  # a bad flag value: a usage error
        assert out == "" and "Traceback" not in err
        assert len(err.splitlines()) == 1 and err.endswith("\n"), err
        assert err.startswith(f"quantgate {verb}: error: argument {flag}: "), err
        assert not (places / "out").exists()
        return
    parsed = cli.build_parser().parse_args(argv)
    assert getattr(parsed, action.dest) == want, (argv, getattr(parsed, action.dest), want)
    if verb in PARSE_ONLY:
        return
    rc, _, err = run_main(argv)
    assert rc in (64, 65) and len(err.splitlines()) == 1 and f"argument {flag}" not in err, (argv, err)


def number_text():
    """Strings a user (or a script with a bug) might pass where a number goes."""
    return st.one_of(
        st.integers(-(2**70), 2**70).map(str),
        st.integers(-3, 70).map(str),
        st.floats(allow_nan=True, allow_infinity=True).map(repr),
        st.floats(-2, 2).map(str),
        st.sampled_from(["nan", "NaN", "inf", "-inf", "+inf", "infinity", "-0", "-0.0", "0", "0.0", "1", "1e999",
                         "-1e999", "5e-324", "1e-320", "0x10", "1_000", " 3", "3 ", "", " ", "x", "1,2", "1,,8",
                         "64x64", "63x64", "0x0", "8000x8000", "8001x8000", "1e3", "1.5", "9" * 5000]),
        st.tuples(st.integers(-5, 9000), st.integers(-5, 9000)).map(lambda t: f"{t[0]}x{t[1]}"),
        st.lists(st.integers(-2, 70_000), min_size=1, max_size=4).map(lambda xs: ",".join(map(str, xs))),
        st.text(max_size=12),
    )


EDGES = ["0", "-1", "1", "2", "63", "64", "nan", "inf", "-inf", "-0", "-0.0", "1e999", "0.0", "1.0", "0.5",
         "0.999", "86400", "86400.5", "1000000", "1000000.1", "65535", "65536", "999", "1000", "abc", "",
         "1,0", "1,8,32", "64x64", "64x63", "8000x8000", str(2**70), "9" * 5000]


# --- the tests ---------------------------------------------------------------------------------------------


def test_every_numeric_flag_has_a_rule():
    """Every flag that takes a number is checked by a number type (no bare int/float) and has a rule here."""
    found = numeric_actions()
    bare = [k for k, a in found.items() if a.type in (int, float) and k not in PENDING]
    assert not bare, f"numeric flags with no check: {bare}"
    assert set(found) == set(FLAGS), (set(found) ^ set(FLAGS))


def _params():
    return [pytest.param(v, f, id=f"{v}{f}", marks=pytest.mark.xfail(strict=True, reason="statistics branch"))
            if (v, f) in PENDING else pytest.param(v, f, id=f"{v}{f}") for v, f in FLAGS]


@pytest.mark.parametrize(("verb", "flag"), _params())
def test_numeric_flag_edges(verb, flag, places):
    action = numeric_actions()[(verb, flag)]
    for s in EDGES:
        check_flag(verb, flag, s, places, action)


@pytest.mark.parametrize(("verb", "flag"), _params())
def test_numeric_flag_property(verb, flag, places):
    action = numeric_actions()[(verb, flag)]

    @settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(number_text())
    def prop(s):
        check_flag(verb, flag, s, places, action)

    prop()


def test_numeric_flags_through_the_real_cli(tmp_path):
    """The installed entry point (a fresh interpreter): the values the issue found accepted — `serve --timeout 0`
    would wait forever on a server that never answers — each refused with one line, nothing written."""
    out = tmp_path / "run"
    for flag, value in [("--timeout-s", "0"), ("--timeout-s", "-1"), ("--limit", "-1"), ("--limit", "0"),
                        ("--max-tokens", "-5"), ("--max-tokens", "0"), ("--slo-s", "nan")]:
        r = subprocess.run([sys.executable, "-m", "quantgate", "serve", "stub", "--pages", str(tmp_path), "-o",
                            str(out), "--backend", "openai", "--endpoint", "http://127.0.0.1:9/v1", f"{flag}={value}"],
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 64 and r.stdout == "", (flag, value, r.stderr)
        assert r.stderr.count("\n") == 1 and f"argument {flag}: '{value}'" in r.stderr, r.stderr
        assert not out.exists()


def test_small_edge_values_run(tmp_path):
    """The smallest and largest values the rules accept are usable, not only parseable: a page set at the
    edges of every `pages synth` number is written and loads."""
    from quantgate.io.pageset import load_pageset

    for i, extra in enumerate([["--n", "2", "--noise", "0", "--calibration-fraction", "0", "--seed", str(2**70)],
                               ["--n", "2", "--noise", "1", "--calibration-fraction", "0.999", "--page-size", "64x64"]]):
        out = tmp_path / f"p{i}"
        rc, _, err = run_main(["pages", "synth", "-o", str(out), "--profile", "simple", *extra])
        assert rc == 0, err
        ps = load_pageset(out)
        assert len(ps.pages) == int(extra[1])
        if "--page-size" in extra:
            assert {(p.width, p.height) for p in ps.pages} == {(64, 64)}


# --- study YAML ---------------------------------------------------------------------------------------------

STUDY = {"name": "v", "model": "no-such-model", "pages": {"path": "no-such-pages"}, "metrics": ["ned"],
         "variants": [{"name": "bf16", "recipe": "bf16"}, {"name": "fp8", "recipe": "fp8-dynamic"}]}

# field path → (kind, rule, None allowed, how to place the value in the study)
STUDY_FIELDS = {
    "pages.synth.n": (*ints(2, 100_000), False),  # 1e9 pages filled a disk before it was refused
    "pages.synth.seed": (*ints(0), False),
    "pages.synth.calibration_fraction": (*floats(0, 1, lo_open=False, hi_open=True), False),
    "pages.synth.noise": (*floats(0, 1, lo_open=False), False),
    "limit": (*ints(1, 1_000_000), True),
    "calibration_samples": (*ints(1, 1_000_000), False),
    "concurrency.0": (*CONC, False),
    "noise_concurrency": (*CONC, True),
    "max_tokens": (*ints(1, 1_000_000), False),
    "timeout_s": (*floats(0, 86_400), False),
    "slo_s": (*floats(0, 86_400), False),
    "margins.ned": (*floats(0, 1, hi_open=True), False),  # below ned's range (1): such a margin passes everything
    "bootstrap_seed": (*ints(0), False),
    "resamples": (*ints(1000, 1_000_000), False),  # a 5% tail needs ~1,000 resamples
    "min_pages": (*ints(2, 1_000_000), False),
    # above ned's default margin 0.01, at most its range 1; the floor within [0, 1]; below the margin
    "worst_page_damage.ned": (*floats(0.01, 1), False),
    "worst_document_damage.ned": (*floats(0.01, 1), False),
    "baseline_floor.ned": (*floats(0, 1, lo_open=False), False),
    "expected_shift.ned": (*floats(0, 0.01, lo_open=False, hi_open=True), False),
    "min_documents": (*ints(2, 1_000_000), False),
    "schema_version": ("int", lambda v: v == 1, False),
    "lm_eval.limit": (*ints(1, 1_000_000), True),
    "lm_eval.concurrent": (*ints(1, 1_000_000), False),
    "lm_eval.margin": (*floats(0), False),
    "lm_eval.margins.acc": (*floats(0), False),
    "backend.vllm.tensor_parallel_size": (*ints(1), False),
    "backend.vllm.data_parallel_size": (*ints(1), False),
    "backend.vllm.max_model_len": (*ints(1), True),
    "backend.vllm.gpu_memory_utilization": (*floats(0, 1), True),
    "backend.vllm.startup_timeout_s": (*floats(0), False),
    "backend.external.startup_timeout_s": (*floats(0), False),
}


def study_with(field: str, value) -> dict:
    st_ = yaml.safe_load(yaml.safe_dump(STUDY))
    head, *rest = field.split(".")
    if head == "pages":
        st_["pages"] = {"synth": {"n": 4, rest[1]: value}}
    elif head == "backend":
        st_["backend"] = {"name": rest[0], rest[1]: value}
        if rest[0] == "external":
            st_["backend"]["start_command"] = "server --port {port}"
    elif head == "lm_eval":
        st_["lm_eval"] = {"page_task": True, **({rest[0]: value} if len(rest) == 1 else {rest[0]: {rest[1]: value}})}
    elif head == "concurrency":
        st_["concurrency"] = [value]
    elif head in ("margins", "worst_page_damage", "worst_document_damage", "baseline_floor", "expected_shift"):
        st_[head] = {rest[0]: value}
    else:
        st_[head] = value
    return st_


def yaml_expected(kind: str, ok, nullable: bool, v, strict: bool = True) -> bool:
    """Whether a study whose field holds ``v`` (as YAML loaded it) must load. ``strict``: the study's own fields
    take a count only as an integer (1e30 or 3.0 where a count is meant is refused, not coerced); the backends'
    option models still take 3.0 as 3."""
    if v is None:
        return nullable
    if isinstance(v, (bool, str)):  # strategies give only digit-free text; yes/no/true/false are not numbers
        return False
    if kind == "int":
        if isinstance(v, float) and strict:
            return False
        if isinstance(v, float):  # pydantic takes 3.0 as 3, within 64 bits
            if not (math.isfinite(v) and v.is_integer() and abs(v) < 2**63):
                return False
            v = int(v)
        return ok(v)
    try:
        v = float(v)
    except OverflowError:
        return False
    return math.isfinite(v) and ok(v)


def yaml_values():
    return st.one_of(st.integers(-(2**70), 2**70), st.integers(-3, 70), st.floats(allow_nan=True, allow_infinity=True),
                     st.floats(-2, 2), st.sampled_from([0, 1, 2, 63, 64, 65535, 65536, 86400, 86400.5, -0.0, 0.0, 1.0,
                                                       0.5, 10**400, 1e308, True, False, None, "", "yes", "nan"]),
                     st.booleans(), st.none(), st.text(max_size=8).filter(lambda s: not any(c.isdigit() for c in s)))


def check_study_field(field: str, value, root: Path) -> None:
    from quantgate.study.spec import load_study

    kind, ok, nullable = STUDY_FIELDS[field]
    path = root / "study.yaml"
    path.write_text(yaml.safe_dump(study_with(field, value)))
    as_loaded = yaml.safe_load(yaml.safe_dump({"v": value}))["v"]  # the value as the study's YAML gives it
    out = root / "out"
    if yaml_expected(kind, ok, nullable, as_loaded, strict=not field.startswith("backend.")):
        load_study(path)
        return
    with pytest.raises(InputError):
        load_study(path)
    rc, stdout, err = run_main(["study", str(path), "-o", str(out)])
    assert rc == 65 and stdout == "" and len(err.splitlines()) == 1, (field, value, err)
    assert err.startswith(f"quantgate study: error: {path}: field '{field}'"), (field, value, err)
    assert not out.exists()


@pytest.mark.parametrize("field", list(STUDY_FIELDS))
def test_study_numbers_property(field, tmp_path_factory):
    root = tmp_path_factory.mktemp("study")

    @settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(yaml_values())
    def prop(v):
        check_study_field(field, v, root)

    prop()


def test_bad_study_numbers_fail_before_any_work(tmp_path):
    """`resamples: 0`, `margins: {ned: .nan}`, `seed: -3` (and friends) used to surface only after every
    variant was served; now the study stops when its YAML is read: one line naming the field, exit 2, its
    output folder never created — no page synthesized, no weight written, no server started."""
    cases = {"resamples: 0": "resamples", "margins: {ned: .nan}": "margins.ned", "bootstrap_seed: -3": "bootstrap_seed",
             "margins: {ned: .inf}": "margins.ned", "timeout_s: 0": "timeout_s", "concurrency: [1, 0]": "concurrency.1",
             "lm_eval: {margin: -1}": "lm_eval.margin", "backend: {name: vllm, gpu_memory_utilization: .nan}":
             "backend.vllm.gpu_memory_utilization", "calibration_samples: 0": "calibration_samples",
             "schema_version: 2": "schema_version"}
    base = ("name: s\nmodel: {model}\npages: {{synth: {{n: 4, profile: simple}}}}\nmetrics: [ned]\n"
            "variants: [{{name: bf16, recipe: bf16}}, {{name: fp8, recipe: fp8-dynamic}}]\n")
    model = REPO / "quantgate" / "assets" / "reader"
    for i, (line, field) in enumerate(cases.items()):
        path, out = tmp_path / f"s{i}.yaml", tmp_path / f"out{i}"
        path.write_text(base.format(model=model) + line + "\n")
        rc, _, err = run_main(["study", str(path), "-o", str(out)])
        assert rc == 65 and len(err.splitlines()) == 1, (line, err)
        assert f"field '{field}'" in err, (line, err)
        assert not out.exists(), line
    r = subprocess.run([sys.executable, "-m", "quantgate", "study", str(tmp_path / "s0.yaml"), "-o", str(tmp_path / "o")],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 65 and r.stderr.count("\n") == 1 and "Traceback" not in r.stderr
    assert "field 'resamples'" in r.stderr and not (tmp_path / "o").exists()


def test_demo_pages_below_the_verdict_minimum_warn(capsys, tmp_path):
    """`demo --pages` below what gives the verdict's minimum of held-out pages warns (one line, naming the
    number that suffices) instead of running for minutes in silence; the default does not warn."""
    from quantgate.commands.study import demo_min_pages
    from quantgate.heldout.synth import synth_pages
    from quantgate.io.pageset import load_pageset
    from quantgate.study.demo import demo_study

    least, need = demo_min_pages()
    sy = demo_study(least, ["bf16"])["pages"]["synth"]
    out = tmp_path / "p"
    synth_pages(out, least, seed=sy["seed"], calibration_fraction=sy["calibration_fraction"], profile="simple")
    held = [p.split == "heldout" for p in load_pageset(out).pages]  # the split the demo's pages really get
    assert sum(held) == need and held[-1]  # `least` is the first count that reaches the minimum
    from quantgate.commands.study import demo_pages_warning

    err = demo_pages_warning(least - 1, None)
    assert len(err.splitlines()) == 1 and err.startswith("warning: ") and f"--pages {least} or more" in err
    assert demo_pages_warning(least - 1, 4) is None  # --min-pages: the small demo is deliberate
    for n in (least, 40):
        assert demo_pages_warning(n, None) is None
