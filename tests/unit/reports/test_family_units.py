"""The report's family headlines from score rows: a per-unit headline (OmniDocBench's table TEDS) pools the rows'
units (Σ page sums / Σ tables, not the mean of the page means); every other headline a family's units carry
(ParseBench's dimensions and rule types, a dimension the scorer adds later) is shown by name with no per-family
code; a score file written before rows kept units is read, its TEDS is the page mean and the note names it, and its
rule-type cells are left empty with the note saying how to get them. The rows' ``units`` field itself: written only
when set (an older line is the same line), read back as written, bad values refused naming the file and line."""

from __future__ import annotations

import json
import re

import pytest

from quantgate.errors import InputError
from quantgate.io.scores import read_scores, write_scores
from quantgate.reports.families import (
    FAMILIES,
    OVERALL_EMPTY,
    OVERALL_MISSING,
    FamilyView,
    _cell,
    _tables,
    family_headlines,
)
from quantgate.schema.scores import ScoreRow

V15, V10, PARSEBENCH, CHECKS = FAMILIES

# three pages: two tables (TEDS 1.0 and 0.2), one table (0.9), no table
TEDS_PAGES = [("a", 0.6, (1.2, 2)), ("b", 0.9, (0.9, 1)), ("c", None, None)]


def _teds_rows(with_units: bool) -> dict[str, ScoreRow]:
    rows = {}
    for pid, mean, unit in TEDS_PAGES:
        units = {"omnidoc15": {"omnidoc15_table_teds": unit} if unit else {}} if with_units else {}
        rows[pid] = ScoreRow(page_id=pid, omnidoc15_text_edit=0.1, omnidoc15_table_teds=mean, units=units)
    return rows


def _printed(fam, ms, scores) -> dict[str, list[str]]:
    """The family's headline table as the report prints it: headline name → its cells (variants, then how)."""
    heads, notes = family_headlines(fam, ms, scores)
    (head, rows), = _tables(FamilyView(fam, ms, [], heads, notes), list(scores))
    return {r[0]: r[1:] for r in rows}


def test_table_teds_pools_the_tables_and_an_older_file_gets_the_page_mean_and_a_note():
    ms = ["omnidoc15_text_edit", "omnidoc15_table_teds"]
    printed = _printed(V15, ms, {"bf16": _teds_rows(True), "fp8": _teds_rows(False)})
    # (1.0 + 0.2 + 0.9) / 3 tables = 0.7, where the page mean is (0.6 + 0.9) / 2 = 0.75
    assert printed["table TEDS"][0] == "0.7000 (2 pages)"
    assert printed["table TEDS"][1] == "0.7500 (2 pages)"
    assert "fp8 scored before score rows kept each page's tables" in printed["table TEDS"][2]
    assert printed["text edit distance"] == ["0.1000 (3 pages)", "0.1000 (3 pages)", "as upstream"]
    heads, notes = family_headlines(V15, ms, {"bf16": _teds_rows(True)})
    assert [h.note for h in heads if h.name == "table TEDS"] == ["mean over all tables, as upstream"]
    assert notes == [OVERALL_MISSING.format("bf16")]  # scored without formula CDM: Overall says why it is missing


def test_a_family_without_a_table_page_still_counts_as_keeping_units():
    rows = {"c": ScoreRow(page_id="c", omnidoc15_text_edit=0.2, omnidoc15_table_teds=None, units={"omnidoc15": {}})}
    heads, _ = family_headlines(V15, ["omnidoc15_table_teds"], {"bf16": rows})
    assert heads[0].values == {"bf16": (None, 0)} and heads[0].note == "mean over all tables, as upstream"


def _pb(pid, content, units=None) -> ScoreRow:
    return ScoreRow(page_id=pid, parsebench_content=content, units={} if units is None else {"parsebench": units})


def test_every_parsebench_number_the_units_carry_is_shown_rule_types_last():
    new = {"p1": _pb("p1", 0.5, {"content_faithfulness": (0.5, 1), "rule_order_pass_rate": (1.0, 1),
                                 "rule_missing_word_percent_pass_rate": (0.0, 1)}),
           # a dimension the scorer has and the report declares nothing for: shown by its name, before rule types
           "p2": _pb("p2", 1.0, {"content_faithfulness": (1.0, 1), "rule_order_pass_rate": (0.5, 1),
                                 "grits_trm_composite": (0.25, 1)})}
    old = {"p1": _pb("p1", 0.4), "p2": _pb("p2", 0.8)}
    printed = _printed(PARSEBENCH, ["parsebench_content"], {"bf16": new, "fp8": old})
    assert list(printed) == ["content_faithfulness", "grits_trm_composite", "rule_order_pass_rate",
                             "rule_missing_word_percent_pass_rate"]
    assert printed["content_faithfulness"][:2] == ["0.7500 (2 pages)", "0.6000 (2 pages)"]  # page means, both files
    assert printed["rule_order_pass_rate"] == ["0.7500 (2 pages)", "–", "as upstream"]
    assert printed["grits_trm_composite"][0] == "0.2500 (1 page)"
    _, notes = family_headlines(PARSEBENCH, ["parsebench_content"], {"bf16": new, "fp8": old})
    assert notes == [PARSEBENCH.without_units.format("fp8")] and "no rule-type pass rates" in notes[0]


def test_v10_table_teds_pools_its_own_units():
    rows = {pid: ScoreRow(page_id=pid, omnidoc_table_teds=mean, units={"omnidoc": {"omnidoc_table_teds": u}})
            for pid, mean, u in TEDS_PAGES if u}
    printed = _printed(V10, ["omnidoc_table_teds"], {"bf16": rows})
    assert printed["table TEDS"] == ["0.7000 (2 pages)", "mean over all tables, as upstream"]


