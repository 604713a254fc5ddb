"""Markdown pipe tables converted to HTML inside the page text, as OmniDocBench's utils/table_utils.py (unchanged from
24e6428 to 523fd1d) converts them, re-implemented: what v1.5 needs that v1.0 did not. v1.0's ``extract`` builds each
table's HTML on its own and keeps the page's offsets; upstream rewrites the page, so every block found after the
conversion (paragraphs, code) sits at its offset in the rewritten page, while formulas, found before, keep theirs.
v1.5 matches text and formulas in one list ordered by those offsets, so the reading order depends on them.

The rewrite, step by step: each stretch from a '|' to the next '|' that ends a line becomes its own one-row HTML
table (its cells header cells); then, walking the lines, a run of such tables is merged into one — the line just
above the run is swallowed, and every line holding ':' or '---' (rule rows, and cells such as "10:30") is dropped —
and the merged table, between blank lines, replaces the run. The walk also puts one line break before the page."""

from __future__ import annotations

import re

from quantgate.scoring.omnidoc.extract import Block

ROW = re.compile(r"\|\s*.*?\s*\|\n", re.S)  # also what decides whether a page has pipe tables at all (two or more)
_HTML_TABLE = re.compile(r"(<table.*?</table>)", re.S)
_RULE_LINE = re.compile(r"-*?:|---|:-*?")
_STRUCTURE_LINE = re.compile(r"</?t(able|head|body)>")
_COMMENT = re.compile(r"<!--[\s\S]*?-->")
_ONE_TABLE = re.compile(r"<table>[\s\S]*?</table>")


def _row_table(stretch: str) -> str:
    rows = [r.strip() for r in stretch.strip().split("\n")]
    head = "".join(f"      <th>{c.strip()}</th>\n" for c in rows[0].split("|")[1:-1])
    body = "".join("    <tr>\n" + "".join(f"      <td>{c.strip()}</td>\n" for c in r.split("|")[1:-1]) + "    </tr>\n"
                   for r in rows[2:])
    return f"<table>\n  <thead>\n    <tr>\n{head}    </tr>\n  </thead>\n  <tbody>\n{body}  </tbody>\n</table>\n"


def _merged(run: str) -> str:
    kept: list[str] = []
    for table in _ONE_TABLE.findall(_COMMENT.sub("", run)):
        lines = [ln.replace("<th>", "<td>").replace("</th>", "</td>") if "<th>" in ln else ln for ln in table.split("\n")]
        lines = [ln for ln in lines if not _STRUCTURE_LINE.search(ln)]
        if len(lines) > 2:
            kept += lines
    return "\n\n<table>\n" + "\n".join(kept) + "\n</table>\n\n"


def _merge_runs(text: str) -> str:
    out: list[str] = []
    run, in_run, previous = "", False, ""
    for line in text.split("\n"):
        if "<table>" in line:
            in_run = True
            run += previous
        elif in_run:
            if not _RULE_LINE.search(previous) and "</thead>" not in previous:
                run += "\n" + previous
            if "</table>" in previous:
                in_run = False
                out.append(_merged(run))
                run = ""
        else:
            out.append(previous)
        previous = line
    if previous:
        if in_run or "</table>" in previous:
            out.append(_merged(run + "\n" + previous))
        else:
            out.append(previous)
    return "\n".join(out)


def convert(text: str) -> str:
    """The page with its pipe tables rewritten as HTML tables, as upstream rewrites it."""
    text = text.replace("\r", "") + "\n"
    for stretch in ROW.findall(text):
        text = text.replace(stretch, _row_table(stretch), 1)
    text = _merge_runs(text)
    return text.replace("<table>", '<table border="1" >').replace("<td>", '<td colspan="1" rowspan="1">')


def pipe_tables(text: str) -> tuple[str, list[Block]]:
    """When the page has two or more pipe rows: the rewritten page with its HTML tables blanked, and the tables."""
    if len(ROW.findall(text + "\n")) < 2:
        return text, []
    text = convert(text)
    blocks, chars = [], list(text)
    for m in _HTML_TABLE.finditer(text):
        blocks.append(Block("html_table", m.start(), m.group(0).strip()))
        chars[m.start():m.end()] = " " * (m.end() - m.start())
    return "".join(chars), blocks
