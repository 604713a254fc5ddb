"""`quantgate tune` — what follows a trial (promotion, more pages, stop), the
loop's records and resume, refusal of another model's sensitivity file, the report's trials table
and heat map. The study step is replaced by a stand-in that judges a recipe by a stated rule (no
model is served); the real loop on the bundled reader is benchmarks/tune_reader.py."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from quantgate.errors import InputError
from quantgate.io.fingerprint import weights_fingerprint
from quantgate.schema.sensitivity import Group, Measurement, Reference, SensitivityFile, Sizes
from quantgate.schema.tune import Measured, TrialStudy
from quantgate.sensitivity.recommend import recommend
from quantgate.tune import policy
from quantgate.tune.loop import TRIALS, TUNE_JSON, Tuner, load_trials
from tests.support.paths import REPO

ROOT = REPO
FORMATS = ["fp8", "w4a16", "w2a16"]
NBYTES = {"bf16": 1000, "fp8": 500, "w4a16": 270, "w2a16": 140}
FIXED = 100


def fake_sens(kl: list[dict[str, float]], model_sha: str = "0" * 64) -> SensitivityFile:
    """Decoder MLP groups ``layers.i.mlp`` with the bytes above and the given KL per format."""
    groups, meas, modules = [], [], []
    for i, k in enumerate(kl):
        name, mod = f"layers.{i}.mlp", f"m.layers.{i}.mlp.up_proj"
        groups.append(Group(name=name, kind="mlp", layer=i, modules=[mod], selector={"kinds": ["mlp"], "layers": str(i)},
                            params=500, bf16_bytes=NBYTES["bf16"], decode=True))
        modules.append({"name": mod, "kind": "mlp", "layer": i, "in_features": 256, "out_features": 256})
        meas += [Measurement(group=name, format=f, kl_mean=k[f], kl_pages=[k[f]], top1_agreement=1.0, tokens=10,
                             bytes=NBYTES[f], quantized=[mod], wall_s=0.0) for f in FORMATS]
    return SensitivityFile(
        model="m", model_weights_sha256=model_sha, pageset="p", pageset_sha256="0" * 64, page_ids=["a"], prompt="p",
        max_new_tokens=8, max_seq_len=4096, formats=FORMATS, allow_vision=False, keep_bf16=[], bandwidth_gbps=4800.0,
        bandwidth_source="test", n_layers=len(kl), modules=modules, groups=groups,
        sizes=Sizes(bf16_bytes=FIXED + NBYTES["bf16"] * len(kl), fixed_bytes=FIXED, fixed_decode_bytes=FIXED),
        reference=Reference(tokens=10, rounds=1, pages_generated=0, answers=[[1]]), measurements=meas, timings={},
        versions={}, created_utc="now")


# layer 0 is the one the KL says is fragile at INT2; layer 2 looks harmless
KL = [{"fp8": 1e-7, "w4a16": 1e-6, "w2a16": 1e-2}, {"fp8": 1e-7, "w4a16": 1e-6, "w2a16": 1e-4},
      {"fp8": 1e-7, "w4a16": 1e-6, "w2a16": 1e-5}]


def ned(verdict: str, delta: float, hi: float, *, reason: str = "ci_beyond_margin", need: int | None = None,
        n: int = 30) -> Measured:
    return Measured(source="pages", metric="ned", verdict=verdict, reason=reason, higher_is_better=False, n=n,
                    delta=delta, ci_low=delta - (hi - delta), ci_high=hi, margin=0.01, pages_needed=need)


# --- what follows a trial (pure) ---------------------------------------------------------------------

def test_a_large_measured_miss_promotes_groups_by_kl_until_the_target_and_the_solver_moves_them():
    sens = fake_sens(KL)
    assignment = {"layers.0.mlp": "w2a16", "layers.1.mlp": "w2a16", "layers.2.mlp": "w2a16"}
    # ned 0.15 worse, worst end 0.18 = 18 margins: aim the summed KL at 0.5/18 of 1.011e-2 = 2.8e-4
    a = policy.next_action(sens, assignment, [ned("regression", 0.15, 0.18)], formats=FORMATS, exclude={}, limit=None,
                           available=36)
    assert a.kind == "promote"
    assert a.target_kl == pytest.approx(1.011e-2 * 0.5 / 18)
    # layer 0 alone brings 1.011e-2 to 1.11e-4, under the target: one group, its INT2 ruled out
    assert a.promote == {"layers.0.mlp": ["w2a16"]}
    assert "18.00× the margin" in a.text and "layers.0.mlp (w2a16 → at least w4a16" in a.text
    rec = recommend(sens, budget_bytes=FIXED + 270 + 140 + 140, exclude=a.promote)
    assert rec.assignment["layers.0.mlp"] != "w2a16"


def test_the_measured_change_sets_how_many_groups_are_promoted():
    sens = fake_sens(KL)
    assignment = {"layers.0.mlp": "w4a16", "layers.1.mlp": "w2a16", "layers.2.mlp": "w2a16"}  # KL 1.11e-4
    small = policy.next_action(sens, assignment, [ned("regression", 0.011, 0.012)], formats=FORMATS, exclude={},
                               limit=None, available=36)
    # 1.2 margins: target 1.11e-4 × 0.5/1.2 = 4.6e-5; promoting layer 1 (1e-4 → 1e-6) reaches 1.2e-5
    assert small.promote == {"layers.1.mlp": ["w2a16"]}
    big = policy.next_action(sens, assignment, [ned("regression", 0.3, 0.4)], formats=FORMATS, exclude={},
                             limit=None, available=36)
    # 40 margins: target 1.4e-6; layer 1, then layer 2 (1e-5 → 1e-6) and still above, then layer 0 (w4a16 → fp8)
    assert big.promote == {"layers.1.mlp": ["w2a16"], "layers.2.mlp": ["w2a16"], "layers.0.mlp": ["w2a16", "w4a16"]}
    # formats already ruled out are not listed again, and the next one up skips them
    again = policy.next_action(sens, assignment, [ned("regression", 0.011, 0.012)], formats=FORMATS,
                               exclude={"layers.1.mlp": ["w4a16"]}, limit=None, available=36)
    assert again.promote == {"layers.1.mlp": ["w2a16"]} and "at least fp8" in again.text


def test_inconclusive_asks_for_more_pages_only_when_the_split_has_them():
    sens = fake_sens(KL)
    assignment = {"layers.0.mlp": "w4a16", "layers.1.mlp": "w2a16", "layers.2.mlp": "w2a16"}
    v = [ned("inconclusive", 0.004, 0.013, reason="ci_straddles_margin", need=52)]
    a = policy.next_action(sens, assignment, v, formats=FORMATS, exclude={}, limit=30, available=60)
    assert (a.kind, a.limit) == ("tighten", 52) and "52 pages" in a.text
    b = policy.next_action(sens, assignment, v, formats=FORMATS, exclude={}, limit=None, available=36)
    assert b.kind == "promote" and "≈52 pages would decide it" in b.text and "the split has 36" in b.text
    # a regression beside it: more pages would not rescue the recipe
    c = policy.next_action(sens, assignment, v + [ned("regression", 0.05, 0.07)], formats=FORMATS, exclude={},
                           limit=30, available=60)
    assert c.kind == "promote"
    within = [ned("within_noise", 0.0, 0.004, reason="ci_inside_margin")]
    assert policy.next_action(sens, assignment, within, formats=FORMATS, exclude={}, limit=30,
                              available=60).kind == "done"
    assert policy.outcome(v) == "inconclusive" and policy.outcome(within) == "within_noise"
    assert policy.outcome(v + [ned("regression", 0.05, 0.07)]) == "regression" and policy.outcome([]) == "inconclusive"


def test_a_recipe_that_quantizes_nothing_stops_the_loop():
    sens = fake_sens(KL)
    a = policy.promote(sens, dict.fromkeys(["layers.0.mlp", "layers.1.mlp", "layers.2.mlp"], "bf16"), FORMATS, {},
                       [ned("inconclusive", 0.0, 0.02, reason="noise_exceeds_margin")])
    assert a.kind == "stop"


# --- the loop, with a stand-in for the study ---------------------------------------------------------

def trial_study(verdicts: list[dict], variants: list[dict]) -> TrialStudy:
    """What the study step returns, from a stand-in's page verdicts (variant, then the fields the tune reads)."""
    measured: dict[str, list[Measured]] = {}
    for v in verdicts:
        measured.setdefault(v["variant"], []).append(Measured(source="pages", **{k: x for k, x in v.items() if k != "variant"}))
    return TrialStudy(measured=measured, weights_bytes={v["name"]: v["weights_bytes"] for v in variants})


