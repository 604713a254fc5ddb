"""A finished study folder in a second, without a model or a server: hand-made weights, manifests and
score files, then the study's own verdict, inputs and report code (``study.verdicts``,
``reports.build_summary``/``write_reports``). For tests of the reports and the gate; the same checks on
a real demo run are in tests/e2e/test_study.py."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np

from quantgate.io.fileio import sha256_file
from quantgate.schema.scores import ScoreRow

METRICS = ("ned", "cer", "bow_f1")


def _manifest(vdir: Path, name: str, weights: bytes) -> dict:
    vdir.mkdir(parents=True)
    (vdir / "model.safetensors").write_bytes(weights)
    sha = sha256_file(vdir / "model.safetensors")
    return {"schema_version": 1, "kind": "quantgate.variant", "name": name, "source_model": "/elsewhere/model",
            "recipe": {"name": name, "source": f"{name}.yaml", "text": f"name: {name}\n", "resolved": {"name": name},
                       "llmcompressor": None},
            "plan": {"modules": [{"module": "l.q", "kind": "attention", "layer": 0, "shape": [4, 4], "params": 16,
                                  "format": "bf16"}],
                     "totals": {"per_format": {"bf16": {"modules": 1, "params": 16, "bytes": 32}}, "bf16_bytes": 32,
                                "estimated_bytes": 32, "compression": 1.0}, "warnings": []},
            "verification": {"modules_checked": 1, "formats": {"bf16": 1}, "vision_bf16": True},
            "calibration": {"pageset": None, "page_ids": [], "samples": 0, "max_seq_len": 64, "pipeline": None,
                            "text_only": None, "prompt": None},
            "inputs": {"model_weights": {"model.safetensors": sha}, "recipe_text": f"name: {name}\n",
                       "calibration_pages_sha256": None, "samples": 0, "max_seq_len": 64, "prompt": "p"},
            "packages": {"torch": "2"}, "files": {"model.safetensors": {"sha256": sha, "bytes": len(weights)}},
            "size": {"weights_bytes": len(weights), "source_weights_bytes": 2 * len(weights), "compression": 2.0},
            "wall_s": 1.0, "peak_rss_mb": 10.0, "peak_gpu_mb": None}


def _run(name: str, pages_per_s: dict[int, float], st=None) -> dict:
    from quantgate.schema.run import RunManifest

    levels = [{"concurrency": c, "n_requests": 4, "n_errors": 0, "wall_s": 1.0, "pages_per_s": p,
               "output_tokens_per_s": 10 * p, "per_request_tokens_per_s_p50": 5.0,
               "ttft_s": {"p50": 0.1, "p90": 0.2, "p99": 0.3}, "latency_s": {"p50": 1.0, "p90": 2.0, "p99": 3.0}}
              for c, p in pages_per_s.items()]
    return RunManifest(variant=f"variants/{name}", backend="transformers", pageset="pages", pageset_sha256="0" * 64,
                       split=st.split if st else "heldout", prompt=st.prompt if st else "p",
                       max_tokens=st.max_tokens if st else 8, levels=levels,
                       slo_p90_latency_s=st.slo_s if st else 10.0).model_dump()  # the gate holds a study's echo to it


def _requests(path: Path, ids: list[str], outputs: dict[int, list[str]]) -> None:
    from quantgate.io.chain import Chain
    from quantgate.schema.run import RequestRecord

    chain, lines = Chain("0" * 64), []
    for c, texts in outputs.items():
        for i, pid in enumerate(ids):
            rec = chain.link(RequestRecord(page_id=pid, concurrency=c, output=texts[i], start=1.0 + i, end=2.0 + i,
                                           latency_s=1.0, finish_reason="stop").model_dump())
            chain.advance(rec)
            lines.append(json.dumps(rec) + "\n")
    path.write_text("".join(lines))


def _speed(out: Path, name: str, st, tok_s: float) -> None:
    """A variant's speed waves — speed.jsonl chained from its run's speed anchor, as serve writes it —
    and run.json's speed levels made from them (``serve.run.speed_levels``)."""
    from quantgate.io.chain import Chain
    from quantgate.schema.run import RequestRecord, RunManifest
    from quantgate.serve.run import speed_anchor_of, speed_levels

    rdir = out / "runs" / name
    run = RunManifest.model_validate_json((rdir / "run.json").read_text())
    waves, recs, lines = st.speed_waves(), [], []
    chain = Chain(speed_anchor_of(run))
    t = 100.0
    for c in waves.levels:
        for k in range(waves.repeats):
            for i in range(waves.per_wave(c)):
                lat = 32 / (tok_s * (1 + 0.05 * ((k + i) % 3)))  # a few percent between waves
                rec = chain.link(RequestRecord(page_id=f"p{i:03d}", concurrency=c, output="x", completion_tokens=32,
                                               ttft_s=0.01, latency_s=lat, start=t, end=t + lat, finish_reason="stop",
                                               session="s0", wave=k).model_dump())
                chain.advance(rec)
                lines.append(json.dumps(rec) + "\n")
                recs.append(RequestRecord.model_validate(rec))
                t += lat
    (rdir / "speed.jsonl").write_text("".join(lines))
    run.speed = speed_levels(recs, waves)
    (rdir / "run.json").write_text(run.model_dump_json())


