"""What ParseBench's table score costs per table pair: GriTS-Con (``quantgate.scoring.parsebench.tables.grits``,
whose factored 2D-MSS is O(rows₁ · cols₁ · rows₂ · cols₂)) on random numeric tables of growing size, one cell
changed in the prediction, with a cold similarity cache; beside it upstream ParseBench's own
``grits_con_from_table_data`` on the same grids when its code is at ../shared/reference/parsebench (the values
must be equal). Prints a table and writes benchmarks/results/parsebench_tables.json.

    PYTHONPATH=. .venv/bin/python benchmarks/parsebench_tables.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import time
from pathlib import Path

import numpy as np

from quantgate.scoring.parsebench.tables import grits
from quantgate.scoring.parsebench.tables.data import TableData

SIZES = [(8, 5), (15, 8), (25, 10), (40, 12), (60, 15)]
OUT = Path(__file__).parent / "results" / "parsebench_tables.json"


def _pair(rows: int, cols: int, rng: random.Random) -> tuple[TableData, TableData]:
    truth = np.array([[str(rng.randint(0, 9999)) for _ in range(cols)] for _ in range(rows)], dtype=object)
    pred = truth.copy()
    pred[rng.randrange(rows), rng.randrange(cols)] = "x"
    return TableData(data=truth), TableData(data=pred)


def _upstream():
    try:
        from tests.support import parsebench_ref, parsebench_tables_ref
    except ImportError:
        return None
    if parsebench_ref.reference_missing_reason():
        return None
    parsebench_ref.load()
    import parse_bench.evaluation.metrics.parse.grits_metric as gm
    return gm, parsebench_tables_ref.to_upstream_data


def _best(fn, repeat: int) -> tuple[float, object]:
    times, value = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        value = fn()
        times.append(time.perf_counter() - start)
    return min(times), value


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    up, rng, rows = _upstream(), random.Random(0), []
    for r, c in SIZES:
        truth, pred = _pair(r, c, rng)

        def ours(truth=truth, pred=pred):
            grits.similarity.cache_clear()
            return grits.table_grits(truth, pred).grits_con  # type: ignore[union-attr]

        ours_s, value = _best(ours, args.repeat)
        row = {"rows": r, "cols": c, "ours_ms": round(ours_s * 1000, 1), "grits_con": value}
        if up is not None:
            gm, convert = up
            ut, up_ = convert(truth), convert(pred)

            def theirs(ut=ut, up_=up_, gm=gm):
                gm._lcs_similarity_cached.cache_clear()
                return gm.grits_con_from_table_data(ut, up_)["grits_con"]

            up_s, their_value = _best(theirs, args.repeat)
            row |= {"upstream_ms": round(up_s * 1000, 1), "equal": their_value == value}
        rows.append(row)
        print(f"{r:>3} x {c:<3} ours {row['ours_ms']:>8.1f} ms"
              + (f"   upstream {row['upstream_ms']:>8.1f} ms   equal {row['equal']}" if up else ""), flush=True)
    OUT.parent.mkdir(exist_ok=True)
    OUT.write_text(json.dumps({"machine": platform.processor() or platform.machine(), "repeat": args.repeat,
                               "pairs": rows}, indent=1) + "\n")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