class FakeStudy:
    """Judges each variant's recipe by a stated rule: INT2 on layer 2 regresses (the KL said it was
    the most harmless), anything else is within noise. ``kill_at`` raises as a kill would."""

    def __init__(self, kill_at: int | None = None):
        self.calls: list[str] = []
        self.kill_at = kill_at

    def __call__(self, study_file: Path, out: Path, log) -> TrialStudy:
        spec = yaml.safe_load(Path(study_file).read_text())
        assert spec["output"] == str(out.resolve()) and Path(spec["model"]).is_absolute()
        trial = spec["variants"][-1]["name"]
        self.calls.append(trial)
        if self.kill_at and trial.endswith(f"-t{self.kill_at}"):
            raise KeyboardInterrupt
        verdicts, variants = [], []
        for v in spec["variants"][1:]:
            rules = yaml.safe_load(Path(v["recipe"]).read_text())["rules"] if v["recipe"] != "bf16" else []
            bad = any(r.get("layers") == "2" and r["format"] == "w2a16" for r in rules)
            d, hi = (0.02, 0.03) if bad else (0.0, 0.0)
            verdicts.append({"variant": v["name"], "metric": "ned", "verdict": "regression" if bad else "within_noise",
                             "reason": "ci_beyond_margin" if bad else "identical_outputs", "higher_is_better": False,
                             "n": 30, "baseline_mean": 0.0, "candidate_mean": d, "delta": d, "ci_low": d - 0.01,
                             "ci_high": hi, "margin": 0.01, "pages_needed": None, "pages_changed": 3 if bad else 0})
            variants.append({"name": v["name"], "weights_bytes": 123})
        return trial_study(verdicts, variants)


