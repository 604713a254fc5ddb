"""A cost table built from some decode profiles, its predicted GPU ms per decode step for the
profiled recipes it was NOT built from against their measured step (the check: median |error| <= 10 %), and
what bounds every profiled variant (``quantgate.speed.explain``).

    python benchmarks/speed_table_check.py [-o benchmarks/results/speed_table_check.json]
        # the committed 2026-11-30 profile.json files (GPU time per kernel name: a weight_bytes table)
    python benchmarks/speed_table_check.py --step-profiles DIR --table-from bf16,fp8-all,w4a16-all,nvfp4-all -o OUT
        # `speed_profile` output (DIR/<variant>/c<C>.profile.json: a launch_order table), after a GPU session
    ... --step-profiles STUDY/speed --study STUDY [--check mixed,fp8-dynamic,nvfp4]
        # and each predicted speed-up against the study's served one (its repeated waves, with their interval)
    python benchmarks/speed_table_check.py --session lab/2026-12-03-h200-seven-variant-study \
        --table-from bf16,fp8-all,nvfp4-all --check mixed,fp8-dynamic,nvfp4 \
        -o benchmarks/results/speed_table_check_2026-12-03.json     # the committed 2026-12-03 H200 study

The committed mode's table comes from the bf16 and fp8-all profiles (the only two whose GEMM time splits by format:
the others list their five heaviest GEMM names only) and predicts fp8-dynamic; the plans are the committed
quantize manifests (bf16's: fp8-dynamic's modules, all BF16). It compares GPU time per step, not served tok/s.
"""

from __future__ import annotations

import argparse
import gzip
import json
import shutil
import statistics
import sys
import tarfile
import tempfile
from pathlib import Path

from quantgate.io.fileio import atomic_write_json
from quantgate.schema.speed import load_step_profile
from quantgate.schema.variant import PlanRow
from quantgate.speed.costtable import build_cost_table, table_from_profile_json
from quantgate.speed.explain import explain_step
from quantgate.speed.predict import predict_plan

SCHEMA_VERSION = 1
RESULTS = Path(__file__).resolve().parent / "results"
TARGET = 0.10  # median |error| of the prediction


def _plan(path: Path) -> list[PlanRow]:
    return [PlanRow(**r) for r in json.loads(gzip.decompress(path.read_bytes()))["plan"]["modules"]]


def committed() -> dict:
    lab = RESULTS.parents[1] / "lab"  # the two 2026-11-30 GPU sessions' committed results
    a, b = lab / "2026-11-30-h200-serving-options", lab / "2026-11-30-h200-parallel-studies"
    prof = {**json.loads(gzip.decompress((a / "profile.json.gz").read_bytes())),
            **json.loads(gzip.decompress((b / "profile.json.gz").read_bytes()))}
    plans = {"fp8-dynamic": _plan(a / "q4b-fp8-dynamic.quantgate.json.gz"),
             "fp8-all": _plan(a / "q4b-fp8-all.quantgate.json.gz"),
             "nvfp4": _plan(b / "q4b-nvfp4.quantgate.json.gz"), "mixed": _plan(b / "q4b-mixed.quantgate.json.gz")}
    plans["bf16"] = [r.model_copy(update={"format": "bf16"}) for r in plans["fp8-dynamic"]]
    built_from = ["bf16", "fp8-all"]
    table = table_from_profile_json({v: prof[v] for v in built_from}, plans,
                                    source="lab/2026-11-30-h200-serving-options/profile.json.gz")
    checks = []
    for v in prof:
        if v in built_from:
            continue
        try:
            p = predict_plan(table, plans[v], levels=[1])[0]
        except Exception as e:  # a format the table has no cells for: said, not guessed
            checks.append({"variant": v, "concurrency": 1, "predicted_ms": None, "why_not": str(e)})
            continue
        checks.append({"variant": v, "concurrency": 1, "predicted_ms": p.ms_per_step,
                       "measured_ms": prof[v]["gpu_ms_per_step"],
                       "error": p.ms_per_step / prof[v]["gpu_ms_per_step"] - 1,
                       "predicted_speedup": p.speedup,
                       "measured_speedup": prof["bf16"]["gpu_ms_per_step"] / prof[v]["gpu_ms_per_step"]})
    bounds = {v: explain_step(e["gpu_ms_per_step"], e["kernels_per_step"], e["decode_weight_bytes"],
                              e["hbm_copy_gbs"]).__dict__ for v, e in prof.items()}
    return {"attribution": table.attribution, "table_from": built_from, "checks": checks, "bounds": bounds}


