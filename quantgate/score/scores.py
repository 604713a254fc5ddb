"""Per-page scores: computing them from predictions, and reading/writing ``scores.jsonl``."""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Callable
from pathlib import Path

from quantgate.errors import InputError
from quantgate.io.fileio import atomic_write_text, read_jsonl
from quantgate.pages.pageset import PageSet
from quantgate.score.metrics import REGISTRY, Metric, score_one

RESERVED = {"page_id", "empty", "error", "output_sha256"}  # output_sha256: absent in files from before it existed
_HEX64 = re.compile(r"^[0-9a-f]{64}$")


def load_predictions(path: Path, ps: PageSet, split: str | None = None, concurrency: int | None = None) -> dict[str, str | None]:
    """page id → predicted text (None for a failed request). ``path`` is a run folder (its
    ``requests.jsonl``; ``concurrency`` picks one level, default the lowest) or a folder of
    ``<page_id>.md``/``.txt`` files from any parser."""
    path = Path(path)
    wanted = {p.id for p in ps.split(split)}
    if (path / "requests.jsonl").is_file():
        from quantgate.schema.run import RequestRecord, parse_record

        by_level: dict[int, dict[str, str | None]] = {}
        for no, obj in read_jsonl(path / "requests.jsonl", repair_torn_tail=False):
            r = parse_record(RequestRecord, obj, where=f"{path / 'requests.jsonl'}:{no}")
            by_level.setdefault(r.concurrency, {})[r.page_id] = r.output if r.error is None else None
        if not by_level:
            raise InputError(f"{path / 'requests.jsonl'}: no requests recorded yet")
        level = concurrency if concurrency is not None else min(by_level)
        if level not in by_level:
            raise InputError(f"{path}: no requests at concurrency {level}; recorded levels: {sorted(by_level)}")
        preds = {k: v for k, v in by_level[level].items() if k in wanted}
    elif path.is_dir():
        preds = {}
        for f in sorted(path.iterdir()):
            if f.suffix in (".md", ".txt") and f.stem in wanted:
                try:
                    preds[f.stem] = f.read_bytes().decode("utf-8")
                except UnicodeDecodeError:
                    raise InputError(f"{f}: prediction is not UTF-8") from None
    else:
        raise InputError(f"{path}: neither a run folder (requests.jsonl) nor a folder of <page_id>.md/.txt files")
    if not preds:
        raise InputError(f"{path}: no predictions match the pages of {ps.root} (split {split or 'all'}); "
                         "are the file names the page ids?")
    return preds


def score_pages(ps: PageSet, preds: dict[str, str | None], metrics: list[Metric], split: str | None = None,
                progress: Callable[[str], None] | None = None, only: set[str] | None = None) -> list[dict]:
    """One row per page of the split (``only``: of these pages of it). A page with no prediction is
    scored as empty (worst value) and flagged ``missing``; nothing is dropped."""
    rows = []
    for p in ps.split(split):
        if only is not None and p.id not in only:
            continue
        pred = preds.get(p.id)
        truth = ps.truth_text(p)
        row: dict = {"page_id": p.id, "empty": pred is None or not pred.strip(),
                     # what compare --exact compares: the text itself, not its score
                     "output_sha256": None if pred is None else hashlib.sha256(pred.encode("utf-8")).hexdigest()}
        if p.id not in preds:
            row["error"] = "missing"
        elif pred is None:
            row["error"] = "request failed"
        for m in metrics:
            row[m.name] = score_one(m, pred, truth, p.checks)
        rows.append(row)
        if progress:
            progress(p.id)
    return rows


def write_scores(path: Path, rows: list[dict]) -> None:
    import json

    atomic_write_text(path, "".join(json.dumps(r, ensure_ascii=False, allow_nan=False) + "\n" for r in rows))


def read_scores(path: Path) -> dict[str, dict]:
    """page id → row, validated: numeric (or null) metric values, no NaN, unique ids, known metrics."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"{path}: no such score file")
    rows: dict[str, dict] = {}
    for no, obj in read_jsonl(path):
        pid = obj.get("page_id")
        if not isinstance(pid, str) or not pid:
            raise InputError(f"{path}:{no}: missing or non-string 'page_id'")
        if pid in rows:
            raise InputError(f"{path}:{no}: duplicate page_id {pid!r}")
        h = obj.get("output_sha256")
        if h is not None and not (isinstance(h, str) and _HEX64.match(h)):
            raise InputError(f"{path}:{no}: output_sha256 = {h!r} is not a sha256 hex digest")
        for k, v in obj.items():
            if k in RESERVED:
                continue
            if k not in REGISTRY:
                raise InputError(f"{path}:{no}: unknown metric {k!r}; known: {', '.join(REGISTRY)}")
            if v is None:
                continue
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                raise InputError(f"{path}:{no}: {k} = {v!r} is not a number")
            if not math.isfinite(v):
                raise InputError(f"{path}:{no}: {k} is {v} (not finite)")
        rows[pid] = obj
    if not rows:
        raise InputError(f"{path}: no score rows")
    return rows


def summarize(rows: list[dict], metrics: list[Metric], seed: int = 0) -> list[dict]:
    """Mean and 95% bootstrap interval per metric (pages where it applies)."""
    import numpy as np

    from quantgate.judge.stats import percentile_ci

    out = []
    for m in metrics:
        vals = np.array([r[m.name] for r in rows if r.get(m.name) is not None], dtype=float)
        if len(vals) == 0:
            out.append({"metric": m.name, "n": 0, "mean": None, "ci95": None})
            continue
        ci = percentile_ci(vals, 0.95, 2000, seed) if len(vals) > 1 else (float(vals[0]), float(vals[0]))
        out.append({"metric": m.name, "n": int(len(vals)), "mean": float(vals.mean()), "ci95": ci,
                    "direction": "higher" if m.higher_is_better else "lower"})
    return out
