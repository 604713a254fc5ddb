"""Differential parity of GriTS-Con (quantgate.scoring.parsebench.tables.grits) with upstream's
(``grits_metric.GriTSMetric.compute`` and ``utils.normalize_cell_text`` in ../shared/reference/parsebench), both fed
the very same ExtractedTables (upstream's own, converted field by field): upstream's crafted table pairs (its
tests/.../test_fast_table_parity.py), hypothesis-generated pages, OmniDocBench's demo tables; the page value, the
pairing and every paired table's score and row/column alignment equal exactly (same additions in the same order).
Then properties that hold without the oracle."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from quantgate.scoring.parsebench.tables import grits as G
from quantgate.scoring.parsebench.tables.data import ExtractedTable, TableData
from quantgate.scoring.parsebench.tables.grits_text import normalize_cell_text
from tests.support import parsebench_ref as P
from tests.support import parsebench_tables_ref as R
from tests.unit.scoring.test_parsebench_tables_parse import FIXTURES, _crafted_pairs, _demo_pages, page_md

ORACLE = P.reference_missing_reason()
needs_oracle = pytest.mark.skipif(bool(ORACLE), reason=ORACLE or "")


def _upstream():
    P.load()
    import parse_bench.evaluation.metrics.parse.grits_metric as gm
    import parse_bench.evaluation.metrics.parse.table_extraction as ext
    import parse_bench.evaluation.metrics.parse.utils as ut
    return gm, ext, ut


def _same_page(expected_md: str, actual_md: str, capsys=None) -> float:
    gm, ext, _ = _upstream()
    te, ta, _ = ext.extract_table_pairs(expected_md, actual_md)
    theirs = gm.GriTSMetric().compute(te, ta)[0]
    mine = G.grits_con([R.to_ours(t) for t in te], [R.to_ours(t) for t in ta])
    assert mine.value == theirs.value
    assert mine.pairing == theirs.metadata["pairing"]
    for (gi, pi, g), d in zip(mine.per_table, theirs.metadata.get("per_table_details", []), strict=True):
        assert (gi, pi, g.grits_con) == (d["gt_table_index"], d["pred_table_index"], d["grits_con"])
        if pi is not None:
            assert (g.precision, g.recall) == (d["grits_precision_con"], d["grits_recall_con"])
            assert (g.row_map, g.col_map) == (d["_con_row_alignment"], d["_con_col_alignment"])
    return mine.value  # type: ignore[return-value]


@needs_oracle
def test_upstreams_crafted_pairs_score_as_upstreams():
    pairs = _crafted_pairs()
    assert len(pairs) >= 8
    values = {name: _same_page(gt, pred) for name, gt, pred in pairs}
    assert values["perfect"] == 1.0 and values["missing_row"] < 1.0 and values["swapped_columns"] < 1.0


CELL_TEXT = st.lists(st.sampled_from(list("ab1 .-*_~") + ["<b>", "</b>", "<sup>2</sup>", "<sub>3</sub>",
                                                                  "–", "—", "‑", "−", "“", "’", "＂", "，", "●", "·",
                                                                  "ⓧ", "¹", "₂", "\n", "\t", "<span x='1'>",
                                                                  "</span>", "<I>", "..."]), max_size=14).map("".join)


@needs_oracle
@settings(max_examples=300, deadline=None)
@given(CELL_TEXT)
def test_cell_normalization_is_upstreams(text):
    assert normalize_cell_text(text) == _upstream()[2].normalize_cell_text(text)


@needs_oracle
@settings(max_examples=80, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(page_md(), page_md(malformed=True))
def test_generated_pages_score_as_upstreams(expected, actual):
    _, ext, _ = _upstream()
    try:
        ext.extract_table_pairs(expected, actual)
    except (ValueError, IndexError):
        return  # upstream fails such a page (tables.parse's divergence, tested there)
    _same_page(expected, actual)


@needs_oracle
def test_omnidocbench_demo_tables_score_as_upstreams():
    pages = _demo_pages()
    assert len(pages) >= 8
    values = [_same_page(truth, pred) for truth, pred in pages]
    assert all(0.0 <= v <= 1.0 for v in values) and sum(0.0 < v < 1.0 for v in values) >= 5


def _table(rows: list[list[str]]) -> ExtractedTable:
    return ExtractedTable("", TableData(data=np.array(rows, dtype=object)))


def test_identical_tables_score_one_and_pair_with_themselves():
    a, b = _table([["Item", "Qty"], ["Apple", "3"]]), _table([["x", "y", "z"]])
    res = G.grits_con([a, b], [b, a])
    assert res.value == 1.0 and res.pairing == [(0, 1), (1, 0)]
    assert G.grits_con([a, b], [a]).pairing == [(0, 0), (1, None)]  # the unpaired truth table scores 0
    assert G.grits_con([a, b], [a]).value == 0.5
    assert G.grits_con([a], []).value == 0.0 and G.grits_con([], [a]).pairing == []


def test_a_big_table_of_the_wrong_shape_scores_zero_without_aligning():
    truth = _table([[str(i * 60 + j) for j in range(60)] for i in range(50)])  # 3,000 cells
    pred = _table([[str(i * 60 + j) for j in range(60)] for i in range(20)])  # 2.5x fewer rows
    assert G.table_grits(truth.table_data, pred.table_data) == G.PairGrits(0.0, 0.0, 0.0, 0.0)


@needs_oracle
def test_cell_similarity_is_upstreams():
    """Upstream's own check of its memoized similarity, on ours: random strings over its alphabet, and long ones
    (difflib's autojunk heuristic starts at 200 characters)."""
    lcs = _upstream()[0]._lcs_similarity
    rng = random.Random(99)
    for size in (12, 12, 12, 12, 260):
        for _ in range(1000 if size == 12 else 20):
            a = "".join(rng.choice("abc 0123$,.%") for _ in range(rng.randint(0, size)))
            b = "".join(rng.choice("abc 0123$,.%") for _ in range(rng.randint(0, size)))
            assert G.similarity(a, b) == lcs(a, b)


def test_similarity_is_difflibs_ratio():
    assert G.similarity("", "") == 1.0 and G.similarity("abc", "") == 0.0
    assert G.similarity("abcd", "abce") == 0.75


@needs_oracle
def test_fixture_file_is_where_expected():
    assert Path(FIXTURES).is_file()