def _rows(ids: list[str], values: dict[str, np.ndarray], texts: list[str]) -> list[ScoreRow]:
    # NaN: the metric does not apply to the page (null in the row)
    return [ScoreRow(page_id=pid, empty=False, output_sha256=hashlib.sha256(texts[i].encode()).hexdigest(),
                     **{m: None if np.isnan(v[i]) else float(v[i]) for m, v in values.items()})
            for i, pid in enumerate(ids)]


def _family_values(ned: np.ndarray, metrics) -> dict[str, np.ndarray]:
    """A study metric beyond the three (a registered family's: omnidoc15_*, parsebench_*): read off the page's ned in
    its direction, and not applicable on every fifth page, as a family metric is on pages without its truth."""
    from quantgate.schema.metrics import METRICS as SPECS

    skip = np.arange(len(ned)) % 5 == 4
    return {m: np.where(skip, np.nan, 1 - ned if SPECS[m].higher_is_better else ned)
            for m in metrics if m not in METRICS}


def study_spec(candidates: dict[str, float], **overrides) -> dict:
    """The study YAML (as a dict) of a finished synthetic study: bf16 and the candidates."""
    return {"name": "s", "model": "/elsewhere/model", "pages": {"path": "/elsewhere/pages"},
            "variants": [{"name": "bf16", "recipe": "bf16"}] + [{"name": n, "recipe": "bf16"} for n in candidates],
            "baseline": "bf16", "concurrency": [1, 2], "metrics": list(METRICS), "resamples": 1000,
            # 40 single-page documents rule out rare failures only for a declared worst page damage
            # (0.1: 29 pages at the 0.01 margins); the default (the range, 299 pages) is tested in tests/unit/judge
            "worst_page_damage": {m: 0.1 for m in METRICS if overrides.get("margins", {}).get(m, 0.01) < 0.1},
            **overrides}