def served(study: Path) -> dict[tuple[str, int], dict]:
    """A study's measured speed-ups with their intervals (summary.json, from its repeated waves), by variant and
    level: what the check compares the table's predicted speed-up with."""
    s = json.loads((study / "summary.json").read_text())
    return {(v["name"], int(c)): iv for v in s["variants"] for c, iv in (v.get("speedup_interval") or {}).items()
            if iv.get("ratio") is not None}


def phases(study: Path, variant: str, c: int) -> dict[str, float] | None:
    """The served waves' time split at ``c`` (what the decode-step table can and cannot predict):
    mean seconds per wave until every request of the wave has its first token (prefill, the vision encoder and
    queueing: ``prefill_s``) and after it (every request decoding: ``decode_s``). A wave whose requests go one after
    another (c=1) splits each request at its first token instead. From the run's speed records (``speed.jsonl``, or
    the committed ``speed-timings.jsonl.gz``); None when the study kept none."""
    d = study / "runs" / variant
    path = next((f for f in (d / "speed.jsonl", d / "speed-timings.jsonl.gz") if f.is_file()), None)
    if path is None:
        return None
    text = gzip.decompress(path.read_bytes()).decode() if path.suffix == ".gz" else path.read_text()
    waves: dict[int, list[dict]] = {}
    for line in text.splitlines():
        r = json.loads(line)
        if r["concurrency"] == c and r.get("error") is None:
            waves.setdefault(r["wave"], []).append(r)
    if not waves:
        return None
    pre, dec = [], []
    for rs in waves.values():
        t0 = min(r["start"] for r in rs)
        if c > 1:  # sent together: the batch decodes alone once the last request has its first token
            first = max(r["start"] + r["ttft_s"] for r in rs)
            pre.append(first - t0)
            dec.append(max(r["end"] for r in rs) - first)
        else:
            pre.append(sum(r["ttft_s"] for r in rs))
            dec.append(sum(r["latency_s"] - r["ttft_s"] for r in rs))
    return {"prefill_s": statistics.mean(pre), "decode_s": statistics.mean(dec), "waves": len(waves)}


def from_step_profiles(root: Path, built_from: list[str], study: Path | None = None,
                       check: list[str] | None = None) -> dict:
    """``check``: the recipes predicted (default: every profiled variant the table is not built from; a variant
    that only changes the kernels of a table recipe, like w4a16-all with Marlin everywhere, is not a recipe)."""
    profiles = [load_step_profile(p) for p in sorted(root.glob("*/c*.profile.json"))]
    table = build_cost_table([p for p in profiles if p.variant in built_from])
    base = {p.concurrency: p for p in profiles if p.variant == "bf16"}
    checks = []
    for p in profiles:
        if p.variant in built_from or (check is not None and p.variant not in check):
            continue
        pred = predict_plan(table, p.plan, levels=[p.concurrency])[0]
        b = base.get(p.concurrency)
        checks.append({"variant": p.variant, "concurrency": p.concurrency, "predicted_ms": pred.ms_per_step,
                       "measured_ms": p.gpu_ms_per_step, "error": pred.ms_per_step / p.gpu_ms_per_step - 1,
                       "predicted_speedup": pred.speedup,
                       "measured_speedup": b.gpu_ms_per_step / p.gpu_ms_per_step if b else None})
        iv = served(study).get((p.variant, p.concurrency)) if study else None
        if iv:  # the served speed-up, measured in repeated waves, against the predicted one
            checks[-1].update(served_speedup=iv["ratio"], served_low=iv.get("low"), served_high=iv.get("high"),
                              served_waves=iv["n_variant"], served_error=pred.speedup / iv["ratio"] - 1)
        mine, base_ph = (phases(study, p.variant, p.concurrency), phases(study, "bf16", p.concurrency)) if study \
            else (None, None)
        if mine and base_ph:  # the served waves split at the first token: the table predicts the decode part only
            dec = base_ph["decode_s"] / mine["decode_s"]
            checks[-1].update(served_prefill_s=mine["prefill_s"], served_decode_s=mine["decode_s"],
                              bf16_prefill_s=base_ph["prefill_s"], bf16_decode_s=base_ph["decode_s"],
                              served_decode_speedup=dec, served_prefill_speedup=base_ph["prefill_s"] / mine["prefill_s"],
                              decode_phase_error=pred.speedup / dec - 1)
    # the table itself is the study's speed/cost-table.json (or rebuilt from the profiles): not copied in here
    return {"attribution": table.attribution, "table_from": built_from, "checks": checks,
            "table_gemms": len(table.gemms), "table_formats": sorted({f for g in table.gemms for f in g.cells}),
            "table_concurrency": table.concurrency}


