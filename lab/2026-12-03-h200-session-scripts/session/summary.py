"""The session's key results in a few screens (collect.sh prints it; the run tool returns the last 12,000
characters of a command's output): start seconds, speed per level, single-stream ratios against the bound,
per-step kernel classes, the sensitivity run's wall time, batch invariance, vLLM numerics. Reads whatever
JSON exists under RESULTS; a missing file is one line saying so.

    python lab/2026-12-03-h200-session-scripts/session/summary.py RESULTS
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def _load(p: Path):
    try:
        return json.loads(p.read_text())
    except (OSError, ValueError):
        return None


def _f(x, fmt: str = ".1f") -> str:
    return "-" if x is None else format(x, fmt)


def speed_lines(speed: dict) -> list[str]:
    out = [f"HBM copy {speed.get('hbm_copy_gbs')} GB/s; layout {json.dumps(speed.get('layout', {}))[:300]}"]
    for v, starts in speed.get("starts", {}).items():
        out.append(f"  starts {v:<12} " + "; ".join(f"{_f(s.get('start_s'), '.0f')} s {s.get('compile_start')} "
                                                    f"({s.get('kind')})" for s in starts))
    for v, e in speed.get("variants", {}).items():
        lv = " | ".join(f"c{x['concurrency']}: {_f(x.get('output_tokens_per_s'), '.0f')} tok/s, "
                        f"{_f(x.get('per_request_tokens_per_s_p50'))}/req, err {x.get('n_errors')}" for x in e["levels"])
        out.append(f"  {v:<12} {lv}; of bound at c1 {_f(e.get('roofline_fraction_c1'), '.0%')}")
    for k, r in speed.get("single_stream_ratios", {}).items():
        out.append(f"  {k}: c1 {_f(r.get('measured_c1'), '.3f')}x, weight-bytes bound {_f(r.get('weight_bytes_bound'), '.3f')}x")
    for k, e in speed.get("errors", {}).items():
        out.append(f"  ERROR {k}: {str(e)[-300:]}")
    for k, e in speed.get("skipped", {}).items():
        out.append(f"  skipped {k}: {e}")
    return out


def profile_lines(prof: dict) -> list[str]:
    out = []
    for v, e in prof.items():
        cls = ", ".join(f"{c} {x['ms_per_step']:.3f}" for c, x in e.get("classes", {}).items())
        out.append(f"  {v}: {e.get('decode_steps')} steps, {_f(e.get('gpu_ms_per_step'), '.3f')} GPU ms/step "
                   f"(span {_f(e.get('span_ms_per_step'), '.3f')}): {cls}")
    return out


def serving_lines(so: dict) -> list[str]:
    lv = [f"c{c}" for c in so.get("levels", [])]
    out = [f"  study complete {so.get('complete')}; levels {lv}; session {json.dumps(so.get('session'))}"]
    for r in so.get("rows", []):
        em = " ".join(f"{c} {_f((r['exact_match'].get(c) or {}).get('exact_match_rate'), '.1%')}" for c in lv)
        sp = " ".join(f"{c} {_f(r['speed'].get(c, {}).get('output_tokens_per_s'), '.0f')} tok/s "
                      f"x{_f(r['speed'].get(c, {}).get('tokens_per_s_ratio_to_reference'), '.2f')}" for c in lv)
        acc = (r.get("spec_decode") or {}).get("acceptance_rate")
        out.append(f"  {r['option']:<34} {r['variant']} vs {r['reference']} (same weights {r.get('same_weights')}): "
                   f"exact {em}; {r.get('verdict')}; {sp}" + (f"; accept {_f(acc, '.1%')}" if acc is not None else ""))
        out += [f"      {e['page_id']}: {e['diff'][:100]}" for e in (r['exact_match'].get(lv[0]) or {}).get("examples", [])]
        if r.get("not_served"):
            out.append(f"      not served: {str(r['not_served'].get('error_line'))[-200:]}")
    return out


def main(argv: list[str] | None = None) -> int:
    root = Path((argv or sys.argv[1:])[0])
    g0, g1 = root / "gpu0", root / "gpu1"
    speed = _load(g0 / "speed" / "speed.json")
    print("== speed (gpu0)")
    print("\n".join(speed_lines(speed)) if speed else "  no speed.json yet")
    prof = _load(g0 / "speed" / "profile.json")
    print("== profile (ms per decode step per class)")
    print("\n".join(profile_lines(prof)) if prof else "  no profile.json yet")
    sens = _load(g0 / "sensitivity" / "sensitivity.json")
    recs = g0 / "sensitivity" / "sensitivity.json.records.jsonl"
    n = sum(1 for _ in recs.open()) - 1 if recs.is_file() else 0
    print("== sensitivity (gpu0)")
    if sens:
        print(f"  timings {json.dumps(sens.get('timings'))[:600]}")
    else:
        print(f"  no sensitivity.json; {max(n, 0)} progress record(s)")
    bi = _load(g0 / "batchinv" / "batch_invariance.json") or _load(g1 / "batchinv" / "batch_invariance.json")
    print("== batch invariance")
    if bi:
        print(f"  comparisons {json.dumps({k: {kk: {x: vv.get(x) for x in ('pages', 'identical', 'identical_rate')} for kk, vv in v.items()} if isinstance(v, dict) and all(isinstance(vv, dict) for vv in v.values()) else v for k, v in bi.get('comparisons', {}).items()})[:1200]}")
        print(f"  speed cost {json.dumps(bi.get('speed_cost'))[:400]}")
        r = bi.get("servers", {}).get("reader_gdn_batch_invariant", {})
        print(f"  reader with VLLM_BATCH_INVARIANT=1: started {r.get('started')}, line: {r.get('error_line')}")
    else:
        print("  no batch_invariance.json")
    num = _load(g1 / "vllm_numerics.json")
    print("== vLLM numerics (gpu1)")
    for row in (num or {}).get("table", []) or ["  no vllm_numerics.json"]:
        print(f"  {row}")
    so = _load(g1 / "serving_options.json")
    print("== serving options (gpu1)")
    print("\n".join(serving_lines(so)) if so else "  no serving_options.json")
    studies = sorted((g1 / "studies").glob("*/summary.json")) if (g1 / "studies").is_dir() else []
    print(f"== studies (gpu1): {len(studies)} summary.json")
    for s in studies:
        d = _load(s) or {}
        tb = d.get("time_budget") or {}
        verdicts = sorted({v["verdict"] for v in d.get("verdicts") or []})
        print(f"  {s.parent.name}: complete {d.get('complete')}, verdicts {verdicts}, wall {tb.get('wall_s')} s, "
              f"starts {tb.get('engine_start_s')} s, generation {tb.get('generation_s')} s, "
              f"overhead {tb.get('overhead_share')}")
    ps = _load(g1 / "parallel_study.json")
    if ps:
        print(f"== parallel study: sequential {ps['sequential_wall_s']} s, parallel {ps['parallel_wall_s']} s "
              f"(share {ps['parallel_share_of_sequential']}), two GPUs {ps['parallel_2gpu_wall_s']} s, "
              f"same verdicts {ps['same_verdicts']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