def finished_study(out: Path, candidates: dict[str, float] | None = None, *, pages: int = 40, seed: int = 0,
                   worst: dict | None = None, **overrides) -> Path:
    """Write a finished study folder at ``out``. ``candidates``: variant name -> how much worse (in ned)
    it reads on the pages it changes (0: identical outputs); the baseline's noise run changes a few
    pages by a little. ``overrides``: study fields (margins, min_pages, test, ``speed`` for speed waves, ...)."""
    from quantgate.io.scores import write_scores
    from quantgate.reports import build_summary, write_reports
    from quantgate.schema.base import parse_record
    from quantgate.study.spec import Study
    from quantgate.study.verdicts import score_file, speed_intervals, study_verdicts, verdict_inputs

    candidates = {"fp8": 0.0005, "bad": 0.2} if candidates is None else candidates
    out = Path(out)
    st = parse_record(Study, study_spec(candidates, **overrides), where="synthetic study")
    rng = np.random.default_rng(seed)
    ids = [f"p{i:03d}" for i in range(pages)]
    (out / "pages" / "images").mkdir(parents=True)
    (out / "pages" / "truth").mkdir()
    for pid in ids:  # stand-in image bytes: the gate re-hashes them against pages.jsonl, nothing decodes them
        (out / "pages" / "images" / f"{pid}.png").write_bytes(f"image of {pid}".encode())
        (out / "pages" / "truth" / f"{pid}.md").write_text(f"# {pid}\n")
    (out / "pages" / "pages.jsonl").write_text("".join(json.dumps(
        {"schema_version": 1, "id": pid, "image": f"images/{pid}.png",
         "sha256": sha256_file(out / "pages" / "images" / f"{pid}.png"), "width": 8, "height": 8,
         "source": {"file": f"{pid}.png"}, "split": "heldout", "truth": f"truth/{pid}.md",
         "truth_sha256": sha256_file(out / "pages" / "truth" / f"{pid}.md")}) + "\n" for pid in ids))
    (out / "pages" / "pageset.json").write_text(json.dumps(
        {"schema_version": 1, "kind": "quantgate.pageset", "created_by": "tests.support.study_folder", "seed": seed,
         "calibration_fraction": 0.0, "n_pages": pages, "pages_sha256": sha256_file(out / "pages" / "pages.jsonl")}))
    base = {"ned": rng.beta(1, 12, pages) * (rng.random(pages) < 0.5)}
    base["cer"], base["bow_f1"] = base["ned"] * 1.1, 1 - base["ned"]
    base |= _family_values(base["ned"], st.metrics)
    texts = [f"page {i}" for i in range(pages)]

    def shifted(by: float, share: float, tag: str):
        changed = rng.random(pages) < share if by else np.zeros(pages, bool)
        ned = np.clip(base["ned"] + changed * by * rng.uniform(0.5, 1.5, pages), 0, 1)
        return ({"ned": ned, "cer": ned * 1.1, "bow_f1": 1 - ned} | _family_values(ned, st.metrics),
                [t + (tag if c else "") for t, c in zip(texts, changed, strict=True)])

    speeds = {"bf16": {1: 1.0, 2: 1.5}} | {n: {1: 2.0 + i} for i, n in enumerate(candidates)}
    dirs = {}
    for i, name in enumerate(speeds):
        vdir = out / "variants" / name
        man = _manifest(vdir, name, bytes([i]) * (100 - 30 * i))
        (vdir / "quantgate.json").write_text(json.dumps(man))
        (out / "runs" / name).mkdir(parents=True)
        (out / "runs" / name / "run.json").write_text(json.dumps(_run(name, speeds[name], st)))
        if st.speed is not None:
            _speed(out, name, st, tok_s=20.0 * (1 + i))
        dirs[name] = vdir
    outputs = {("bf16", 1): texts}
    write_scores(out / score_file("bf16", 1), _rows(ids, base, texts))
    vals, outputs["bf16", 2] = shifted(0.002, 0.1, " (re-run)")
    write_scores(out / score_file("bf16", 2), _rows(ids, vals, outputs["bf16", 2]))
    for name, by in candidates.items():
        vals, outputs[name, 1] = shifted(by, 0.4, f" ({name})")
        write_scores(out / score_file(name, 1), _rows(ids, vals, outputs[name, 1]))
    for name in speeds:  # the records the outputs were scored from, chained as serve writes them
        _requests(out / "runs" / name / "requests.jsonl", ids, {c: t for (n, c), t in outputs.items() if n == name})
    from quantgate.io.fileio import atomic_write_json
    from quantgate.io.pageset import load_pageset
    from quantgate.schema.summary import STUDY_AS_RUN
    from quantgate.study.truthfree import truth_claims, write_bound_files

    # the truth-free bounds beside the score files, from the same outputs, as the study writes them
    write_bound_files(st, out, {k: dict(zip(ids, t, strict=True)) for k, t in outputs.items()}, list(st.metrics),
                      {pid: pid for pid in ids})
    ps = load_pageset(out / "pages")
    verdicts, _ = study_verdicts(st, out)
    atomic_write_json(out / STUDY_AS_RUN, st.model_dump())  # the study as run, as run_study writes it first
    inputs = verdict_inputs(st, out, out / "pages" / "pages.jsonl")
    if worst is None:
        from quantgate.io.scores import read_scores
        from quantgate.study.worst import worst_pages

        scores = {(n, 1): read_scores(out / score_file(n, 1)) for n in speeds}
        worst = worst_pages(st, ps, out, scores, 1)
    summary = build_summary(st, out, sha256_file(out / "pages" / "pages.jsonl"), dirs, verdicts, worst, inputs=inputs,
                            speed_intervals=speed_intervals(st, out), **truth_claims(st, ps, out)._asdict())
    write_reports(summary, out)
    return out
