"""Serving options as variants: reads a finished ``quantgate study`` whose variants are the same
weights served with and without a vLLM option (lab/2026-12-03-h200-session-scripts/session/studies/serving_options.yaml) and writes
one row per option: the per-page exact-match rate of the greedy text against the same weights without the
option (at every concurrency level, and the option's own c=1 vs c=32), the pages that changed with short
diffs, the study's verdicts (vs the baseline), the speed at each level and its ratio to the reference, the
n-gram draft acceptance rate from the server log, and whether the GPU was shared while it ran.

A variant's reference is the first variant with the same recipe and no ``server_args`` (same weights, no
option; checked by the weight fingerprint in run.json). A variant with a recipe other than the baseline's gets
a row against the baseline too (nvfp4 vs bf16, and nvfp4 through emulation vs bf16). A study cut short still
gives rows for what it served; missing parts are ``null`` ("not measured").

    python benchmarks/serving_options.py STUDY_DIR [-o serving_options.json] [--session-results R]
    python benchmarks/serving_options.py STUDY_DIR --drop-failed STUDY.yaml --retry-yaml NEW.yaml
    python benchmarks/serving_options.py - --speculative-numerics lab/2026-12-03-h200-seven-variant-study/batchinv
        # speculative decoding with and without batch invariance, beside the rows (2026-12-03)

``--session-results``: the GPU session's results folder (session.json, gpu0/status.jsonl), to name the other
job's steps that ran while each variant was served (``contended``). ``--drop-failed``: after the study stopped
on a server error (exit 4), the variant whose server failed is recorded (its log's last lines) in
STUDY_DIR/dropped_variants.json and the study is written again without it, to be resumed into the same folder;
its rows then say it was not served and why.
"""

from __future__ import annotations

import argparse
import difflib
import json
import re
import sys
from pathlib import Path

import pandas as pd

from quantgate.io.fileio import atomic_write_json
from quantgate.serve.run import load_records

SCHEMA_VERSION = 1
DROPPED = "dropped_variants.json"
ERROR_LINE = re.compile(r"Error|error:|refus|not supported", re.I)
N_EXAMPLES = 3
CONTEXT = 12  # characters of unchanged text either side of a diff example
# vLLM 0.26's periodic spec-decode stats line (vllm/v1/spec_decode/metrics.py:120-135); counters reset per line
SPEC_LINE = re.compile(r"SpecDecoding metrics: Mean acceptance length: ([\d.]+|nan), .*?Accepted: (\d+) tokens, "
                       r"Drafted: (\d+) tokens, Per-position acceptance rate: ([\d., ]*?), Avg Draft acceptance "
                       r"rate: ([\d.]+|nan)%")


def spec_acceptance(log_text: str) -> dict | None:
    """Draft acceptance over the whole log: the sum of accepted draft tokens over the sum drafted, across every
    stats line (each counts only its own interval). None when the log has no such line (no speculation)."""
    lines = SPEC_LINE.findall(log_text)
    if not lines:
        return None
    accepted = sum(int(m[1]) for m in lines)
    drafted = sum(int(m[2]) for m in lines)
    return {"accepted_tokens": accepted, "drafted_tokens": drafted, "stats_lines": len(lines),
            "acceptance_rate": accepted / drafted if drafted else None}


def short_diff(ref: str, new: str, context: int = CONTEXT) -> str:
    """The first differing span as ``…ctx[ref → new]ctx…`` (difflib's opcodes)."""
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, ref, new, autojunk=False).get_opcodes():
        if tag != "equal":
            return (f"{ref[max(0, i1 - context):i1]!s}[{ref[i1:i2]!r} → {new[j1:j2]!r}]{ref[i2:i2 + context]!s}"
                    .replace("\n", "⏎"))
    return ""


def outputs(run_dir: Path) -> dict[int, dict[str, str]]:
    """Greedy text per concurrency level and page, from requests.jsonl (the last record of each page; failed
    requests left out)."""
    by_c: dict[int, dict[str, str]] = {}
    for r in load_records(run_dir):
        if r.error is None and r.output is not None:
            by_c.setdefault(r.concurrency, {})[r.page_id] = r.output
    return by_c


