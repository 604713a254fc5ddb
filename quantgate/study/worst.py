"""The pages a report shows side by side: where each variant fell furthest behind the baseline."""

from __future__ import annotations

from pathlib import Path

from quantgate.study.spec import Study


def worst_pages(st: Study, ps, out: Path, scores, c0: int, k: int = 3) -> dict[str, list[dict]]:
    """Per variant, the pages where it fell furthest behind the baseline on the first metric."""
    from quantgate.score import get_metric
    from quantgate.serve import load_records

    metric = get_metric(st.metrics[0])
    sign = 1 if metric.higher_is_better else -1
    outputs = {v.name: {r.page_id: r.output for r in load_records(out / "runs" / v.name) if r.concurrency == c0}
               for v in st.variants}
    base = scores[(st.baseline, c0)]
    res: dict[str, list[dict]] = {}
    for v in st.variants:
        if v.name == st.baseline:
            continue
        cand = scores[(v.name, c0)]
        rows = []
        for pid, row in cand.items():
            b, c = base.get(pid, {}).get(metric.name), row.get(metric.name)
            if b is None or c is None or sign * (c - b) >= 0:
                continue
            rows.append((sign * (c - b), pid, b, c))
        rows.sort()
        pages = ps.by_id()
        res[v.name] = [{"page_id": pid, "metric": metric.name, "baseline_value": b, "variant_value": c,
                        "truth": ps.truth_text(pages[pid]) if pid in pages else None,
                        "baseline_output": outputs[st.baseline].get(pid), "variant_output": outputs[v.name].get(pid)}
                       for _, pid, b, c in rows[:k]]
    return res