@pytest.fixture
def setup(tmp_path):
    model = tmp_path / "model"
    model.mkdir()
    (model / "model.safetensors").write_bytes(b"weights")
    sens_path = tmp_path / "sens.json"
    sens_path.write_text(fake_sens(KL, weights_fingerprint(model)).model_dump_json())
    study = tmp_path / "study.yaml"
    study.write_text(yaml.safe_dump({"name": "t", "model": "model", "pages": {"path": "pages"},
                                     "variants": [{"name": "bf16", "recipe": "bf16"}], "metrics": ["ned"],
                                     "margins": {"ned": 0.01}}))
    return tmp_path, study, sens_path


BUDGET = FIXED + 270 + 270 + 140  # two groups above INT2


def test_loop_promotes_the_group_that_hurt_and_ends_at_a_recipe_within_noise(setup):
    tmp, study, sens = setup
    fake = FakeStudy()
    tf = Tuner(study, sens, budget_bytes=BUDGET, max_trials=4, out=tmp / "out", run_study=fake, log=lambda s: None).run()
    name = "tune-780B"
    assert tf.name == name and fake.calls == [f"{name}-t1", f"{name}-t2"]
    t1, t2 = tf.trials
    # trial 1: the KL-optimal recipe puts INT2 on layer 2 (KL 1e-5), which the pages say regresses
    assert t1.assignment == {"layers.0.mlp": "w4a16", "layers.1.mlp": "w4a16", "layers.2.mlp": "w2a16"}
    assert t1.outcome == "regression" and t1.action.kind == "promote"
    # 3 margins at worst ask for more than layer 2, but promoting layer 0 or 1 too leaves no recipe under the budget
    assert t1.action.promote == {"layers.2.mlp": ["w2a16"]} and "would be left promoting layers.0.mlp, layers.1.mlp" \
        in t1.action.text
    # trial 2: layer 2 off INT2, the budget met by moving layer 1 down instead
    assert t2.exclude == {"layers.2.mlp": ["w2a16"]}
    assert t2.assignment == {"layers.0.mlp": "w4a16", "layers.1.mlp": "w2a16", "layers.2.mlp": "w4a16"}
    assert t2.outcome == "within_noise" and t2.action.kind == "done"
    assert (tf.status, tf.chosen) == ("found", 2) and t2.bytes <= BUDGET and t2.weights_bytes == 123
    assert t1.predicted_kl == pytest.approx(1e-6 + 1e-6 + 1e-5) and t2.predicted_kl == pytest.approx(1e-4 + 2e-6)
    # every trial on disk: the recipe and the study it ran, the recipe's sha256, one line per trial
    out = tmp / "out"
    from quantgate.io.fileio import sha256_file

    for t in tf.trials:
        assert sha256_file(out / t.recipe) == t.recipe_sha256 and (out / t.study).is_file()
        assert "format: w2a16" in (out / t.recipe).read_text()
    assert [t.trial for t in load_trials(out / "tune" / name)] == [1, 2]
    assert json.loads((out / "tune" / name / TUNE_JSON).read_text())["status"] == "found"
    # the trial's study is the user's (paths made absolute) with the trial added; it runs as it is
    spec = yaml.safe_load((out / t2.study).read_text())
    assert [v["name"] for v in spec["variants"]] == ["bf16", f"{name}-t1", f"{name}-t2"]
    assert spec["model"] == str((tmp / "model").resolve()) and spec["pages"]["path"] == str((tmp / "pages").resolve())