def exact_match(ref: dict[str, str], new: dict[str, str]) -> dict:
    """Pages both served, how many are byte-identical, the rate, and a few changed pages with diffs."""
    common = sorted(set(ref) & set(new))
    changed = [p for p in common if ref[p] != new[p]]
    return {"pages_compared": len(common), "pages_identical": len(common) - len(changed),
            "exact_match_rate": (len(common) - len(changed)) / len(common) if common else None,
            "pages_changed": changed,
            "examples": [{"page_id": p, "diff": short_diff(ref[p], new[p])} for p in changed[:N_EXAMPLES]]}


def option_label(args: list[str]) -> str:
    """A short name for a variant's server arguments."""
    parts, i = [], 0
    while i < len(args):
        a, val = args[i], None
        if "=" in a and a.startswith("--"):
            a, val = a.split("=", 1)
        elif i + 1 < len(args) and not args[i + 1].startswith("--"):
            val, i = args[i + 1], i + 1
        if a == "--speculative-config" and val:
            cfg = json.loads(val)
            parts.append(f"speculative decoding {cfg.get('method')} k={cfg.get('num_speculative_tokens')}")
        elif a == "--kv-cache-dtype":
            parts.append(f"KV cache {val}")
        elif a == "--linear-backend":
            parts.append(f"linear backend {val}")
        else:
            parts.append(a if val is None else f"{a} {val}")
        i += 1
    return ", ".join(parts)


def pairs(study: dict) -> list[dict]:
    """(option, variant, reference) rows: each variant with server_args against the same recipe without them;
    each variant whose recipe differs from the baseline's against the baseline."""
    vs = study["variants"]
    base = next(v for v in vs if v["name"] == study["baseline"])
    plain = {}
    for v in vs:
        if not v.get("server_args"):
            plain.setdefault(v["recipe"], v["name"])
    rows = []
    for v in vs:
        if v["name"] == base["name"]:
            continue
        args = v.get("server_args") or []
        if args and plain.get(v["recipe"]) not in (None, v["name"]):
            rows.append({"option": option_label(args), "variant": v["name"], "reference": plain[v["recipe"]],
                         "same_weights_by_recipe": True})
        if v["recipe"] != base["recipe"]:
            label = f"weights {v['recipe']}" + (f", {option_label(args)}" if args else "")
            rows.append({"option": label, "variant": v["name"], "reference": base["name"],
                         "same_weights_by_recipe": False})
    return rows


def _verdicts(summary: dict | None, variant: str) -> dict[str, str]:
    if not summary:
        return {}
    return {v["metric"]: v["verdict"] for v in summary.get("verdicts", []) if v["variant"] == variant}


def _levels(run: dict | None) -> dict[int, dict]:
    return {lv["concurrency"]: lv for lv in (run or {}).get("levels", [])}


def _window(run_dir: Path) -> tuple[float, float] | None:
    recs = load_records(run_dir)
    return (min(r.start for r in recs), max(r.end for r in recs)) if recs else None


def other_steps(session_results: Path | None, window: tuple[float, float] | None) -> list[str] | None:
    """The other job's (gpu0) steps that overlapped ``window``, with the ones still running when this ran."""
    if session_results is None or window is None:
        return None
    status = session_results / "gpu0" / "status.jsonl"
    found = []
    if status.is_file():
        for line in status.read_text().splitlines():
            rec = json.loads(line)
            if rec.get("status") == "skipped":
                continue
            t0 = rec.get("started", 0.0)
            if t0 < window[1] and t0 + (rec.get("wall_s") or 0.0) > window[0]:
                found.append(rec["step"])
    running = status.with_name(status.name + ".running")
    if running.is_dir():
        found += [f"{p.name} (running)" for p in sorted(running.iterdir())]
    return found


def _read(path: Path) -> dict | None:
    return json.loads(path.read_text("utf-8")) if path.is_file() else None


