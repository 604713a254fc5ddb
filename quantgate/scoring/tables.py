"""TEDS (tree-edit-distance similarity) for tables, after Zhong et al. 2020 (PubTabNet): each table
becomes a tree table → tr → td(text); TEDS = 1 − TED / max(|T_pred|, |T_truth|), with renaming a
cell costing its normalised text edit distance. Tree edit distance is apted's; markdown and
HTML tables are read by the same parser as the olmOCR checks (quantgate.scoring.tablegraph):
a row holds the cells that start in it, so a cell spanning rows or columns is one node, and ragged rows
stay ragged."""

from __future__ import annotations

from quantgate.scoring.tablegraph import read_tables


class _Node:
    __slots__ = ("tag", "text", "children")

    def __init__(self, tag: str, text: str = "", children=None):
        self.tag, self.text, self.children = tag, text, children or []


def _tree(rows: list[list[str]]) -> _Node:
    return _Node("table", children=[_Node("tr", children=[_Node("td", " ".join(c.split())) for c in r]) for r in rows])


def _count(n: _Node) -> int:
    return 1 + sum(_count(c) for c in n.children)


def teds(pred_rows: list[list[str]], truth_rows: list[list[str]]) -> float:
    from apted import APTED, Config
    from rapidfuzz.distance import Levenshtein

    class _Cfg(Config):
        def rename(self, a, b):
            if a.tag != b.tag:
                return 1.0
            if a.tag == "td":
                return Levenshtein.normalized_distance(a.text, b.text)
            return 0.0

        def children(self, n):
            return n.children

    tp, tt = _tree(pred_rows), _tree(truth_rows)
    dist = APTED(tp, tt, _Cfg()).compute_edit_distance()
    return max(0.0, 1.0 - dist / max(_count(tp), _count(tt)))


def extract_tables(text: str) -> list[list[list[str]]]:
    return [t.rows() for t in read_tables(text)]


def table_teds(pred: str, truth: str) -> float | None:
    """Mean TEDS over the truth's tables, each paired with the prediction's table in the same
    position (a missing table scores 0). None when the truth has no table: not applicable."""
    truth_tables = extract_tables(truth)
    if not truth_tables:
        return None
    pred_tables = extract_tables(pred)
    scores = [teds(pred_tables[i], t) if i < len(pred_tables) else 0.0 for i, t in enumerate(truth_tables)]
    return sum(scores) / len(scores)
