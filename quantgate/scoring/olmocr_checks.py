"""olmOCR-bench style fact checks on a page's markdown: ``present``, ``absent``, ``order``,
``table`` and ``baseline``, with the benchmark's own semantics (normalisation, fuzzy thresholds
from ``max_diffs``, table header rules). ``math`` needs a browser to render KaTeX and is reported
as skipped.

The reference is ``olmocr.bench.tests`` (olmocr on PyPI); ``tests/test_olmocr_checks.py`` runs
both on every system's output in the bundled sample and requires agreement test by test. It is
re-implemented rather than imported because the reference imports Playwright at module load and
pulls in a GPU/cloud dependency tree; the fuzzy matching itself is rapidfuzz and fuzzysearch."""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field

from quantgate.errors import InputError

CHECK_TYPES = ("present", "absent", "order", "table", "baseline", "math")
SKIPPED = None  # a check that cannot be run here (math) scores None and is counted as skipped

_REPLACEMENTS = {"‘": "'", "’": "'", "‚": "'", "“": '"', "”": '"', "„": '"', "＿": "_", "–": "-", "—": "-",
                 "‑": "-", "‒": "-", "−": "-", "\u00b5": "\u03bc"}


def normalize_text(s: str) -> str:
    s = re.sub(r"<br/?>", " ", s)
    s = re.sub(r"\s+", " ", s)
    s = re.sub(r"\*\*(.*?)\*\*", r"\1", s)
    s = re.sub(r"__(.*?)__", r"\1", s)
    s = re.sub(r"</?b>", "", s)
    s = re.sub(r"</?i>", "", s)
    s = re.sub(r"\*(.*?)\*", r"\1", s)
    s = re.sub(r"_(.*?)_", r"\1", s)
    s = unicodedata.normalize("NFC", s)
    for a, b in _REPLACEMENTS.items():
        s = s.replace(a, b)
    return s


@dataclass
class Table:
    data: list[list[str]]  # rectangular
    header_rows: set[int] = field(default_factory=set)
    header_cols: set[int] = field(default_factory=set)
    col_headers: dict[int, list[tuple[int, str]]] = field(default_factory=dict)
    row_headers: dict[int, list[tuple[int, str]]] = field(default_factory=dict)

    @property
    def shape(self) -> tuple[int, int]:
        return len(self.data), (len(self.data[0]) if self.data else 0)


def _pad(rows: list[list[str]]) -> list[list[str]]:
    w = max(len(r) for r in rows)
    return [r + [""] * (w - len(r)) for r in rows]


def _md_rows(lines: list[str]) -> list[list[str]]:
    sep = None
    for i, line in enumerate(lines):
        body = line.replace("|", "").strip()
        if body and all(c in "- :" for c in body):
            sep = i
            break
    rows = []
    for i, line in enumerate(lines):
        if i == sep or (line.strip() and all(c in "- :|" for c in line)):
            continue
        cells = [c.strip() for c in line.split("|")]
        if cells and cells[0] == "":
            cells = cells[1:]
        if cells and cells[-1] == "":
            cells = cells[:-1]
        if cells:
            rows.append(cells)
    return rows


def parse_markdown_tables(md: str) -> list[Table]:
    tables, block = [], []
    for line in md.strip().split("\n") + [""]:  # the sentinel closes a table at the end
        if "|" in line:
            block.append(line)
            continue
        if len(block) >= 2:
            rows = _md_rows(block)
            if rows:
                data = _pad(rows)
                tables.append(Table(data=data, header_rows={0}, header_cols={0} if data[0] else set(),
                                    col_headers={j: [(0, data[0][j])] for j in range(len(data[0]))},
                                    row_headers={i: [(0, data[i][0])] for i in range(1, len(data))}))
        block = []
    return tables


