"""Per-group sensitivity on page images and the recommended recipe."""

import itertools
import json
import random
import subprocess
import sys

import pytest
import torch

from quantgate.errors import InputError
from quantgate.schema.sensitivity import Group, Measurement, Reference, SensitivityFile, Sizes
from quantgate.sensitivity import forward as fw
from quantgate.sensitivity.budget import parse_size
from tests.support.paths import REPO

ROOT = REPO
READER = ROOT / "quantgate" / "assets" / "reader"
PROMPT = "Convert this page to markdown. Output only the markdown."


# --- pure parts ---------------------------------------------------------------------------------

@pytest.mark.parametrize("text,want", [("4.1MB", 4_100_000), ("3GB", 3 * 10**9), ("750kB", 750_000), ("123456", 123456),
                                       ("2.5 mb", 2_500_000), ("10B", 10)])
def test_sizes_use_decimal_units(text, want):
    assert parse_size(text) == want


@pytest.mark.parametrize("text", ["4.1MiB", "MB", "-3MB", "0", "four", "1e6"])
def test_bad_sizes_are_refused_naming_the_flag(text):
    with pytest.raises(InputError, match="--budget"):
        parse_size(text)


def _fake_sens(kl: list[dict[str, float]], nbytes: list[dict[str, int]], fixed=1000, decode=None) -> SensitivityFile:
    formats = [f for f in kl[0] if f != "bf16"]
    groups, meas = [], []
    for i, (k, b) in enumerate(zip(kl, nbytes, strict=True)):
        name = f"layers.{i}.mlp"
        groups.append(Group(name=name, kind="mlp", layer=i, modules=[f"m.layers.{i}.mlp.up_proj"],
                            selector={"kinds": ["mlp"], "layers": str(i)}, params=b["bf16"] // 2, bf16_bytes=b["bf16"],
                            decode=True if decode is None else decode[i]))
        for f in formats:
            meas.append(Measurement(group=name, format=f, kl_mean=k[f], kl_pages=[k[f]], top1_agreement=1.0, tokens=10,
                                    bytes=b[f], quantized=[f"m.layers.{i}.mlp.up_proj"], wall_s=0.0))
    return SensitivityFile(
        model="m", model_weights_sha256="0" * 64, pageset="p", pageset_sha256="0" * 64, page_ids=["a"], prompt=PROMPT,
        max_new_tokens=8, max_seq_len=4096, formats=formats, allow_vision=False, keep_bf16=[], bandwidth_gbps=4800.0,
        bandwidth_source="test", n_layers=len(kl),
        modules=[{"name": f"m.layers.{i}.mlp.up_proj", "kind": "mlp", "layer": i, "in_features": 256, "out_features": 256}
                 for i in range(len(kl))],
        groups=groups, sizes=Sizes(bf16_bytes=fixed + sum(b["bf16"] for b in nbytes), fixed_bytes=fixed,
                                   fixed_decode_bytes=fixed // 2),
        reference=Reference(tokens=10, rounds=1, pages_generated=0, answers=[[1]]), measurements=meas, timings={},
        versions={}, created_utc="now")


def _random_instance(rng, n_groups, scale=1.0):
    kl, nb = [], []
    for _ in range(n_groups):
        bf = rng.choice([1000, 2000, 3000])
        nb.append({"bf16": bf, "fp8": bf // 2, "nvfp4": bf * 9 // 32, "w2a16": bf * 2 // 15})
        a = rng.random() * 1e-3
        kl.append({"bf16": 0.0, "fp8": a * scale, "nvfp4": (a + rng.random() * 1e-2) * scale,
                   "w2a16": (a + rng.random()) * scale})
    return kl, nb


def test_milp_choice_is_the_brute_force_optimum():
    from quantgate.sensitivity.recommend import recommend

    rng = random.Random(5)
    for trial in range(16):  # half of them with KL of order 1e-7 (what FP8 does to the reader)
        kl, nb = _random_instance(rng, 5, scale=1e-6 if trial % 2 else 1.0)
        sens = _fake_sens(kl, nb)
        lo = 1000 + sum(min(b.values()) for b in nb)
        hi = 1000 + sum(b["bf16"] for b in nb)
        budget = rng.randint(lo, hi - 1)
        rec = recommend(sens, budget_bytes=budget)
        assert rec.total_bytes <= budget
        best = min(sum(kl[g][f] for g, f in enumerate(pick)) for pick in itertools.product(*[list(k) for k in kl])
                   if 1000 + sum(nb[g][f] for g, f in enumerate(pick)) <= budget)
        assert rec.predicted_kl == pytest.approx(best, rel=1e-9, abs=0), trial


def test_budget_outside_the_reachable_range_names_both_sizes():
    from quantgate.sensitivity.recommend import recommend

    kl, nb = _random_instance(random.Random(1), 3)
    sens = _fake_sens(kl, nb)
    smallest = 1000 + sum(min(b.values()) for b in nb)
    bf16 = 1000 + sum(b["bf16"] for b in nb)
    with pytest.raises(InputError, match=r"below the smallest") as e:
        recommend(sens, budget_bytes=smallest - 1)
    assert f"{smallest / 1e3:,.3f} kB" in str(e.value) and f"{bf16 / 1e3:,.3f} kB" in str(e.value)
    with pytest.raises(InputError, match=r"at or above the BF16 size") as e:
        recommend(sens, budget_bytes=bf16)
    assert recommend(sens, budget_bytes=smallest).total_bytes == smallest  # the edge itself is feasible
    with pytest.raises(InputError, match="--speedup"):
        recommend(sens, speedup=1.0)
    with pytest.raises(InputError, match="--effective-bits"):
        recommend(sens, effective_bits=0.5)
    with pytest.raises(InputError, match="not measured"):
        recommend(sens, budget_bytes=smallest, formats=["w4a16"])


def test_speedup_counts_only_weights_read_per_token():
    from quantgate.sensitivity.recommend import recommend

    # group 0 is read per decoded token, group 1 only once per page (vision): a speed budget can
    # only be met by shrinking group 0, however cheap group 1's damage is
    kl = [{"bf16": 0.0, "w2a16": 0.5}, {"bf16": 0.0, "w2a16": 1e-9}]
    nb = [{"bf16": 8000, "w2a16": 1000}, {"bf16": 8000, "w2a16": 1000}]
    rec = recommend(_fake_sens(kl, nb, decode=[True, False]), speedup=1.5)
    assert rec.assignment == {"layers.0.mlp": "w2a16", "layers.1.mlp": "bf16"}
    assert rec.modelled_speedup >= 1.5
    rec = recommend(_fake_sens(kl, nb, decode=[True, False]), budget_bytes=1000 + 8000 + 1000)
    assert rec.assignment == {"layers.0.mlp": "bf16", "layers.1.mlp": "w2a16"}


def test_excluding_a_groups_formats_promotes_it():
    from quantgate.sensitivity.recommend import recommend

    kl = [{"bf16": 0.0, "fp8": 1e-4, "w2a16": 1e-3}] * 3
    nb = [{"bf16": 4000, "fp8": 2000, "w2a16": 600}] * 3
    sens = _fake_sens(kl, nb)
    budget = 1000 + 3 * 2000
    assert set(recommend(sens, budget_bytes=budget).assignment.values()) == {"fp8"}
    # a tuning loop found layers.1 worse than predicted: its fp8 and w2a16 are off the table
    rec = recommend(sens, budget_bytes=budget, exclude={"layers.1.mlp": ["fp8", "w2a16"]})
    assert rec.assignment["layers.1.mlp"] == "bf16" and rec.total_bytes <= budget
    assert rec.assignment["layers.0.mlp"] == rec.assignment["layers.2.mlp"] == "w2a16"
    with pytest.raises(InputError, match="no group"):
        recommend(sens, budget_bytes=budget, exclude={"layers.9.mlp": ["fp8"]})


def test_int2_warns_about_vllm_and_can_be_left_out():
    from quantgate.sensitivity.recommend import recommend

    kl = [{"bf16": 0.0, "w4a16": 1e-3, "w2a16": 2e-3}] * 2
    nb = [{"bf16": 4000, "w4a16": 1100, "w2a16": 600}] * 2
    sens = _fake_sens(kl, nb)
    rec = recommend(sens, budget_bytes=1000 + 1200)
    assert set(rec.assignment.values()) == {"w2a16"}
    assert any("HummingLinearKernel" in w and "not measured" in w for w in rec.warnings)
    with pytest.raises(InputError, match="below the smallest"):
        recommend(sens, budget_bytes=1000 + 1200, formats=["w4a16"])
    assert not recommend(sens, budget_bytes=1000 + 2200, formats=["w4a16"]).warnings
    assert not recommend(sens, budget_bytes=1000 + 1200, target="none").warnings


# --- on the bundled reader ----------------------------------------------------------------------

@pytest.fixture(scope="module")
def reader_pages(tmp_path_factory):
    from quantgate.heldout.synth import synth_pages

    out = tmp_path_factory.mktemp("sens") / "pages"
    synth_pages(out, 14, seed=11, calibration_fraction=0.3, profile="reader")
    return out


@pytest.fixture(scope="module")
def reader_sens(reader_pages, tmp_path_factory):
    from quantgate.sensitivity.analyze import SensitivityOptions, analyze

    out = tmp_path_factory.mktemp("sensout") / "sens.json"
    res = analyze(READER, reader_pages, out, SensitivityOptions(formats=["w4a16", "w2a16"], samples=3, max_new_tokens=48),
                  show_progress=False, log=lambda s: None)
    return out, res


@pytest.fixture(scope="module")
def bf16_reader():
    from transformers import AutoModelForImageTextToText, AutoProcessor

    return (AutoModelForImageTextToText.from_pretrained(READER, dtype=torch.bfloat16).eval(),
            AutoProcessor.from_pretrained(READER))


def _prompts(proc, pages, n=3):
    from quantgate.io.pageset import load_pageset

    ps = load_pageset(pages)
    return fw.build_prompts(proc, ps, ps.split("calibration")[:n], PROMPT, 4096)


def test_batched_right_padded_logits_equal_one_page_logits(bf16_reader, reader_pages):
    from transformers import AutoModelForImageTextToText

    # float32, so that a batch shape's different rounding (an ulp of bf16) cannot hide a leak from
    # the padding, which would move logits by whole units
    _, proc = bf16_reader
    model = AutoModelForImageTextToText.from_pretrained(READER, dtype=torch.float32).eval()
    prompts = _prompts(proc, reader_pages)
    items = [(p.enc, p.draft) for p in prompts]
    assert len({p.enc["input_ids"].shape[1] + len(p.draft) for p in prompts}) > 1  # padding is exercised
    batched = fw.answer_logits(model, items, proc.tokenizer.pad_token_id, extra=1)
    for (enc, ans), b in zip(items, batched, strict=True):
        one = fw.answer_logits(model, [(enc, ans)], proc.tokenizer.pad_token_id, extra=1)[0]
        assert one.shape == (len(ans) + 1, model.config.text_config.vocab_size)
        assert torch.allclose(one, b, atol=1e-4, rtol=0), (one - b).abs().max()


@pytest.mark.slow
def test_draft_verification_gives_generates_answers_even_from_a_wrong_draft(bf16_reader, reader_pages):
    model, proc = bf16_reader
    tok = proc.tokenizer
    prompts = _prompts(proc, reader_pages)
    want = []
    for p in prompts:
        out = model.generate(**p.enc, do_sample=False, max_new_tokens=48, pad_token_id=tok.pad_token_id)
        want.append(out[0, p.enc["input_ids"].shape[1]:].tolist())
    drafts = [fw.PagePrompt(p.id, p.enc, p.draft + [tok.eos_token_id]) for p in prompts]
    drafts[0].draft[2] = tok.convert_tokens_to_ids("Z")  # a wrong character to fix
    drafts[1].draft = drafts[1].draft[:4]  # a draft that stops early
    drafts[2] = fw.PagePrompt(drafts[2].id, drafts[2].enc, None)  # no truth: generated
    got, rounds, generated = fw.greedy_answers(model, drafts, max_new_tokens=48, eos_ids={tok.eos_token_id},
                                               pad_id=tok.pad_token_id, batch_pages=8)
    assert got == want
    assert rounds >= 2 and generated >= 1


def test_sensitivity_table_on_the_reader(reader_sens):
    out, res = reader_sens
    assert json.loads(out.read_text())["kind"] == "quantgate.sensitivity"
    names = [g.name for g in res.groups]
    assert names == [f"layers.{i}.{k}" for i in range(3) for k in ("linear_attn", "mlp")] + ["layers.3.attn", "layers.3.mlp"]
    for g in res.groups:  # Gated DeltaNet gates stay out, vision is not measured without --allow-vision
        assert not any(m.endswith(("in_proj_a", "in_proj_b")) or ".visual." in m for m in g.modules)
    t = res.table()
    assert len(t) == len(res.groups) * 2
    for g in res.groups:
        w4, w2 = t[(g.name, "w4a16")], t[(g.name, "w2a16")]
        assert w2.bytes < w4.bytes < g.bf16_bytes
        assert w4.tokens == res.reference.tokens > 0 and len(w4.kl_pages) == 3
    # INT2 hurts more than INT4 in total, and the first DeltaNet layer is the most fragile to INT2
    assert sum(t[(g.name, "w2a16")].kl_mean for g in res.groups) > 10 * sum(t[(g.name, "w4a16")].kl_mean for g in res.groups)
    assert res.sizes.fixed_bytes + sum(g.bf16_bytes for g in res.groups) == res.sizes.bf16_bytes


def test_measured_damage_and_bytes_match_a_real_llmcompressor_checkpoint(reader_sens, bf16_reader, reader_pages, tmp_path):
    """The in-memory fake quantization is what `quantgate quantize` builds: a checkpoint of one
    group in w2a16 has exactly the predicted bytes, and loaded by transformers it gives the KL of
    the in-memory emulation (that group plus oneshot's offset-norm round trip, which the file
    records apart as the baseline every variant carries)."""
    from transformers import AutoModelForImageTextToText

    from quantgate.quantize import quantize
    from quantgate.quantize.classify import list_modules
    from quantgate.quantize.verify import read_safetensors_header
    from quantgate.recipes import to_llmcompressor
    from quantgate.sensitivity.fakequant import FormatSession, oneshot_norms
    from quantgate.sensitivity.groups import assignment_recipe

    _, res = reader_sens
    model, proc = bf16_reader
    group = next(g for g in res.groups if g.name == "layers.0.mlp")
    meas = res.table()[(group.name, "w2a16")]
    recipe = assignment_recipe(res.groups, {group.name: "w2a16"}, keep_bf16=res.keep_bf16, name="one")
    (tmp_path / "one.yaml").write_text(json.dumps(recipe.model_dump(exclude_none=True)))
    quantize(READER, tmp_path / "one.yaml", tmp_path / "v", log=lambda s: None)
    header = read_safetensors_header(tmp_path / "v" / "model.safetensors")
    on_disk = sum(v["data_offsets"][1] - v["data_offsets"][0] for k, v in header.items()
                  if any(k.startswith(m + ".") for m in group.modules))
    assert on_disk == meas.bytes
    prompts = _prompts(proc, reader_pages)
    pad, answers = proc.tokenizer.pad_token_id, res.reference.answers
    ref = fw.reference_logprobs(model, prompts, answers, batch_pages=8, pad_id=pad)
    q = AutoModelForImageTextToText.from_pretrained(tmp_path / "v", dtype=torch.bfloat16).eval()
    ckpt = fw.kl_against(q, prompts, answers, ref, pad_id=pad).kl_mean
    kinds = {m.name: m.kind for m in list_modules(model)[0]}
    with oneshot_norms(model) as changed:
        assert changed > 0 and res.baseline.params_changed == changed and res.baseline.kl_mean > 0
        with FormatSession(model, to_llmcompressor({n: "w2a16" for n in group.modules}, kinds)) as sess:
            with sess.only(group.modules):
                emulated = fw.kl_against(model, prompts, answers, ref, pad_id=pad).kl_mean
    assert ckpt > 1e-7
    assert emulated == pytest.approx(ckpt, rel=1e-3)
    # and the group alone (the table's entry) is the emulation without the norm round trip
    assert meas.kl_mean != emulated
    assert fw.kl_against(model, prompts, answers, ref, pad_id=pad).kl_mean == 0.0  # norms restored


def test_replaying_upstream_outputs_changes_no_number(bf16_reader, reader_pages):
    from quantgate.quantize.classify import list_modules
    from quantgate.recipes import to_llmcompressor
    from quantgate.sensitivity.analyze import _replay_plan
    from quantgate.sensitivity.fakequant import FormatSession
    from quantgate.sensitivity.groups import build_groups, resolve_assignment

    model, proc = bf16_reader
    prompts = _prompts(proc, reader_pages, n=2)
    answers = [p.draft for p in prompts]
    pad = proc.tokenizer.pad_token_id
    modules, n_layers, _ = list_modules(model)
    specs = build_groups(modules, n_layers, keep_bf16=[r"re:.*linear_attn\.in_proj_[ab]$"])
    replay = _replay_plan(model, specs, modules)
    assert replay["layers.3.mlp"][-4:] == [f"model.language_model.layers.{i}" for i in range(3)] + [
        "model.language_model.layers.3.self_attn"]
    assert replay["layers.0.mlp"][-1] == "model.language_model.layers.0.linear_attn"
    ref = fw.reference_logprobs(model, prompts, answers, batch_pages=8, pad_id=pad,
                                record=sorted({n for v in replay.values() for n in v}))
    plan, _ = resolve_assignment(specs, {s.name: "w2a16" for s in specs}, modules, n_layers,
                                 keep_bf16=[r"re:.*linear_attn\.in_proj_[ab]$"], allow_vision=False, where="t")
    kinds = {m.name: m.kind for m in modules}
    with FormatSession(model, to_llmcompressor(plan, kinds)) as sess:
        for s in (specs[1], specs[2], specs[-1]):  # an MLP after Gated DeltaNet, a DeltaNet, an MLP after attention
            with sess.only(s.modules):
                full = fw.kl_against(model, prompts, answers, ref, pad_id=pad)
                fast = fw.kl_against(model, prompts, answers, ref, pad_id=pad, replay=replay[s.name])
            assert full.kl_mean > 0 and full == fast
    # leaving the session restores plain BF16: no damage left anywhere
    assert fw.kl_against(model, prompts, answers, ref, pad_id=pad).kl_mean == 0.0
    assert not any(hasattr(m, "quantization_scheme") for m in model.modules())


def test_rerun_resumes_adds_formats_and_refuses_other_inputs(reader_sens, reader_pages, tmp_path):
    import shutil

    from quantgate.sensitivity.analyze import SensitivityOptions, analyze, records_path

    src, res = reader_sens
    out = tmp_path / "copy.json"
    shutil.copy(records_path(src), records_path(out))
    lines = records_path(out).read_text().splitlines()
    kw = {"samples": 3, "max_new_tokens": 48}

    def analyze_with(**o):  # the fixture's settings, these formats
        return analyze(READER, reader_pages, out, SensitivityOptions(**{**kw, **o}), show_progress=False)

    again = analyze_with(formats=["w4a16", "w2a16"])
    assert records_path(out).read_text().splitlines() == lines  # nothing redone
    assert [m.model_dump() for m in again.measurements] == [m.model_dump() for m in res.measurements]
    sub = analyze_with(formats=["w2a16"])
    assert sub.formats == ["w2a16"] and len(records_path(out).read_text().splitlines()) == len(lines)
    with pytest.raises(InputError, match="other inputs .*page_ids"):
        analyze_with(formats=["w4a16"], samples=2)
    # a torn last line (killed mid-write) is dropped and that one measurement redone; a new format
    # adds one record per group
    records_path(out).write_text("\n".join(lines[:-1]) + "\n" + lines[-1][:20])
    redo = analyze_with(formats=["w4a16", "w2a16", "fp8"])
    assert len(records_path(out).read_text().splitlines()) == len(lines) + len(res.groups)
    t = redo.table()
    assert all(t[k].kl_mean == m.kl_mean for k, m in res.table().items())
    assert all(t[(g.name, "fp8")].bytes > t[(g.name, "w4a16")].bytes for g in res.groups)


def test_recommended_recipe_plans_and_quantizes_unchanged(reader_sens, tmp_path):
    from quantgate.quantize import make_plan, quantize
    from quantgate.quantize.verify import read_safetensors_header
    from quantgate.recipes import load_recipe

    out, res = reader_sens
    t = res.table()
    opts = [{"bf16": (0.0, g.bf16_bytes), **{f: (t[(g.name, f)].kl_mean, t[(g.name, f)].bytes) for f in res.formats}}
            for g in res.groups]
    fragile = max(res.groups, key=lambda g: t[(g.name, "w2a16")].kl_mean)
    budget = (res.sizes.fixed_bytes + sum(o["w2a16"][1] for o in opts)
              + t[(fragile.name, "w4a16")].bytes - t[(fragile.name, "w2a16")].bytes)
    # the exact optimum by enumeration (3^8 choices): least damage, then fewest bytes
    best = min((p for p in itertools.product(*[list(o) for o in opts])
                if res.sizes.fixed_bytes + sum(o[f][1] for o, f in zip(opts, p, strict=True)) <= budget),
               key=lambda p: (sum(o[f][0] for o, f in zip(opts, p, strict=True)),
                              sum(o[f][1] for o, f in zip(opts, p, strict=True))))
    cli = [sys.executable, "-m", "quantgate", "recommend", str(out), "--budget", str(budget), "-o",
           str(tmp_path / "rec.yaml"), "--model", str(READER)]
    p = subprocess.run(cli, capture_output=True, text=True, cwd=ROOT)
    assert p.returncode == 0, p.stderr
    text = (tmp_path / "rec.yaml").read_text()
    assert f"{fragile.name}: KL" in text and "HummingLinearKernel" in text
    plan = make_plan(READER, load_recipe(tmp_path / "rec.yaml"))
    for g, f in zip(res.groups, best, strict=True):
        assert {plan.formats[m] for m in g.modules} == {f}, g.name
    assert "w2a16" in best and "w4a16" in best
    assert all(f == "bf16" for n, f in plan.formats.items() if "in_proj_a" in n or "in_proj_b" in n or ".visual." in n)
    m = quantize(READER, tmp_path / "rec.yaml", tmp_path / "variant", log=lambda s: None).manifest.model_dump()
    assert m["verification"]["modules_checked"] == len(plan.formats)
    header = read_safetensors_header(tmp_path / "variant" / "model.safetensors")
    assert sum(v["data_offsets"][1] - v["data_offsets"][0] for v in header.values()) <= budget


def test_bad_input_is_one_clear_error(reader_sens, tmp_path):
    from quantgate.heldout.synth import synth_pages

    out, _ = reader_sens
    q = [sys.executable, "-m", "quantgate"]
    p = subprocess.run(q + ["recommend", str(out), "--budget", "4.1MiB", "-o", str(tmp_path / "r.yaml")],
                       capture_output=True, text=True, cwd=ROOT)
    assert p.returncode == 65 and "decimal unit" in p.stderr and "Traceback" not in p.stderr
    p = subprocess.run(q + ["recommend", str(out), "--budget", "1kB", "-o", str(tmp_path / "r.yaml")],
                       capture_output=True, text=True, cwd=ROOT)
    assert p.returncode == 64 and "below the smallest" in p.stderr and "BF16 is" in p.stderr
    assert not (tmp_path / "r.yaml").exists()
    other = tmp_path / "other"  # other weights: refused by their hash (nothing is loaded)
    other.mkdir()
    (other / "config.json").write_text((READER / "config.json").read_text())
    (other / "model.safetensors").write_bytes(b"other weights")
    p = subprocess.run(q + ["recommend", str(out), "--budget", "5MB", "--model", str(other), "-o", str(tmp_path / "r.yaml")],
                       capture_output=True, text=True, cwd=ROOT)
    assert p.returncode == 65 and "measured on other weights" in p.stderr
    empty = tmp_path / "nocal"
    synth_pages(empty, 3, seed=1, calibration_fraction=0.0, profile="reader")
    p = subprocess.run(q + ["sensitivity", str(READER), "--calibration", str(empty), "-o", str(tmp_path / "s.json")],
                       capture_output=True, text=True, cwd=ROOT)
    assert p.returncode == 65 and "no pages in the calibration split" in p.stderr and "Traceback" not in p.stderr
    p = subprocess.run(q + ["sensitivity", str(READER), "--calibration", str(empty), "--formats", "int3",
                            "-o", str(tmp_path / "s.json")], capture_output=True, text=True, cwd=ROOT)
    assert p.returncode == 64 and "--formats: int3" in p.stderr
    (tmp_path / "bad.json").write_text(json.dumps({"kind": "quantgate.sensitivity", "schema_version": 1}))
    p = subprocess.run(q + ["recommend", str(tmp_path / "bad.json"), "--budget", "5MB", "-o", str(tmp_path / "r.yaml")],
                       capture_output=True, text=True, cwd=ROOT)
    assert p.returncode == 65 and "bad.json" in p.stderr and "Traceback" not in p.stderr
