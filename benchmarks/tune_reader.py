"""Items 3–4 on the bundled reader (CPU): `quantgate tune` at budgets where no uniform preset
that fits is within noise, the trials it ran, and the recommended recipes against the uniform presets on
the size-vs-`ned` plane (held-out pages, transformers serve).

    PYTHONPATH=. .venv/bin/python benchmarks/tune_reader.py        # ~30-40 min on the shared 2-core CPU

One study folder holds everything: the uniform presets are served once (`quantgate study`), then each
budget's `quantgate tune` adds its trials to the same folder, reusing the served baseline. Runs under
`nice`. Writes benchmarks/results/tune_reader.json.gz (a `trials` list: recipe, bytes, verdicts; the
Pareto comparison) and benchmarks/results/tune_reader_pareto.svg, and prints the tables."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from results_io import read_json, write_json
from sensitivity_reader import qg, reader_pages  # one CLI runner for the reader benchmarks (benchmarks/ is on sys.path)

ROOT = Path(__file__).resolve().parents[1]
READER = ROOT / "quantgate" / "assets" / "reader"
FORMATS = "fp8,nvfp4,w4a16,w2a16"
# the uniform presets (every recipe in quantgate/recipes/presets that gives one format to every kind it covers,
# fp8-all-lm-head aside: fp8-all with lm_head, which no sensitivity group covers)
PRESETS = ["fp8-dynamic", "fp8-all", "nvfp4", "nvfp4a16", "mixed", "harmful-all-nvfp4", "harmful-int2"]
BUDGETS = ["2.30MB", "2.40MB", "2.50MB", "2.58MB", "3.00MB"]
METRICS = ["ned", "cer", "bow_f1"]




def study_yaml(work: Path, pages: Path) -> Path:
    import yaml

    spec = {"name": "tune-reader", "model": str(READER), "pages": {"path": str(pages)},
            "variants": [{"name": "bf16", "recipe": "bf16"}] + [{"name": p, "recipe": p} for p in PRESETS],
            "baseline": "bf16", "calibration_samples": 16, "backend": {"name": "transformers", "device": "cpu"},
            "concurrency": [1], "noise_concurrency": 2, "max_tokens": 48, "metrics": METRICS,
            "margins": dict.fromkeys(METRICS, 0.01), "seed": 0, "resamples": 10000}
    path = work / "study.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def predicted(sens, recipe_spec: str) -> dict:
    """The additive model's prediction for any recipe: each group's KL in the format the recipe gives
    all its modules; modules the sensitivity file never quantized (kept BF16 there) are counted apart."""
    from quantgate.recipes import ModuleInfo, load_recipe, resolve

    rec = load_recipe(recipe_spec).recipe
    modules = [ModuleInfo(m.name, m.kind, m.layer, m.in_features, m.out_features) for m in sens.modules]
    plan, _ = resolve(rec, modules, sens.n_layers, where=recipe_spec)
    table, kl, outside = sens.table(), 0.0, []
    grouped = {m for g in sens.groups for m in g.modules}
    for g in sens.groups:
        fmts = {plan[m] for m in g.modules}
        if fmts == {"bf16"}:
            continue
        (f,) = fmts  # a preset gives one format to a whole layer kind
        if (g.name, f) not in table:
            return {"predicted_kl": None, "why_not": f"{f} not measured in the sensitivity file"}
        kl += table[(g.name, f)].kl_mean
    outside = sorted(n for n, f in plan.items() if f != "bf16" and n not in grouped)
    if any(f != "bf16" for f in plan.values()) and sens.baseline:
        kl += sens.baseline.kl_mean
    return {"predicted_kl": kl, "modules_outside_groups": len(outside),
            "why_not": "a lower bound: modules the sensitivity file kept BF16 are quantized too" if outside else None}


def front(points: list[dict]) -> list[dict]:
    """Points no other point dominates (bytes and ned both no larger, one smaller)."""
    return [p for p in points if not any(q["bytes"] <= p["bytes"] and q["ned"] <= p["ned"]
                                         and (q["bytes"] < p["bytes"] or q["ned"] < p["ned"]) for q in points)]


def pareto(presets: list[dict], recs: list[dict]) -> list[dict]:
    """Each recommended recipe against the presets' front: `beyond` when no preset of its size or smaller
    is as good (its ned below the front's at its size), `on` when one equals it, `behind` when one is
    better."""
    out = []
    for r in recs:
        fits = [p for p in presets if p["bytes"] <= r["bytes"]]
        best = min((p["ned"] for p in fits), default=None)
        where = "beyond" if best is None or r["ned"] < best else "on" if r["ned"] == best else "behind"
        dominated_by = [p["name"] for p in presets if p["bytes"] <= r["bytes"] and p["ned"] <= r["ned"]
                        and (p["bytes"] < r["bytes"] or p["ned"] < r["ned"])]
        out.append({**r, "front_ned_at_this_size": best, "relative_to_front": where, "dominated_by": dominated_by})
    return out


def plot(presets: list[dict], trials: list[dict], recs: list[dict], path: Path, margin: float = 0.01) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams["svg.fonttype"] = "none"  # text as text: a small file
    fig, ax = plt.subplots(figsize=(7.0, 4.2))
    fr = sorted(front(presets), key=lambda p: p["bytes"])
    xs, ys = [], []
    for p in fr:  # the front as a step: the best ned reachable at or under each size
        xs += [p["bytes"] / 1e6, p["bytes"] / 1e6]
        ys += [ys[-1] if ys else p["ned"], p["ned"]]
    xs.append(max(p["bytes"] for p in presets) / 1e6 * 1.02)
    ys.append(ys[-1])
    ax.plot(xs, ys, color="tab:gray", lw=1, ls="--", label="uniform presets' Pareto front")
    bf16 = next(p["ned"] for p in presets if p["name"] == "bf16")
    ax.axhline(bf16 + margin, color="tab:red", lw=0.7, ls=":", label=f"BF16 + margin ({margin:g})")
    spots: dict[tuple, list[str]] = {}
    for p in presets:  # presets at the same point share one label
        spots.setdefault((round(p["bytes"] / 1e6, 2), round(p["ned"], 4)), []).append(p["name"])
    for (x, y), names in spots.items():
        ax.plot(x, y, "s", color="tab:gray")
        ax.annotate(", ".join(names), (x, y), textcoords="offset points", xytext=(3, 5), fontsize=6.5, rotation=30)
    chosen = {r["variant"] for r in recs}
    for t in trials:
        if t["variant"] not in chosen:
            ax.plot(t["weights_bytes"] / 1e6, t["ned"], "x", color="tab:red", ms=7)
            ax.annotate(f"{t['budget']} t{t['trial']}", (t["weights_bytes"] / 1e6, t["ned"]), textcoords="offset points",
                        xytext=(5, -3), fontsize=6, color="tab:red")
    for k, r in enumerate(recs):
        ax.plot(r["bytes"] / 1e6, r["ned"], "o", color="tab:blue", ms=7)
        ax.annotate(f"{r['budget']} t{r['trials_to_find']}", (r["bytes"] / 1e6, r["ned"]), textcoords="offset points",
                    xytext=(-8, -12 - 8 * (k % 3)), fontsize=6.5, color="tab:blue")
    ax.plot([], [], "o", color="tab:blue", label="tune's recipe (all verdicts within noise)")
    ax.plot([], [], "x", color="tab:red", label="a tune trial that failed")
    ax.set_yscale("symlog", linthresh=0.01, linscale=1.5)
    ax.set_ylim(-0.004, 0.4)
    ax.set_xlabel("weights (MB, safetensors files)")
    ax.set_ylabel("held-out ned (lower is better; linear below 0.01)")
    ax.set_title(f"bundled reader, {trials[0]['pages'] if trials else '?'} held-out pages, transformers serve, CPU",
                 fontsize=8)
    ax.legend(fontsize=6.5, loc="upper right")
    fig.savefig(path, format="svg", bbox_inches="tight", metadata={"Date": None})
    plt.close(fig)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", type=Path, default=Path("/tmp/qg-tune-bench"))
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks/results/tune_reader.json.gz")
    ap.add_argument("--budgets", default=",".join(BUDGETS))
    ap.add_argument("--max-trials", type=int, default=4)
    ap.add_argument("--plot-only", action="store_true", help="redraw the SVG from the committed JSON")
    a = ap.parse_args()
    if a.plot_only:
        d = read_json(a.out)
        plot(d["presets"]["variants"], d["trials"], d["pareto"]["recommended"], a.out.with_name("tune_reader_pareto.svg"))
        return
    os.nice(10)  # the CPU is shared
    sys.path.insert(0, str(ROOT))
    from quantgate.sensitivity import load_sensitivity
    from quantgate.sensitivity.budget import human
    from quantgate.tune.loop import default_name

    a.work.mkdir(parents=True, exist_ok=True)
    pages, sens_path, out = reader_pages(a.work), a.work / "sens.json", a.work / "study"
    result: dict = {"machine": {"cpus": os.cpu_count()},
                    "pages": "quantgate pages synth --profile reader --n 60 --seed 7 --calibration-fraction 0.4 (16 "
                             "calibration pages measured by sensitivity; the held-out split judged)"}
    # 1. the sensitivity table, vision included (the reader's INT2 damage sits in the projector)
    timing = None
    if not sens_path.is_file():  # made once; its own timings say how long it took
        _, timing = qg("sensitivity", READER, "--calibration", pages, "--formats", FORMATS, "--allow-vision",
                       "-o", sens_path)
    sens = load_sensitivity(sens_path)
    result["sensitivity"] = {"command": f"quantgate sensitivity READER --calibration PAGES --formats {FORMATS} "
                                        "--allow-vision -o sens.json", "timing": timing, "groups": len(sens.groups),
                             "note": "timed here only when made by this run; its time is measured by "
                                     "benchmarks/sensitivity_reader.py (sensitivity_vision)"}
    # 2. the uniform presets, served once into the study folder every tune then adds to
    study = study_yaml(a.work, pages)
    _, timing = qg("study", study, "-o", out)
    s = json.loads((out / "summary.json").read_text())
    sizes = {v["name"]: v["weights_bytes"] for v in s["variants"]}
    bf16_ned = next(v["baseline_mean"] for v in s["verdicts"] if v["metric"] == "ned")
    presets = [{"name": "bf16", "bytes": sizes["bf16"], "ned": bf16_ned, "verdicts": {}}]
    for p in PRESETS:
        vs = [v for v in s["verdicts"] if v["variant"] == p]
        presets.append({"name": p, "bytes": sizes[p], "ned": next(v["candidate_mean"] for v in vs if v["metric"] == "ned"),
                        "verdicts": {v["metric"]: v["verdict"] for v in vs},
                        "delta_ned": next(v["delta"] for v in vs if v["metric"] == "ned"),
                        "pages_changed": next(v.get("pages_changed") for v in vs if v["metric"] == "ned"),
                        **predicted(sens, p)})
    result["presets"] = {"timing": timing, "variants": presets}
    for p in presets:
        print(f"{p['name']:<18} {human(p['bytes']):>12}  ned {p['ned']:.4f}  {p['verdicts']}")
    # 3. tune at each budget, into the same folder
    result["budgets"], trials, recs = [], [], []
    for b in a.budgets.split(","):
        p, timing = qg("tune", study, "--sensitivity", sens_path, "--budget", b, "--max-trials", a.max_trials,
                       "-o", out, check=False)
        tune_json = out / "tune" / default_name(_bytes(b), None, None) / "tune.json"
        if p.returncode not in (0, 1, 2) or not tune_json.is_file() or "quantgate tune: error:" in p.stderr:
            sys.exit(f"quantgate tune --budget {b} failed ({p.returncode}):\n{p.stderr[-3000:]}")
        print(p.stdout)
        tf = json.loads(tune_json.read_text())
        fits = sorted(x["name"] for x in presets if x["bytes"] <= _bytes(b))
        fits_ok = [x["name"] for x in presets if x["bytes"] <= _bytes(b) and set(x["verdicts"].values()) == {"within_noise"}]
        entry = {"budget": b, "budget_bytes": _bytes(b), "command": f"quantgate tune study.yaml --sensitivity sens.json "
                 f"--budget {b} --max-trials {a.max_trials} -o study", "exit_code": p.returncode, "timing": timing,
                 "status": tf["status"], "chosen_trial": tf["chosen"], "message": tf["message"],
                 "presets_at_or_under": fits, "presets_at_or_under_within_noise": fits_ok, "trials": len(tf["trials"])}
        result["budgets"].append(entry)
        for t in tf["trials"]:
            m = {v["metric"]: v for v in t["verdicts"]}
            row = {"budget": b, "trial": t["trial"], "variant": t["variant"], "recipe": t["recipe"],
                   "recipe_sha256": t["recipe_sha256"], "recipe_text": (out / t["recipe"]).read_text(),
                   "assignment": t["assignment"], "bytes": t["bytes"], "weights_bytes": t["weights_bytes"],
                   "effective_bits": round(t["effective_bits"], 3), "modelled_speedup": round(t["modelled_speedup"], 3),
                   "predicted_kl": t["predicted_kl"], "pages": m["ned"]["n"], "ned": m["ned"]["candidate_mean"],
                   "pages_changed": m["ned"]["pages_changed"],
                   "verdicts": {k: {"verdict": v["verdict"], "reason": v["reason"], "delta": v["delta"],
                                    "ci90": [v["ci_low"], v["ci_high"]], "margin": v["margin"]} for k, v in m.items()},
                   "outcome": t["outcome"], "action": t["action"]["kind"], "action_text": t["action"]["text"],
                   "wall_s": t["wall_s"]}
            trials.append(row)
            if t["trial"] == tf["chosen"]:
                recs.append({"budget": b, "variant": t["variant"], "bytes": t["weights_bytes"], "ned": row["ned"],
                             "predicted_payload_bytes": t["bytes"], "trials_to_find": t["trial"]})
        print(f"{b}: {tf['status']}: {tf['message']}; presets at or under: {fits} (within noise: {fits_ok or 'none'})")
    result["trials"] = trials
    result["pareto"] = {"plane": "weights bytes (safetensors files) vs held-out ned (mean over pages, lower is better)",
                        "preset_front": [p["name"] for p in sorted(front(presets), key=lambda p: p["bytes"])],
                        "recommended": pareto(presets, recs)}
    for r in result["pareto"]["recommended"]:
        print(f"{r['budget']}: {r['variant']} {human(r['bytes'])} ned {r['ned']:.4f}: {r['relative_to_front']} the "
              f"presets' front (best preset ned at or under this size: {r['front_ned_at_this_size']})")
    plot(presets, trials, recs, a.out.with_name("tune_reader_pareto.svg"))
    result["report"] = "the study folder's report.md/html (not committed) carries the same trials table and heat map"
    a.out.parent.mkdir(parents=True, exist_ok=True)
    write_json(a.out, result, allow_nan=False)
    print(f"wrote {a.out} and {a.out.with_name('tune_reader_pareto.svg')}")


def _bytes(text: str) -> int:
    from quantgate.sensitivity.budget import parse_size

    return parse_size(text)


if __name__ == "__main__":
    main()