def test_a_killed_tune_resumes_at_the_trial_it_was_in(setup):
    tmp, study, sens = setup
    whole = Tuner(study, sens, budget_bytes=BUDGET, out=tmp / "whole", run_study=FakeStudy(), log=lambda s: None).run()
    killed = FakeStudy(kill_at=2)
    with pytest.raises(KeyboardInterrupt):
        Tuner(study, sens, budget_bytes=BUDGET, out=tmp / "out", run_study=killed, log=lambda s: None).run()
    tdir = tmp / "out" / "tune" / whole.name
    state = json.loads((tdir / TUNE_JSON).read_text())
    assert (state["status"], state["current_trial"], len(state["trials"])) == ("running", 2, 1)
    first = (tdir / TRIALS).read_text()
    # `quantgate sensitivity` rerun on the finished file rewrites its timings: the same tune still
    recorded = json.loads(sens.read_text())
    sens.write_text(json.dumps({**recorded, "timings": {"total_s": 1.0}, "created_utc": "later"}))
    again = FakeStudy()
    tf = Tuner(study, sens, budget_bytes=BUDGET, out=tmp / "out", run_study=again, log=lambda s: None).run()
    assert again.calls == [f"{whole.name}-t2"]  # trial 1 is not run again
    assert (tdir / TRIALS).read_text().startswith(first)
    strip = {"wall_s", "finished_utc"}
    assert [t.model_dump(exclude=strip) for t in tf.trials] == [t.model_dump(exclude=strip) for t in whole.trials]
    # a finished tune rerun does nothing but report; a larger --max-trials would continue an unfinished one
    done = FakeStudy()
    assert Tuner(study, sens, budget_bytes=BUDGET, out=tmp / "out", run_study=done, log=lambda s: None).run().chosen == 2
    assert done.calls == []