def drop_failed(study_yaml: Path, study_dir: Path, out_yaml: Path) -> str:
    """The first variant, in serving order, without every level in its run.json is where the study stopped: record
    it with its server log's last lines in STUDY_DIR/dropped_variants.json and write the study again without it
    (model and pages made absolute, so NEW.yaml can live anywhere). Returns its name."""
    import yaml

    from quantgate.io.fileio import atomic_write_text
    from quantgate.study.spec import resolve_path

    spec = yaml.safe_load(study_yaml.read_text("utf-8"))
    levels = set(spec.get("concurrency") or [1, 8])
    failed = next((v for v in spec["variants"]
                   if not levels <= set(_levels(_read(study_dir / "runs" / v["name"] / "run.json")))), None)
    if failed is None or failed["name"] == spec.get("baseline", "bf16"):
        raise SystemExit(f"{study_dir}: no variant to drop ({'the baseline failed' if failed else 'all served'})")
    log = study_dir / "runs" / failed["name"] / "server.log"
    tail = log.read_text("utf-8", "replace").splitlines()[-15:] if log.is_file() else []
    errors = [ln for ln in tail if ERROR_LINE.search(ln)]
    dropped = (_read(study_dir / DROPPED) or []) + [{**failed, "error_line": errors[-1] if errors else None,
                                                      "log_tail": tail}]
    atomic_write_json(study_dir / DROPPED, dropped)
    base = study_yaml.resolve().parent
    spec["variants"] = [v for v in spec["variants"] if v["name"] != failed["name"]]
    spec["model"] = str(resolve_path(base, spec["model"]).resolve())
    if spec.get("pages", {}).get("path"):
        spec["pages"]["path"] = str(resolve_path(base, spec["pages"]["path"]).resolve())
    spec.pop("output", None)
    atomic_write_text(out_yaml, yaml.safe_dump(spec, sort_keys=False))
    return failed["name"]