def parse_html_tables(html: str) -> list[Table]:
    from bs4 import BeautifulSoup

    out = []
    for table in BeautifulSoup(html, "html.parser").find_all("table"):
        rows = table.find_all(["tr"])
        data: list[list[str]] = []
        header_rows: set[int] = set()
        header_cols: set[int] = set()
        col_headers: dict[int, list[tuple[int, str]]] = {}
        row_headers: dict[int, list[tuple[int, str]]] = {}
        thead = table.find("thead")
        if thead:
            for tr in thead.find_all("tr"):
                header_rows.add(rows.index(tr))
        grid: dict[tuple[int, int], str] = {}
        col_span: dict[str, set[int]] = {}
        row_span: dict[str, set[int]] = {}
        for ri, row in enumerate(rows):
            if row.find("th"):
                header_rows.add(ri)
            rd: list[str] = []
            ci = 0
            for cell in row.find_all(["th", "td"]):
                while (ri, ci) in grid:
                    rd.append(grid[(ri, ci)])
                    ci += 1
                for br in cell.find_all("br"):
                    br.replace_with("\n")
                text = cell.get_text().strip()
                rs, cs = int(cell.get("rowspan", 1)), int(cell.get("colspan", 1))
                rd.append(text)
                for i in range(rs):
                    for j in range(cs):
                        if i or j:
                            grid[(ri + i, ci + j)] = text if (j == 0 and i > 0) else ""
                if cell.name == "th":
                    header_cols.update(ci + j for j in range(cs))
                    header_rows.update(ri + i for i in range(1, rs) if ri + i < len(rows))
                    for j in range(cs):
                        col_headers.setdefault(ci + j, []).append((ri, text))
                        if text and cs > 1:
                            col_span.setdefault(text, set()).add(ci + j)
                    if text and rs > 1:
                        row_span.setdefault(text, set()).update(ri + i for i in range(rs))
                if cell.name == "td" and rs > 1 and ci in header_cols:
                    for i in range(1, rs):
                        if ri + i < len(rows):
                            row_headers.setdefault(ri + i, []).append((ci, text))
                ci += cs
            data.append(rd)
        for text, cols in col_span.items():
            for col in cols:
                for ri in range(len(data)):
                    if ri in header_rows:
                        continue
                    for j in range(col, len(data[ri])):
                        hs = col_headers.setdefault(j, [])
                        if not any(h[1] == text for h in hs):
                            hs.append((min(r for r, _ in col_headers.get(col, [(0, "")])), text))
        for text, rws in row_span.items():
            for r in rws:
                if r < len(data):
                    hc = min(header_cols) if header_cols else 0
                    hs = row_headers.setdefault(r, [])
                    if not any(h[1] == text for h in hs):
                        hs.append((hc, text))
        for c in header_cols:
            for ri, row in enumerate(data):
                if c < len(row) and row[c].strip():
                    hs = row_headers.setdefault(ri, [])
                    if not any(h[1] == row[c] for h in hs):
                        hs.append((c, row[c]))
        if data and max(len(r) for r in data) > 0:
            out.append(Table(data=_pad(data), header_rows=header_rows, header_cols=header_cols,
                             col_headers=col_headers, row_headers=row_headers))
        elif data:
            out.append(Table(data=[[] for _ in data], header_rows=header_rows, header_cols=header_cols))
    return out


def _thr(max_diffs: int, ref: str) -> float:
    return max(0.5, 1.0 - max_diffs / (len(ref) or 1))


def _ratio(a: str, b: str) -> float:
    from rapidfuzz import fuzz

    return fuzz.ratio(a, b) / 100.0


def _heading(ref: str, md: int, candidates_primary, candidates_rows, candidates_any) -> tuple[bool, str]:
    best, best_sim = "", 0.0
    for group in (candidates_primary, candidates_rows):
        for text in group:
            t = normalize_text(text)
            sim = _ratio(ref, t)
            if sim > best_sim:
                best, best_sim = t, sim
                if best_sim >= _thr(md, ref):
                    return True, ""
    if not best:
        for text in candidates_any:
            t = normalize_text(text)
            sim = _ratio(ref, t)
            if sim > best_sim:
                best, best_sim = t, sim
    if not best:
        return False, "no heading"
    return best_sim >= _thr(md, ref), best