def test_max_trials_and_an_exhausted_budget_end_without_a_recipe(setup):
    tmp, study, sens = setup
    fake = FakeStudy()
    tf = Tuner(study, sens, budget_bytes=BUDGET, max_trials=1, out=tmp / "a", run_study=fake, log=lambda s: None).run()
    assert (tf.status, tf.chosen, len(tf.trials)) == ("not_found", None, 1) and "--max-trials 1" in tf.message
    # the same tune with a larger --max-trials continues at trial 2
    more = FakeStudy()
    tf = Tuner(study, sens, budget_bytes=BUDGET, max_trials=3, out=tmp / "a", run_study=more, log=lambda s: None).run()
    assert more.calls == [f"{tf.name}-t2"] and tf.status == "found"
    # at the smallest budget every group is INT2: no promotion leaves a recipe under it
    tight = Tuner(study, sens, budget_bytes=FIXED + 3 * 140, out=tmp / "b", run_study=FakeStudy(),
                  log=lambda s: None).run()
    assert tight.status == "not_found" and len(tight.trials) == 1 and tight.trials[0].action.kind == "stop"
    assert "no promotion fits the budget" in tight.message


def test_another_models_sensitivity_file_and_changed_inputs_are_refused(setup, tmp_path):
    tmp, study, sens = setup
    other = tmp / "other.json"
    other.write_text(fake_sens(KL, "f" * 64).model_dump_json())
    with pytest.raises(InputError, match="measured on other weights"):
        Tuner(study, other, budget_bytes=BUDGET, out=tmp / "out", run_study=FakeStudy())
    r = subprocess.run([sys.executable, "-m", "quantgate", "tune", str(study), "--sensitivity", str(other),
                        "--budget", str(BUDGET), "-o", str(tmp / "out")], capture_output=True, text=True,
                       cwd=ROOT, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert r.returncode == 65 and "Traceback" not in r.stderr and r.stderr.count("\n") == 1
    assert "measured on other weights" in r.stderr and not (tmp / "out").exists()
    # a budget the formats cannot meet: refused before any trial
    with pytest.raises(InputError, match="below the smallest recipe"):
        Tuner(study, sens, budget_bytes=FIXED + 3 * 140 - 1, out=tmp / "out", run_study=FakeStudy())
    # the same tune name with another budget: refused, the recorded trials kept
    Tuner(study, sens, budget_bytes=BUDGET, max_trials=1, out=tmp / "out", name="x", run_study=FakeStudy(),
          log=lambda s: None).run()
    before = (tmp / "out" / "tune" / "x" / TRIALS).read_text()
    with pytest.raises(InputError, match=r"other inputs \(limit\)"):
        Tuner(study, sens, budget_bytes=BUDGET + 130, out=tmp / "out", name="x", run_study=FakeStudy()).run()
    assert (tmp / "out" / "tune" / "x" / TRIALS).read_text() == before


# --- the report --------------------------------------------------------------------------------------

def test_report_md_has_the_trials_table_and_html_the_heat_map_and_damage_plot(setup):
    from quantgate.tune.report import html_sections, markdown_lines

    tmp, study, sens = setup
    out = tmp / "out"
    assert markdown_lines(out) == [] and html_sections(out) == []
    tf = Tuner(study, sens, budget_bytes=BUDGET, out=out, run_study=FakeStudy(), log=lambda s: None).run()
    md = "\n".join(markdown_lines(out))
    assert f"## Tune: {tf.name}" in md and ": found — trial 2" in md
    rows = [line for line in md.splitlines() if line.startswith("| 1 ") or line.startswith("| 2 ✓")]
    assert len(rows) == 2
    assert "ned +0.0200 [+0.0100, +0.0300]" in rows[0] and "ned REGRESSION (ci_beyond_margin)" in rows[0]
    assert "promote: " in rows[0] and "ned within noise (identical_outputs)" in rows[1]
    assert "| 3 / 30 |" in rows[0] and "| 0 / 30 |" in rows[1]  # pages whose output changed
    assert f"{tf.trials[1].recipe} ({tf.trials[1].recipe_sha256[:12]})" in rows[1] and "1.02e-04" in rows[1]
    html = "".join(str(b) for b in html_sections(out))
    assert html.count("<svg") == 2 and "Sensitivity: KL of each group" in html
    assert "Predicted against measured damage" in html and "trial 2&#39;s recipe (chosen) boxed" in html
    assert "<td>2 ✓</td>" in html and "<tr class='regression'>" in html


def test_the_study_report_carries_the_tune_section(setup):
    from quantgate.reports import load_summary, write_reports
    from tests.support.study_folder import finished_study

    tmp, study, sens = setup
    out = finished_study(tmp / "out")  # a finished study folder with its reports, no model
    assert "Tune:" not in (out / "report.md").read_text()
    svgs = (out / "report.html").read_text().count("<svg")
    Tuner(study, sens, budget_bytes=BUDGET, out=out, run_study=FakeStudy(), log=lambda s: None).run()
    write_reports(load_summary(out), out)  # as `quantgate report` or the next study run does
    md = (out / "report.md").read_text()
    assert md.index("## Tune: tune-780B") < md.index("<sub>") and "| 2 ✓ | tune-780B-t2 |" in md
    page = (out / "report.html").read_text()
    assert page.index("<h2>Tune: tune-780B</h2>") < page.index("<h2>Provenance</h2>")
    assert page.count("<svg") == svgs + 2  # the heat map and predicted against measured damage


def test_when_the_damaging_groups_cannot_move_the_loop_stops_instead_of_promoting_trivia():
    sens = fake_sens(KL)
    assignment = {"layers.0.mlp": "w2a16", "layers.1.mlp": "w4a16", "layers.2.mlp": "w4a16"}  # KL 1.0002e-2
    # layer 0 cannot leave INT2 under the budget; layers 1 and 2 can (w4a16 → fp8), but that cuts 1.8e-6 of ~1e-2
    feasible = lambda ex: "layers.0.mlp" not in ex  # noqa: E731
    a = policy.promote(sens, assignment, FORMATS, {}, [ned("regression", 0.05, 0.08)], feasible)
    assert a.kind == "stop" and "no promotion under this budget addresses the damage" in a.text
    assert "would be left promoting layers.0.mlp;" in a.text
    # the same miss where layer 0 can move: promoted
    assert policy.promote(sens, assignment, FORMATS, {}, [ned("regression", 0.05, 0.08)],
                          lambda ex: True).promote == {"layers.0.mlp": ["w2a16"]}


def test_promotion_skips_a_larger_format_that_hurts_more():
    # a group where nvfp4 is larger than w4a16 but (as on some reader groups) worse: w4a16 → fp8, nvfp4 forbidden
    kl = [{"fp8": 1e-7, "w4a16": 1e-6, "w2a16": 1e-3}]
    sens = fake_sens(kl)
    sens.formats.append("nvfp4")
    sens.measurements.append(sens.measurements[0].model_copy(update={"format": "nvfp4", "kl_mean": 5e-6, "bytes": 330}))
    fmts = ["fp8", "nvfp4", "w4a16", "w2a16"]
    assert policy.one_up(sens, "layers.0.mlp", "w4a16", fmts, {}) == "fp8"
    a = policy.promote(sens, {"layers.0.mlp": "w4a16"}, fmts, {}, [ned("regression", 0.02, 0.03)])
    assert a.promote == {"layers.0.mlp": ["nvfp4", "w2a16", "w4a16"]} and "w4a16 → at least fp8" in a.text


class UndecidedStudy(FakeStudy):
    """Every recipe changes a page or two: inconclusive on 30 pages (the verdict asks for 40), within noise
    on 40."""

    def __call__(self, study_file: Path, out: Path, log) -> TrialStudy:
        spec = yaml.safe_load(Path(study_file).read_text())
        self.calls.append((spec["variants"][-1]["name"], spec["limit"]))
        rows = []
        for v in spec["variants"][1:]:
            enough = (spec["limit"] or 0) >= 40
            rows.append({"variant": v["name"], "metric": "ned", "verdict": "within_noise" if enough else "inconclusive",
                         "reason": "ci_inside_margin" if enough else "ci_straddles_margin", "higher_is_better": False,
                         "n": spec["limit"], "delta": 0.003, "ci_low": -0.001, "ci_high": 0.008 if enough else 0.012,
                         "margin": 0.01, "pages_needed": None if enough else 40, "pages_changed": 2})
        return trial_study(rows, [{"name": v["name"], "weights_bytes": 1} for v in spec["variants"]])


def test_an_undecided_verdict_is_tightened_with_more_pages_when_the_split_has_them(setup, monkeypatch):
    tmp, study, sens = setup
    spec = yaml.safe_load(study.read_text())
    study.write_text(yaml.safe_dump({**spec, "limit": 30}))
    monkeypatch.setattr(Tuner, "_available", lambda self: 60)  # held-out pages in the study's split
    fake = UndecidedStudy()
    tf = Tuner(study, sens, budget_bytes=BUDGET, out=tmp / "out", run_study=fake, log=lambda s: None).run()
    t1, t2 = tf.trials
    assert (t1.action.kind, t1.action.limit) == ("tighten", 40)
    # the same recipe and variant, served on 40 pages: nothing rebuilt, no second variant
    assert fake.calls == [(t1.variant, 30), (t1.variant, 40)] and t2.variant == t1.variant and t2.recipe == t1.recipe
    assert t2.assignment == t1.assignment and t2.limit == 40 and (tf.status, tf.chosen) == ("found", 2)
    # a split without the pages: the tune says how many would decide it, and promotes meanwhile
    monkeypatch.setattr(Tuner, "_available", lambda self: 32)
    tf = Tuner(study, sens, budget_bytes=BUDGET, out=tmp / "b", run_study=UndecidedStudy(), max_trials=1,
               log=lambda s: None).run()
    assert tf.trials[0].action.kind == "promote" and "≈40 pages would decide it" in tf.trials[0].action.text


# --- the console ----------------------------------------------------------------------

_NOISY_TUNE = """
import sys, warnings
from quantgate.cli import main
from quantgate.tune import loop
from tests.integration.test_tune import FakeStudy

class NoisyStudy(FakeStudy):
    # what the libraries a trial's study loads do: a tqdm-style bar on stderr, a warning, a print
    def __call__(self, study_file, out, log):
        sys.stderr.write("Loading weights:  50%|#####     | 1/2 [00:01<00:01,  1.00it/s]\\n")
        warnings.warn("a library warning")
        print("a library print")
        return super().__call__(study_file, out, log)

init = loop.Tuner.__init__
def patched(self, *a, **k):
    init(self, *a, **k)
    self.run_study = NoisyStudy()
loop.Tuner.__init__ = patched
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.parametrize("verbose", [False, True])
def test_the_tune_verb_keeps_library_output_in_its_log_unless_verbose(setup, verbose):
    """`quantgate tune` is as quiet as `study`: third-party bars, warnings and prints go to OUT/tune.log and the
    terminal has quantgate's own lines (the trials and the outcome); -v shows everything instead."""
    tmp, study, sens = setup
    r = subprocess.run([sys.executable, "-c", _NOISY_TUNE, "tune", str(study), "--sensitivity", str(sens),
                        "--budget", str(BUDGET), "-o", str(tmp / "out")] + (["-v"] if verbose else []),
                       capture_output=True, text=True, cwd=ROOT, timeout=300,
                       env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert r.returncode == 0, r.stderr[-3000:]
    term = r.stdout + r.stderr
    assert "[tune] trial 1" in term and "[tune] trial 2" in term and "recipe:" in r.stdout  # its own lines
    log = (tmp / "out" / "tune.log").read_text()
    noise = ("it/s]", "a library warning", "a library print")
    if verbose:
        assert all(n in term for n in noise)
    else:
        assert not any(n in term for n in noise), term[-2000:]
        assert all(n in log for n in noise)  # kept, not lost
