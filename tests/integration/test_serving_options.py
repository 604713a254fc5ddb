"""benchmarks/serving_options.py on a synthetic finished study (tests.support.study_folder) whose variants
are serving options: which reference each option is compared with, the exact-match rate page by page, the
diff examples, the verdicts read from summary.json, the speed ratios and the n-gram acceptance rate read
from a server.log line in vLLM 0.26's format."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from tests.support.paths import REPO
from tests.support.study_folder import finished_study

ROOT = REPO
_spec = importlib.util.spec_from_file_location("serving_options", ROOT / "benchmarks" / "serving_options.py")
so = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(so)

NGRAM = '{"method":"ngram","num_speculative_tokens":3,"prompt_lookup_max":3,"prompt_lookup_min":2}'
VARIANTS = [{"name": "bf16", "recipe": "bf16"},
            {"name": "bf16-ngram", "recipe": "bf16", "server_args": ["--speculative-config", NGRAM]},
            {"name": "bf16-kvfp8", "recipe": "bf16", "server_args": ["--kv-cache-dtype", "fp8"]},
            {"name": "nvfp4", "recipe": "nvfp4"},
            {"name": "nvfp4-emulation", "recipe": "nvfp4", "server_args": ["--linear-backend", "emulation"]}]
# as vLLM 0.26 prints it (vllm/v1/spec_decode/metrics.py:120-135), two stats intervals
SPEC_LOG = ("(APIServer pid=9) INFO 11-30 14:03:05 [metrics.py:128] SpecDecoding metrics: Mean acceptance length: "
            "1.11, Accepted throughput: 0.40 tokens/s, Drafted throughput: 10.80 tokens/s, Accepted: 4 tokens, "
            "Drafted: 108 tokens, Per-position acceptance rate: 0.083, 0.028, 0.000, Avg Draft acceptance rate: 3.7%\n"
            "(APIServer pid=9) INFO 11-30 14:03:15 [metrics.py:128] SpecDecoding metrics: Mean acceptance length: "
            "1.00, Accepted throughput: 0.00 tokens/s, Drafted throughput: 9.00 tokens/s, Accepted: 0 tokens, "
            "Drafted: 92 tokens, Per-position acceptance rate: 0.000, 0.000, 0.000, Avg Draft acceptance rate: 0.0%\n")
PAGES = 32


def _requests(rdir: Path, texts: dict[int, list[str]]) -> None:
    with open(rdir / "requests.jsonl", "w") as f:
        for c, tx in texts.items():
            for i, t in enumerate(tx):
                f.write(json.dumps({"schema_version": 1, "page_id": f"p{i:03d}", "concurrency": c, "output": t,
                                    "start": 100.0 + i, "end": 101.0 + i}) + "\n")


@pytest.fixture(scope="module")
def study(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("so") / "study"
    names = [v["name"] for v in VARIANTS[1:]]
    finished_study(out, {n: 0.0 for n in names}, pages=PAGES, variants=VARIANTS, min_pages=30)
    base = [f"page {i}: total 403 units" for i in range(PAGES)]
    changed = lambda tx, pages: [t.replace("403", "400") if i in pages else t for i, t in enumerate(tx)]  # noqa: E731
    texts = {"bf16": {1: base, 2: changed(base, {5})},
             "bf16-ngram": {1: changed(base, {3, 7, 9})},
             "bf16-kvfp8": {1: list(base)},
             "nvfp4": {1: changed(base, {1})},
             "nvfp4-emulation": {1: changed(base, {1, 2})}}
    for name, tx in texts.items():
        _requests(out / "runs" / name, tx)
    # same weights for the bf16 options; the nvfp4 pair quantized twice into the same bytes
    for name, fp in {"bf16": "a", "bf16-ngram": "a", "bf16-kvfp8": "a", "nvfp4": "b", "nvfp4-emulation": "c"}.items():
        p = out / "runs" / name / "run.json"
        run = json.loads(p.read_text())
        run["variant_fingerprint"] = fp * 64
        p.write_text(json.dumps(run))
    (out / "runs" / "bf16-ngram" / "server.log").write_text("Loading weights took 0.01 seconds\n" + SPEC_LOG)
    (out / "study.json").write_text(json.dumps({"name": "s", "baseline": "bf16", "variants": VARIANTS,
                                                "concurrency": [1, 2], "max_tokens": 48, "limit": None}))
    return out


def _row(result: dict, variant: str, reference: str) -> dict:
    return next(r for r in result["rows"] if r["variant"] == variant and r["reference"] == reference)


def test_references_are_the_same_weights_without_the_option():
    pairs = {(p["variant"], p["reference"]) for p in so.pairs({"baseline": "bf16", "variants": VARIANTS})}
    assert pairs == {("bf16-ngram", "bf16"), ("bf16-kvfp8", "bf16"), ("nvfp4", "bf16"),
                     ("nvfp4-emulation", "nvfp4"), ("nvfp4-emulation", "bf16")}


def test_exact_match_counts_changed_pages(study):
    res = so.build(study)
    ngram = _row(res, "bf16-ngram", "bf16")
    assert ngram["exact_match_rate"] == pytest.approx((PAGES - 3) / PAGES)
    assert ngram["exact_match"]["c1"]["pages_changed"] == ["p003", "p007", "p009"]
    assert ngram["exact_match"]["c1"]["examples"][0]["diff"] == " 3: total 40['3' → '0'] units"
    assert _row(res, "bf16-kvfp8", "bf16")["exact_match_rate"] == 1.0
    emu = _row(res, "nvfp4-emulation", "nvfp4")
    assert emu["exact_match_rate"] == pytest.approx((PAGES - 1) / PAGES)
    assert emu["same_weights"] is False  # quantized twice into different bytes: the row says so
    assert ngram["same_weights"] is True
    assert _row(res, "nvfp4-emulation", "bf16")["exact_match_rate"] == pytest.approx((PAGES - 2) / PAGES)
    # the baseline's own c=1 vs c=2 (its noise run) is reported beside the option
    assert ngram["within_reference"] == {"levels": [1, 2], "pages_compared": PAGES,
                                         "exact_match_rate": pytest.approx((PAGES - 1) / PAGES)}
    # a level the option did not serve compares nothing: not measured, not 100%
    assert ngram["exact_match"]["c2"]["pages_compared"] == 0 and ngram["exact_match"]["c2"]["exact_match_rate"] is None


def test_verdicts_speed_and_acceptance(study):
    res = so.build(study)
    summary = json.loads((study / "summary.json").read_text())
    ngram = _row(res, "bf16-ngram", "bf16")
    want = {v["metric"]: v["verdict"] for v in summary["verdicts"] if v["variant"] == "bf16-ngram"}
    assert ngram["verdicts"] == want and set(want) == {"ned", "cer", "bow_f1"}
    assert ngram["verdict"] in want.values()
    # study_folder's speeds: bf16 1.0 pages/s at c=1, the first candidate 2.0
    assert ngram["speed"]["c1"]["pages_per_s_ratio_to_reference"] == pytest.approx(2.0)
    assert ngram["spec_decode"] == {"accepted_tokens": 4, "drafted_tokens": 200, "stats_lines": 2,
                                    "acceptance_rate": pytest.approx(0.02)}
    assert _row(res, "bf16-kvfp8", "bf16")["spec_decode"] is None
    assert "option" in ngram and ngram["option"] == "speculative decoding ngram k=3"


def test_contended_names_overlapping_steps(study, tmp_path):
    (tmp_path / "gpu0").mkdir()
    (tmp_path / "session.json").write_text(json.dumps({"gpus": 1, "one_gpu": 1}))
    (tmp_path / "gpu0" / "status.jsonl").write_text(
        json.dumps({"step": "quantize", "started": 50.0, "wall_s": 60.0, "status": "ok"}) + "\n"  # 50..110
        + json.dumps({"step": "hbm", "started": 10.0, "wall_s": 5.0, "status": "ok"}) + "\n")     # before
    (tmp_path / "gpu0" / "status.jsonl.running").mkdir()
    (tmp_path / "gpu0" / "status.jsonl.running" / "serve4b").touch()
    row = _row(so.build(study, tmp_path), "bf16-ngram", "bf16")
    assert row["contended"]["one_gpu_shared_with_gpu0"] is True
    assert row["contended"]["gpu0_steps_overlapping"] == ["quantize", "serve4b (running)"]
    assert so.build(study)["rows"][0]["contended"]["one_gpu_shared_with_gpu0"] is None  # no session: not recorded


def test_writes_json_and_table(study, tmp_path, capsys):
    out = tmp_path / "serving_options.json"
    assert so.main([str(study), "-o", str(out)]) == 0
    rows = json.loads(out.read_text())["rows"]
    assert all({"option", "exact_match_rate", "verdict"} <= set(r) for r in rows) and len(rows) == 5
    assert "speculative decoding ngram k=3" in capsys.readouterr().out


def test_fake_vllm_states_the_options_as_vllm_does(tmp_path):
    """The dry run's stand-in: its start lines carry the options where quantgate's vLLM log parser reads them,
    each option is its own compile-cache key, and its stats line parses as a real one does."""
    from quantgate.serve.backends.vllm import engine_from_log
    from tests.support import fake_vllm

    env = {"VLLM_CACHE_ROOT": str(tmp_path)}
    plain, cache_plain = fake_vllm._lines("m", ["--max-num-seqs", "64"], env)
    spec, cache_spec = fake_vllm._lines("m", ["--max-num-seqs", "64", "--speculative-config", NGRAM], env)
    emu, cache_emu = fake_vllm._lines("m", ["--max-num-seqs", "64", "--linear-backend", "emulation"], env)
    e_plain, e_spec = engine_from_log("\n".join(plain)), engine_from_log("\n".join(spec))
    assert e_plain.speculative is None and e_plain.async_scheduling is True
    assert "ngram" in e_spec.speculative and e_spec.async_scheduling is False
    assert "linear_backend='emulation'" in "\n".join(emu)
    assert len({cache_plain, cache_spec, cache_emu}) == 3
    acc = so.spec_acceptance(fake_vllm.SPEC_LINE.format(sec=5))
    assert acc["accepted_tokens"] == 3 and acc["drafted_tokens"] == 90


def test_a_study_cut_short_gives_rows_with_what_was_served(study, tmp_path):
    import shutil

    cut = tmp_path / "cut"
    shutil.copytree(study, cut)
    shutil.rmtree(cut / "runs" / "nvfp4-emulation")  # never served
    (cut / "summary.json").unlink()  # no verdicts yet
    res = so.build(cut)
    assert res["complete"] is False
    emu = _row(res, "nvfp4-emulation", "nvfp4")
    assert emu["exact_match_rate"] is None and emu["verdict"] is None and emu["speed"] == {}
    assert _row(res, "bf16-ngram", "bf16")["exact_match_rate"] == pytest.approx((PAGES - 3) / PAGES)


def test_a_variant_whose_server_failed_is_dropped_and_reported(study, tmp_path):
    import shutil

    import yaml

    cut = tmp_path / "cut"
    shutil.copytree(study, cut)
    for f in ("run.json", "requests.jsonl"):  # the study stopped here: its server never got healthy
        (cut / "runs" / "bf16-ngram" / f).unlink()
    (cut / "runs" / "bf16-ngram" / "server.log").write_text(
        "INFO loading\n(EngineCore pid=5) ERROR 11-30 14:02:38 [core.py:1108] EngineCore failed to start.\n"
        "ValueError: ngram is not supported here\n")
    (tmp_path / "yaml").mkdir()
    src = tmp_path / "yaml" / "serving_options.yaml"
    src.write_text(yaml.safe_dump({"name": "s", "model": "../model", "pages": {"path": "../pages"}, "baseline": "bf16",
                                   "variants": VARIANTS, "concurrency": [1, 2], "output": "elsewhere"}))
    retry = tmp_path / "retry.yaml"
    assert so.main([str(cut), "--drop-failed", str(src), "--retry-yaml", str(retry)]) == 0
    spec = yaml.safe_load(retry.read_text())
    assert [v["name"] for v in spec["variants"]] == ["bf16", "bf16-kvfp8", "nvfp4", "nvfp4-emulation"]
    assert spec["model"] == str(tmp_path / "model") and spec["pages"]["path"] == str(tmp_path / "pages")
    assert "output" not in spec
    # the resumed study rewrites study.json without it; the table still has its row, saying why
    st = json.loads((cut / "study.json").read_text())
    (cut / "study.json").write_text(json.dumps({**st, "variants": spec["variants"]}))
    row = _row(so.build(cut), "bf16-ngram", "bf16")
    assert row["not_served"]["error_line"] == "ValueError: ngram is not supported here"
    assert row["verdict"] == "not served: its server failed" and row["exact_match_rate"] is None
    # a second failure drops the next one; the baseline is never dropped
    (cut / "runs" / "bf16" / "run.json").unlink()
    with pytest.raises(SystemExit, match="the baseline failed"):
        so.drop_failed(src, cut, retry)


def test_speculative_numerics_rows_from_the_committed_h200_run(tmp_path):
    """Speculative decoding's numerics (2026-12-03, the Qwen2.5-VL fixture): n-gram speculation against the same server without it,
    with batch invariance on both and off on both; the draft acceptance from the speculative servers' own stats
    lines (the one without batch invariance printed none: not measured), the reader's refusal quoted; the rows go
    beside the study's rows of OUT, which are kept."""
    out = tmp_path / "so.json"
    out.write_text(json.dumps({"schema_version": 1, "rows": [{"option": "kept"}]}))
    bi = REPO / "lab" / "2026-12-03-h200-seven-variant-study" / "batchinv"
    assert so.main(["-", "--speculative-numerics", str(bi), "-o", str(out)]) == 0
    r = json.loads(out.read_text())
    assert r["rows"] == [{"option": "kept"}]
    sn = r["speculative_numerics"]
    rows = {x["variant"]: x for x in sn["rows"]}
    assert {(x["reference"], x["batch_invariant"], x["pages_compared"], x["exact_match_rate"]) for x in rows.values()} \
        == {("plain", False, 16, 1.0), ("batch_invariant", True, 16, 1.0)}
    assert rows["speculative_batch_invariant"]["spec_decode"]["accepted_tokens"] == 2073
    assert rows["speculative_batch_invariant"]["spec_decode"]["drafted_tokens"] == 2136
    assert rows["speculative"]["spec_decode"] is None
    assert "not supported for GDN_ATTN" in sn["reader_batch_invariant_refusal"] and "0 of 16" in sn["answer"]
