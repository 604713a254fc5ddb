"""Speed figures per concurrency level, from request records."""

from __future__ import annotations

import numpy as np

from quantgate.schema.run import LevelStats, RequestRecord


def _pct(values: list[float]) -> dict[str, float | None]:
    if not values:
        return {"p50": None, "p90": None, "p99": None}
    a = np.asarray(values, dtype=float)
    return {f"p{q}": float(np.percentile(a, q)) for q in (50, 90, 99)}


def level_stats(records: list[RequestRecord], concurrency: int) -> LevelStats:
    recs = [r for r in records if r.concurrency == concurrency]
    ok = [r for r in recs if r.error is None]
    # Wall time per session (one uninterrupted invocation), summed: a resumed level is not charged
    # for the time between the crash and the rerun.
    sessions: dict[str | None, list[RequestRecord]] = {}
    for r in recs:
        sessions.setdefault(r.session, []).append(r)
    wall = sum(max(r.end for r in rs) - min(r.start for r in rs) for rs in sessions.values()) if recs else 0.0
    toks = sum(r.completion_tokens or 0 for r in ok)
    per_req = [r.completion_tokens / (r.latency_s - r.ttft_s) for r in ok
               if r.completion_tokens and r.latency_s and r.ttft_s is not None and r.latency_s > r.ttft_s
               and r.completion_tokens > 1]
    return LevelStats(concurrency=concurrency, n_requests=len(recs), n_errors=len(recs) - len(ok), wall_s=wall,
                      pages_per_s=len(ok) / wall if wall > 0 else 0.0,
                      output_tokens_per_s=toks / wall if wall > 0 else 0.0,
                      per_request_tokens_per_s_p50=float(np.median(per_req)) if per_req else None,
                      ttft_s=_pct([r.ttft_s for r in ok if r.ttft_s is not None]),
                      latency_s=_pct([r.latency_s for r in ok if r.latency_s is not None]))


def max_concurrency_within_slo(levels: list[LevelStats], slo_s: float) -> int | None:
    ok = [lv.concurrency for lv in levels if lv.latency_s.get("p90") is not None and lv.latency_s["p90"] <= slo_s
          and lv.n_errors == 0]
    return max(ok) if ok else None
