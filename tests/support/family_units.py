"""A finished synthetic study (``tests.support.study_folder``) whose score rows keep per-unit numbers
(``ScoreRow.units``), as the scorer writes them for OmniDocBench's table TEDS and ParseBench's leaderboard: each
page's TEDS over one to three tables, and ParseBench rule types under upstream's long names. The metric values are
the synthetic study's own; the units are made from them, so the pooled headlines differ from the page means."""

from __future__ import annotations

from pathlib import Path

from tests.support import study_folder

METRICS = ["ned", "omnidoc15_table_teds", "parsebench_content"]
# upstream's rule types with the longest names, so a report's table is drawn with them
RULE_TYPES = ("order", "too_many_sentence_occurence_percent", "unexpected_sentence_percent", "bag_of_digit_percent")


def _with_units(ids, values, texts):
    rows = _plain_rows(ids, values, texts)
    for i, r in enumerate(rows):
        teds, content = r.value("omnidoc15_table_teds"), r.value("parsebench_content")
        k = 1 + i % 3
        r.units = {"omnidoc15": {} if teds is None else {"omnidoc15_table_teds": (teds * k, k)},
                   "parsebench": {} if content is None else {
                       f"rule_{t}_pass_rate": (content ** (j + 2), 1) for j, t in enumerate(RULE_TYPES)}}
    return rows


_plain_rows = study_folder._rows


def study_with_units(out: Path, candidates: dict[str, float] | None = None, **overrides) -> Path:
    """``study_folder.finished_study`` on :data:`METRICS`, its score rows keeping units."""
    import pytest

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(study_folder, "_rows", _with_units)
        return study_folder.finished_study(out, {"fp8": 0.0005, "bad": 0.2} if candidates is None else candidates,
                                           metrics=METRICS, worst_page_damage={m: 0.1 for m in METRICS}, **overrides)