def _table_check(c: dict, content: str) -> bool:
    md = int(c.get("max_diffs", 0))
    norm = {k: normalize_text(c.get(k, "") or "") for k in ("cell", "up", "down", "left", "right",
                                                             "top_heading", "left_heading")}
    cell = norm["cell"]
    tables = ([] if c.get("ignore_markdown_tables") else parse_markdown_tables(content)) + parse_html_tables(content)
    threshold = max(0.5, 1.0 - md / (len(cell) or 1))
    for t in tables:
        nrow, ncol = t.shape
        a = t.data
        matches = [(i, j) for i in range(nrow) for j in range(ncol) if _ratio(cell, normalize_text(a[i][j])) >= threshold]
        for i, j in matches:
            ok = True
            for key, di, dj, inside in (("up", -1, 0, i > 0), ("down", 1, 0, i < nrow - 1),
                                         ("left", 0, -1, j > 0), ("right", 0, 1, j < ncol - 1)):
                ref = norm[key]
                if ref and inside and _ratio(ref, normalize_text(a[i + di][j + dj])) < _thr(md, ref):
                    ok = False
            if norm["top_heading"]:
                found, _ = _heading(norm["top_heading"], md,
                                    [h for _, h in t.col_headers.get(j, [])],
                                    [a[r][j] for r in sorted(t.header_rows) if r < i and a[r][j].strip()],
                                    [a[r][j] for r in range(i) if a[r][j].strip()])
                ok = ok and found
            if norm["left_heading"]:
                found, _ = _heading(norm["left_heading"], md,
                                    [h for _, h in t.row_headers.get(i, [])],
                                    [a[i][k] for k in sorted(t.header_cols) if k < j and a[i][k].strip()],
                                    [a[i][k] for k in range(j) if a[i][k].strip()])
                ok = ok and found
            if ok:
                return True
    return False


def _ngram_repeats(text: str, max_n: int = 5) -> list[int]:
    text = re.sub(r"\s+", " ", text)
    out = [0] * max_n
    for size in range(1, max_n + 1):
        if len(text) < size:
            continue
        target, count, pos = text[-size:], 0, len(text) - size
        while pos >= 0 and text[pos:pos + size] == target:
            count += 1
            pos -= size
        out[size - 1] = count
    return out


_DISALLOWED = re.compile("[\u4e00-\u9FFF\u3040-\u309F\u30A0-\u30FF\U0001F600-\U0001F64F\U0001F300-\U0001F5FF"
                         "\U0001F680-\U0001F6FF\U0001F1E0-\U0001F1FF]")


def _baseline(c: dict, content: str) -> bool:
    n = len("".join(ch for ch in content if ch.isalnum()).strip())
    if c.get("max_length") is not None:
        if c.get("max_length_skips_image_alt_tags"):
            stripped = re.sub(r"!\[.*?\]\(.*?\)", "", content)
            n = len("".join(ch for ch in stripped if ch.isalnum()).strip())
        return n <= c["max_length"]
    if n == 0:
        return False
    if any(cnt > c.get("max_repeats", 30) for cnt in _ngram_repeats(content)):
        return False
    return not (c.get("check_disallowed_characters", True) and _DISALLOWED.search(content))


def run_check(c: dict, content: str) -> bool | None:
    """True/False for a check, None when it cannot be run here (math)."""
    from rapidfuzz import fuzz

    kind = c.get("type")
    if kind not in CHECK_TYPES:
        raise InputError(f"check {c.get('id', '?')}: unknown type {kind!r} (expected one of {', '.join(CHECK_TYPES)})")
    md = int(c.get("max_diffs", 0) or 0)
    if kind in ("present", "absent"):
        ref, text = normalize_text(c["text"]), normalize_text(content)
        if not c.get("case_sensitive", True):
            ref, text = ref.lower(), text.lower()
        fn, ln = c.get("first_n"), c.get("last_n")
        if fn and ln:
            text = text[:fn] + text[-ln:]
        elif fn:
            text = text[:fn]
        elif ln:
            text = text[-ln:]
        threshold = 1.0 - md / (len(ref) or 1)
        hit = fuzz.partial_ratio(ref, text) / 100.0 >= threshold
        return hit if kind == "present" else not hit
    if kind == "order":
        from fuzzysearch import find_near_matches

        text = normalize_text(content)
        before = find_near_matches(normalize_text(c["before"]), text, max_l_dist=md)
        after = find_near_matches(normalize_text(c["after"]), text, max_l_dist=md)
        return any(b.start < a.start for b in before for a in after)
    if kind == "table":
        return _table_check(c, content)
    if kind == "baseline":
        return _baseline(c, content)
    return SKIPPED


def checks_pass_rate(checks: list[dict], content: str) -> tuple[float | None, int, int]:
    """(pass rate over runnable checks, passed, skipped). None when no check could run."""
    results = [run_check(c, content) for c in checks]
    ran = [r for r in results if r is not None]
    skipped = len(results) - len(ran)
    if not ran:
        return None, 0, skipped
    return sum(ran) / len(ran), sum(ran), skipped