def build(study_dir: Path, session_results: Path | None = None) -> dict:
    study = _read(study_dir / "study.json")
    if study is None:
        raise SystemExit(f"{study_dir}: no study.json: not a quantgate study folder")
    dropped = {d["name"]: d for d in _read(study_dir / DROPPED) or []}
    # a variant dropped after its server failed is not in the resumed study's study.json: its rows say why
    study = {**study, "variants": [*study["variants"], *(
        {k: d[k] for k in ("name", "recipe", "server_args") if k in d} for d in dropped.values())]}
    summary = _read(study_dir / "summary.json")
    session = _read(session_results / "session.json") if session_results else None
    runs = {v["name"]: _read(study_dir / "runs" / v["name"] / "run.json") for v in study["variants"]}
    outs = {v["name"]: outputs(study_dir / "runs" / v["name"]) for v in study["variants"]}
    levels = sorted(set(study["concurrency"]))
    c0, c_hi = levels[0], levels[-1]
    rows = []
    for p in pairs(study):
        v, ref = p["variant"], p["reference"]
        row = dict(p)
        fp_v, fp_r = ((runs[n] or {}).get("variant_fingerprint") for n in (v, ref))
        row["same_weights"] = (fp_v == fp_r) if fp_v and fp_r else None
        per_c = {c: exact_match(outs[ref].get(c, {}), outs[v].get(c, {})) for c in levels}
        row["exact_match_rate"] = per_c[c0]["exact_match_rate"]
        row["exact_match"] = {f"c{c}": m for c, m in per_c.items()}
        for key, name in (("within_variant", v), ("within_reference", ref)):  # c=lo vs c=hi on one server
            m = exact_match(outs[name].get(c0, {}), outs[name].get(c_hi, {}))
            row[key] = {"levels": [c0, c_hi], "pages_compared": m["pages_compared"],
                        "exact_match_rate": m["exact_match_rate"]}
        verdicts = {} if v in dropped else _verdicts(summary, v)  # none for a variant the study no longer has
        if v in dropped:
            row["not_served"] = {"error_line": dropped[v].get("error_line"), "log_tail": dropped[v].get("log_tail")}
        row["verdicts_vs"] = study["baseline"]
        row["verdicts"] = verdicts
        kinds = set(verdicts.values())
        row["verdict"] = (kinds.pop() if len(kinds) == 1 else
                          "; ".join(f"{m}: {x}" for m, x in verdicts.items()) if verdicts else
                          "not served: its server failed" if v in dropped else None)
        lv, lr = _levels(runs[v]), _levels(runs[ref])
        row["speed"] = {}
        for c in levels:
            a, b = lv.get(c), lr.get(c)
            if a is None:
                continue
            s = {"pages_per_s": a["pages_per_s"], "output_tokens_per_s": a["output_tokens_per_s"],
                 "latency_p90_s": a["latency_s"].get("p90"), "ttft_p90_s": a["ttft_s"].get("p90")}
            if b is not None and b["output_tokens_per_s"]:
                s["tokens_per_s_ratio_to_reference"] = a["output_tokens_per_s"] / b["output_tokens_per_s"]
                s["pages_per_s_ratio_to_reference"] = a["pages_per_s"] / b["pages_per_s"]
            row["speed"][f"c{c}"] = s
        log = study_dir / "runs" / v / "server.log"
        row["spec_decode"] = spec_acceptance(log.read_text("utf-8", "replace")) if log.is_file() else None
        eng = (runs[v] or {}).get("engine") or {}
        row["engine"] = {k: eng.get(k) for k in ("speculative", "kv_cache_dtype", "async_scheduling",
                                                  "compile_start", "enforce_eager")}
        row["kernels"] = (runs[v] or {}).get("kernels") or {}
        one = bool(session and session.get("one_gpu"))
        row["contended"] = {"one_gpu_shared_with_gpu0": one if session else None,
                            "note": ("the GPU was shared with the session's other job (gpu0): speeds are contended"
                                     if one else "not shared" if session else "not recorded"),
                            "gpu0_steps_overlapping": other_steps(session_results,
                                                                  _window(study_dir / "runs" / v))}
        rows.append(row)
    return {"schema_version": SCHEMA_VERSION, "kind": "quantgate.serving_options", "study": study["name"],
            "study_dir": study_dir.name, "baseline": study["baseline"], "levels": levels,  # a name: results move
            "max_tokens": study.get("max_tokens"), "pages_limit": study.get("limit"),
            "complete": bool(summary and summary.get("complete")), "session": session, "rows": rows}


def speculative_numerics(bi_dir: Path) -> dict:
    """"is the speculative decoding lossy?", apart from numerics: batch_invariance.py
    ``--speculative``'s result (``bi_dir/batch_invariance.json`` and its servers' logs, ``<server>.server.log.gz`` or
    ``<server>/server.log``) as rows beside the study's: speculative vs plain greedy tokens at c=1, without and with
    ``VLLM_BATCH_INVARIANT=1`` on both, with the draft acceptance of each speculative server."""
    import gzip

    bi = json.loads((bi_dir / "batch_invariance.json").read_text())
    spec = bi.get("speculative") or {}

    def log(server: str) -> str | None:
        for f in (bi_dir / f"{server}.server.log.gz", bi_dir / server / "server.log"):
            if f.is_file():
                raw = f.read_bytes()
                return (gzip.decompress(raw) if f.suffix == ".gz" else raw).decode("utf-8", "replace")
        return None

    rows = []
    for key, server, ref, invariant in (("without_batch_invariance", "speculative", "plain", False),
                                        ("with_batch_invariance", "speculative_batch_invariant", "batch_invariant", True)):
        cmp, text = spec.get(key) or {}, log(server)
        rows.append({"option": f"speculative decoding {(spec.get('config') or {}).get('method')} "
                               f"k={(spec.get('config') or {}).get('num_speculative_tokens')}",
                     "variant": server, "reference": ref, "batch_invariant": invariant, "model": bi.get("model"),
                     "concurrency": 1, "pages_compared": cmp.get("pages"), "exact_match_rate": cmp.get("identical_rate"),
                     "pages_changed": sorted(cmp.get("first_difference") or {}),
                     "spec_decode": spec_acceptance(text) if text else None,
                     "refused": (bi.get("servers", {}).get(server) or {}).get("error_line")})
    reader = bi.get("servers", {}).get("reader_gdn_batch_invariant") or {}
    return {"source": str(bi_dir), "config": spec.get("config"), "rows": rows, "answer": spec.get("answer"),
            "reader_batch_invariant_refusal": reader.get("error_line")}


