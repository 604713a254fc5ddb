"""The pages a report shows side by side: where each variant fell furthest behind the baseline."""

from __future__ import annotations

from pathlib import Path

from quantgate.io.pageset import PageSet
from quantgate.schema.metrics import METRICS
from quantgate.schema.scores import ScoreRow
from quantgate.schema.summary import WorstPage
from quantgate.study.spec import Study


def worst_pages(st: Study, ps: PageSet, out: Path, scores: dict[tuple[str, int], dict[str, ScoreRow]], c0: int,
                k: int = 3) -> dict[str, list[WorstPage]]:
    """Per variant, the pages where it fell furthest behind the baseline on the first metric."""
    from quantgate.serve import load_records

    metric = METRICS[st.metrics[0]]
    sign = 1 if metric.higher_is_better else -1
    outputs = {v.name: {r.page_id: r.output for r in load_records(out / "runs" / v.name) if r.concurrency == c0}
               for v in st.variants}
    base = scores[(st.baseline, c0)]
    pages = ps.by_id()
    res: dict[str, list[WorstPage]] = {}
    for v in st.variants:
        if v.name == st.baseline:
            continue
        rows = []
        for pid, row in scores[(v.name, c0)].items():
            b = base[pid].value(metric.name) if pid in base else None
            c = row.value(metric.name)
            if b is None or c is None or sign * (c - b) >= 0:
                continue
            rows.append((sign * (c - b), pid, b, c))
        rows.sort()
        res[v.name] = [WorstPage(page_id=pid, metric=metric.name, baseline_value=b, variant_value=c,
                                 truth=ps.truth_text(pages[pid]) if pid in pages else None,
                                 baseline_output=outputs[st.baseline].get(pid), variant_output=outputs[v.name].get(pid),
                                 image=image_for(ps, pages.get(pid), out))
                       for _, pid, b, c in rows[:k]]
    return res


def image_for(ps: PageSet, page, out: Path) -> str | None:
    """Where the report finds the page's image: relative to the study folder when inside it (a moved folder
    keeps it), else absolute."""
    if page is None:
        return None
    path = ps.image_path(page).resolve()
    try:
        return path.relative_to(Path(out).resolve()).as_posix()
    except ValueError:
        return str(path)