def _by_level(checks: list[dict], key: str) -> dict[str, float]:
    levels = sorted({c["concurrency"] for c in checks if c.get(key) is not None})
    return {str(lv): statistics.median(abs(c[key]) for c in checks if c["concurrency"] == lv and c.get(key) is not None)
            for lv in levels}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--step-profiles", type=Path, help="speed_profile output: DIR/<variant>/c<C>.profile.json")
    ap.add_argument("--table-from", default="bf16,fp8-all", help="the variants the table is built from")
    ap.add_argument("--study", type=Path, help="a study folder: its measured speed-ups (repeated waves) per level")
    ap.add_argument("--check", help="the recipes predicted, comma-separated (default: every other profiled variant)")
    ap.add_argument("--session", type=Path, help="a committed GPU session folder (lab/DATE-WHAT): its "
                    "study/speed.tar.xz and study/summary.json.gz, unpacked into a temporary folder, stand for "
                    "--step-profiles and --study")
    ap.add_argument("-o", "--out", type=Path, default=RESULTS / "speed_table_check.json")
    a = ap.parse_args(argv)
    built = [v for v in a.table_from.split(",") if v]
    check = [v for v in a.check.split(",") if v] if a.check else None
    if a.session is not None:
        tmp = Path(tempfile.mkdtemp(prefix="speed-table-check-"))
        with tarfile.open(a.session / "study" / "speed.tar.xz") as t:
            t.extractall(tmp, filter="data")  # refuses links and paths outside tmp
        (tmp / "summary.json").write_bytes(gzip.decompress((a.session / "study" / "summary.json.gz").read_bytes()))
        for f in (a.session / "study" / "runs").glob("*/speed-timings.jsonl.gz"):  # the waves' request timings
            (tmp / "runs" / f.parent.name).mkdir(parents=True, exist_ok=True)
            shutil.copy(f, tmp / "runs" / f.parent.name / f.name)
        a.step_profiles, a.study = tmp / "speed", tmp
    r = from_step_profiles(a.step_profiles, built, a.study, check) if a.step_profiles else committed()
    errs = [abs(c["error"]) for c in r["checks"] if c.get("error") is not None]
    se = [abs(c["served_error"]) for c in r["checks"] if c.get("served_error") is not None]
    recipes = {c["variant"] for c in r["checks"] if c.get("served_error") is not None}
    levels = {c["concurrency"] for c in r["checks"] if c.get("served_error") is not None}
    r = {"schema_version": SCHEMA_VERSION, **r, "median_abs_error": statistics.median(errs) if errs else None,
         "target": TARGET, "recipes_checked": len(errs),
         # None: fewer than 3 recipes checked, so the check is not measured
         "check_passes": statistics.median(errs) <= TARGET if len(errs) >= 3 else None,
         # the check as first stated: predicted vs served speed-up, >= 3 recipes at c=1 and c=32 (None: not measured)
         "served_median_abs_error": statistics.median(se) if se else None,
         "served_check_passes": statistics.median(se) <= TARGET if len(recipes) >= 3 and {1, 32} <= levels else None,
         # the same, level by level, and for the decode part of the served waves alone (``phases``)
         "served_median_abs_error_by_level": _by_level(r["checks"], "served_error"),
         "decode_phase_median_abs_error_by_level": _by_level(r["checks"], "decode_phase_error"),
         "command": "python benchmarks/speed_table_check.py " + " ".join(argv if argv is not None else sys.argv[1:])}
    atomic_write_json(a.out, r)
    for c in r["checks"]:
        if c.get("error") is None:
            print(f"{c['variant']} c={c['concurrency']}: not predicted ({c['why_not'][:120]}…)")
        else:
            print(f"{c['variant']} c={c['concurrency']}: predicted {c['predicted_ms']:.3f} ms/step, measured "
                  f"{c['measured_ms']:.3f} ({c['error']:+.1%}); speed-up {c['predicted_speedup']:.3f} predicted, "
                  f"{c['measured_speedup'] or float('nan'):.3f} measured"
                  + (f", served {c['served_speedup']:.3f} ({c['served_error']:+.1%})" if "served_error" in c else "")
                  + (f"; served decode part {c['served_decode_speedup']:.3f} ({c['decode_phase_error']:+.1%}), prefill "
                     f"part {c['served_prefill_speedup']:.3f}" if "decode_phase_error" in c else ""))
    for v, b in r.get("bounds", {}).items():
        print(f"{v}: {b['sentence']}")
    print(f"median |error| {r['median_abs_error']} over {len(errs)} recipe(s) (target <= {TARGET:.0%}, >= 3 recipes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