def table(result: dict) -> pd.DataFrame:
    lv = result["levels"]
    c0, hi = f"c{lv[0]}", f"c{lv[-1]}"

    def pct(x):
        return None if x is None else round(100 * x, 1)

    recs = []
    for r in result["rows"]:
        sp = r["speed"]
        recs.append({
            "option": r["option"], "variant": r["variant"], "vs": r["reference"],
            f"exact {c0} %": pct(r["exact_match"][c0]["exact_match_rate"]),
            f"exact {hi} %": pct(r["exact_match"][hi]["exact_match_rate"]),
            f"self {c0}/{hi} %": pct(r["within_variant"]["exact_match_rate"]),
            "changed": len(r["exact_match"][c0]["pages_changed"]),
            "verdict": r["verdict"],
            f"tok/s {c0}": sp.get(c0, {}).get("output_tokens_per_s"),
            f"x {c0}": sp.get(c0, {}).get("tokens_per_s_ratio_to_reference"),
            f"tok/s {hi}": sp.get(hi, {}).get("output_tokens_per_s"),
            f"x {hi}": sp.get(hi, {}).get("tokens_per_s_ratio_to_reference"),
            f"p90 {hi} s": sp.get(hi, {}).get("latency_p90_s"),
            "accept %": pct((r["spec_decode"] or {}).get("acceptance_rate")),
        })
    return pd.DataFrame(recs)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("study_dir", type=Path)
    ap.add_argument("-o", "--out", type=Path, default=Path("benchmarks/results/serving_options.json"))
    ap.add_argument("--session-results", type=Path, default=None)
    ap.add_argument("--drop-failed", type=Path, metavar="STUDY_YAML", default=None)
    ap.add_argument("--retry-yaml", type=Path, default=None)
    ap.add_argument("--speculative-numerics", type=Path, metavar="BI_DIR", default=None,
                    help="add batch_invariance.py --speculative's result (BI_DIR) to OUT as 'speculative_numerics', "
                         "keeping OUT's rows (STUDY_DIR is then not read)")
    a = ap.parse_args(argv)
    if a.speculative_numerics:
        result = json.loads(a.out.read_text()) if a.out.is_file() else {"schema_version": SCHEMA_VERSION, "rows": []}
        result["speculative_numerics"] = speculative_numerics(a.speculative_numerics)
        atomic_write_json(a.out, result)
        for r in result["speculative_numerics"]["rows"]:
            print(f"{r['option']} vs {r['reference']} (batch invariant: {r['batch_invariant']}): "
                  f"{r['exact_match_rate']} of {r['pages_compared']} pages identical at c=1, draft acceptance "
                  f"{(r['spec_decode'] or {}).get('acceptance_rate')}")
        print(result["speculative_numerics"]["answer"])
        return 0
    if a.drop_failed:
        if not a.retry_yaml:
            ap.error("--drop-failed needs --retry-yaml")
        print(f"dropped {drop_failed(a.drop_failed, a.study_dir, a.retry_yaml)}; study without it: {a.retry_yaml}")
        return 0
    result = build(a.study_dir, a.session_results)
    atomic_write_json(a.out, result)
    with pd.option_context("display.width", 200, "display.max_columns", None, "display.precision", 3):
        print(table(result).to_string(index=False))
    for r in result["rows"]:
        for ex in r["exact_match"][f"c{result['levels'][0]}"]["examples"]:
            print(f"  {r['variant']} vs {r['reference']} {ex['page_id']}: {ex['diff']}")
    print(f"wrote {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