def test_units_are_written_only_when_set_and_read_back(tmp_path):
    old_line = {"page_id": "p", "empty": False, "output_sha256": "0" * 64, "omnidoc15_table_teds": 0.6}
    f = tmp_path / "old.jsonl"
    f.write_text(json.dumps(old_line) + "\n")
    row = read_scores(f)["p"]
    assert row.units == {} and row.line() == old_line  # an older file reads, and would be written the same
    new = row.model_copy(update={"units": {"omnidoc15": {"omnidoc15_table_teds": (1.2, 2)}, "parsebench": {}}})
    write_scores(tmp_path / "new.jsonl", [new])
    back = read_scores(tmp_path / "new.jsonl")["p"]
    assert back.units == {"omnidoc15": {"omnidoc15_table_teds": (1.2, 2.0)}, "parsebench": {}}
    assert json.loads((tmp_path / "new.jsonl").read_text())["units"]["omnidoc15"]["omnidoc15_table_teds"] == [1.2, 2]
    assert "units" not in back.metrics  # not a metric


@pytest.mark.parametrize("units, says", [
    ([1, 2], "is not a mapping"),
    ({"omnidoc15": [1.2, 2]}, "units['omnidoc15'] is not a mapping"),
    ({"omnidoc15": {"omnidoc15_table_teds": [1.2]}}, "is not [sum, units]"),
    ({"omnidoc15": {"omnidoc15_table_teds": [1.2, 0]}}, "is not [sum, units]"),
    ({"omnidoc15": {"omnidoc15_table_teds": ["1.2", 2]}}, "is not [sum, units]"),
    ({"omnidoc15": {"omnidoc15_table_teds": [-0.5, 1]}}, "is not [sum, units]"),
])
def test_bad_units_are_refused_naming_the_file_and_line(tmp_path, units, says):
    f = tmp_path / "s.jsonl"
    f.write_text(json.dumps({"page_id": "p", "omnidoc15_table_teds": 0.6}) + "\n"
                 + json.dumps({"page_id": "q", "omnidoc15_table_teds": 0.6, "units": units}) + "\n")
    with pytest.raises(InputError, match=rf"s\.jsonl:2: .*{re.escape(says)}"):
        read_scores(f)


def test_checks_has_no_units_and_stays_a_page_mean():
    rows = {"p": ScoreRow(page_id="p", checks=0.5), "q": ScoreRow(page_id="q", checks=1.0)}
    heads, notes = family_headlines(CHECKS, ["checks"], {"bf16": rows})
    assert [_cell(h.values["bf16"]) for h in heads] == ["0.7500 (2 pages)"] and not notes


def test_a_file_that_never_scored_the_family_is_not_called_older():
    rows = {"p": ScoreRow(page_id="p", parsebench_content=None)}  # no page carried ParseBench rules
    _, notes = family_headlines(PARSEBENCH, ["parsebench_content"], {"bf16": rows})
    assert notes == []


def _cdm_rows(cdm_units: list[tuple[float, float] | None]) -> dict[str, ScoreRow]:
    """TEDS_PAGES' rows scored on formula CDM, with each page's units (None: a page without a formula)."""
    rows = {}
    for (pid, row), unit in zip(_teds_rows(True).items(), cdm_units, strict=True):
        units = row.units | {"omnidoc15": row.units["omnidoc15"] | ({"omnidoc15_formula_cdm": unit} if unit else {})}
        rows[pid] = ScoreRow(**row.line() | {"units": units,
                                             "omnidoc15_formula_cdm": unit[0] / unit[1] if unit else None})
    return rows


def test_overall_pools_cdm_over_formulas_as_upstream_averages_them():
    ms = ["omnidoc15_text_edit", "omnidoc15_table_teds", "omnidoc15_formula_cdm"]
    # formulas: page a 3 (CDM 0.9, 0.8, 1.0), page b 1 (0.5), page c none: over formulas 3.2 / 4 = 0.8, where the
    # mean of the pages' means would be (0.9 + 0.5) / 2 = 0.7
    printed = _printed(V15, ms, {"bf16": _cdm_rows([(2.7, 3), (0.5, 1), None])})
    assert printed["formula CDM"][0] == "0.8000 (2 pages)"
    # ((1 - 0.1)·100 + 0.7·100 + 0.8·100) / 3, text edit the page mean, TEDS over tables (test above)
    assert printed["Overall"] == [f"{(90 + 70 + 80) / 3:.4f} (3 pages)",
                                  "((1 - text edit)·100 + table TEDS + formula CDM) / 3, as upstream"]


def test_overall_is_not_computed_for_any_variant_when_one_lacks_formula_cdm():
    ms = ["omnidoc15_text_edit", "omnidoc15_table_teds", "omnidoc15_formula_cdm"]
    heads, notes = family_headlines(V15, ms, {"bf16": _cdm_rows([(2.7, 3), (0.5, 1), None]),
                                              "fp8": _teds_rows(True)})
    assert "Overall" not in [h.name for h in heads] and notes == [OVERALL_MISSING.format("fp8")]
    assert "toolchain was not installed" in notes[0] and "make setup-cdm" in notes[0]
    # keyed on every page but no page has a display formula: computed nowhere, and said why
    heads, notes = family_headlines(V15, ms, {"bf16": _cdm_rows([None, None, None])})
    assert [h.values for h in heads if h.name == "Overall"] == [{"bf16": (None, 3)}]
    assert notes == [OVERALL_EMPTY.format("bf16")]
