"""olmOCR-bench fact checks on a page's markdown, with upstream's semantics (allenai/olmocr,
``olmocr/bench/tests.py``, as the leaderboard runs it — not the older PyPI release): ``present``,
``absent``, ``order``, ``table``, ``baseline``, ``format``, ``footnote`` and ``math``.

Each check's ``run`` is ported here (upstream's module imports Playwright, tqdm and a sqlite cache at
load); the table model is quantgate's graph of cells (``quantgate.scoring.tablegraph``), held to upstream's;
math renders KaTeX in headless Chromium (``olmocr_math``) and is skipped, with a counted reason, when
there is no Chromium. Fuzzy matching is rapidfuzz and fuzzysearch, as upstream's. Agreement with
upstream, check by check, is tested on the bundled sample and by a differential property test
(docs/metrics.md, "olmOCR-bench checks")."""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from quantgate.errors import DataError, InputError, QuantgateError
from quantgate.scoring import olmocr_math
from quantgate.scoring.tablegraph import RELATIONS

CHECK_TYPES = ("present", "absent", "order", "table", "baseline", "math", "format", "footnote")
SKIPPED = None  # a check that cannot run here (math without Chromium) scores None and is counted by reason

_REQUIRED = object()
_BASE = {"pdf": _REQUIRED, "page": _REQUIRED, "id": _REQUIRED, "type": _REQUIRED, "max_diffs": 0,
         "checked": None, "url": None}
_TEXT = {"text": _REQUIRED, "case_sensitive": True, "first_n": None, "last_n": None}
_FIELDS = {  # upstream's dataclass fields and defaults, per type
    "present": _TEXT, "absent": _TEXT,
    "order": {"before": _REQUIRED, "after": _REQUIRED},
    "table": {"cell": _REQUIRED, **dict.fromkeys(("up", "down", "left", "right", "top_heading", "left_heading"), ""),
              "ignore_markdown_tables": False},
    "baseline": {"max_length": None, "max_length_skips_image_alt_tags": False, "max_repeats": 30,
                 "check_disallowed_characters": True},
    "math": {"math": _REQUIRED, "ignore_dollar_delimited": False},
    "format": {"text": _REQUIRED, "format": _REQUIRED, "case_sensitive": True},
    "footnote": {"marker": _REQUIRED, "appears_before_marker": None, "appears_after_marker": None},
}
_NORMALIZED = ("text", "before", "after", "cell", "up", "down", "left", "right", "top_heading", "left_heading",
               "appears_before_marker", "appears_after_marker")

_REPLACEMENTS = {"‘": "'", "’": "'", "‚": "'", "“": '"', "”": '"', "„": '"', "＿": "_", "–": "-", "—": "-",
                 "‑": "-", "‒": "-", "−": "-", "\u00b5": "\u03bc"}
_NORMALIZE_STEPS = [(re.compile(p), r) for p, r in (
    (r"<br/?>", " "), (r"\*\*(.*?)\*\*", r"\1"), (r"__(.*?)__", r"\1"), (r"</?b>", ""), (r"</?i>", ""),
    (r"(\*\*|__)(.*?)\1", r"\2"), (r"(\*|_)(.*?)\1", r"\2"), (r"\s+", " "))]


def normalize_text(s: str | None) -> str | None:
    """Upstream's normalize_text, step for step (the order matters: emphasis is removed line by line
    before whitespace is folded)."""
    if s is None:
        return None
    for pattern, repl in _NORMALIZE_STEPS:
        s = pattern.sub(repl, s)
    s = unicodedata.normalize("NFC", s)
    for a, b in _REPLACEMENTS.items():
        s = s.replace(a, b)
    return s


def prepare(c: dict) -> dict:
    """A check with upstream's defaults filled in and text fields normalised; upstream's validation
    (its ValidationError or TypeError) becomes one InputError naming the check and the field."""
    if not isinstance(c, dict):
        raise InputError(f"an olmOCR check must be a JSON object, got {type(c).__name__}")
    cid, kind = c.get("id") or "?", c.get("type")
    if kind not in CHECK_TYPES:
        raise InputError(f"check {cid}: unknown type {kind!r} (expected one of {', '.join(CHECK_TYPES)})")
    spec = {**_BASE, **_FIELDS[kind]}
    unknown = sorted(set(c) - set(spec))
    if unknown:
        raise InputError(f"check {cid}: unknown field(s) {', '.join(unknown)} for type {kind!r} "
                         f"(known: {', '.join(spec)})")
    missing = [k for k, v in spec.items() if v is _REQUIRED and k not in c]
    if missing:
        raise InputError(f"check {cid}: missing field(s) {', '.join(missing)} for type {kind!r}")
    p = {k: c.get(k, v) for k, v in spec.items()}

    def bad(msg: str) -> InputError:
        return InputError(f"check {cid} ({kind}): {msg}")

    if not p["pdf"] or not p["id"]:
        raise bad("'pdf' and 'id' must not be empty")
    if not isinstance(p["max_diffs"], int) or p["max_diffs"] < 0:
        raise bad(f"max_diffs must be an integer >= 0, got {p['max_diffs']!r}")
    for k in _NORMALIZED:
        if k in p and p[k] is not None:
            if not isinstance(p[k], str):
                raise bad(f"{k} must be a string, got {type(p[k]).__name__}")
            p[k] = normalize_text(p[k])
    if kind in ("present", "absent", "format") and not p["text"].strip():
        raise bad("text must not be empty")
    if kind == "format" and p["format"] not in ("heading", "bold", "italic"):
        raise bad(f"format must be heading, bold or italic, got {p['format']!r}")
    if kind == "order":
        if not p["before"].strip() or not p["after"].strip():
            raise bad("before and after must not be empty")
        if p["max_diffs"] > len(p["before"]) // 2 or p["max_diffs"] > len(p["after"]) // 2:
            raise bad("max_diffs is more than half of 'before' or 'after'")
    if kind == "table" and p["cell"] is None:
        raise bad("cell must be a string")
    if kind == "math" and (not isinstance(p["math"], str) or not p["math"].strip()):
        raise bad("math must be a non-empty LaTeX string")
    if kind == "footnote":
        if not p["marker"] or not isinstance(p["marker"], str) or " " in p["marker"]:
            raise bad("marker must be a non-empty string without spaces")
        for k in ("appears_before_marker", "appears_after_marker"):
            if c.get(k) and not p[k].strip():
                raise bad(f"{k} must not be blank when given")
    return p


def validate_checks(checks: Iterable[tuple[str, dict]]) -> int:
    """Every check through :func:`prepare` (the scorer's own validation, so ``pages import``, ``pages check`` and a
    study refuse before any work what scoring would refuse after all the serving) and every id used once. The
    first problem is one DataError naming where the check lies (``file:line``) and its id. Returns the count."""
    seen: dict[str, str] = {}
    n = 0
    for where, c in checks:
        try:
            cid = prepare(c)["id"]
        except InputError as e:
            raise DataError(f"{where}: {e}") from None
        if cid in seen:
            raise DataError(f"{where}: check {cid}: the id is used again (first at {seen[cid]}); give each check "
                            "its own id")
        seen[cid] = where
        n += 1
    return n


def pageset_checks(root: Path) -> Iterator[tuple[str, dict]]:
    """(``pages.jsonl:LINE page ID``, check) for every check a page set's records hold."""
    from quantgate.io.fileio import read_jsonl
    from quantgate.io.pageset import PAGES_FILE

    f = Path(root) / PAGES_FILE
    for no, rec in read_jsonl(f):
        checks = rec.get("checks") or []
        for c in checks if isinstance(checks, list) else [checks]:
            yield f"{f}:{no} page {rec.get('id')}", c


def _thr(max_diffs: int, ref: str) -> float:
    return 1.0 - max_diffs / (len(ref) if len(ref) > 0 else 1)


def _partial(a: str, b: str) -> float:
    from rapidfuzz import fuzz

    return fuzz.partial_ratio(a, b) / 100.0


def _presence(p: dict, content: str) -> bool:
    ref, text = p["text"], normalize_text(content)
    if not p["case_sensitive"]:
        ref, text = ref.lower(), text.lower()
    fn, ln = p["first_n"], p["last_n"]
    if fn and ln:
        text = text[:fn] + text[-ln:]
    elif fn:
        text = text[:fn]
    elif ln:
        text = text[-ln:]
    hit = _partial(ref, text) >= _thr(p["max_diffs"], ref)
    return hit if p["type"] == "present" else not hit


def _order(p: dict, content: str) -> bool:
    from fuzzysearch import find_near_matches

    text = normalize_text(content)
    before = find_near_matches(p["before"], text, max_l_dist=p["max_diffs"])
    after = find_near_matches(p["after"], text, max_l_dist=p["max_diffs"]) if before else []
    return any(b.start < a.start for b in before for a in after)


@lru_cache(maxsize=16)
def _tables(content: str, markdown: bool) -> tuple:
    from quantgate.scoring.tablegraph import read_tables

    tables = read_tables(content, markdown)
    if any(t.spans_past_end for t in tables):  # upstream's model raises on the page, and its benchmark fails it
        return ()
    # (table, its cells' normalised text): many checks of one page look at the same tables
    return tuple((t, {rc: normalize_text(txt) for rc, txt in t.text.items()}) for t in tables)


def _table(p: dict, content: str) -> bool:
    from rapidfuzz import fuzz

    md = p["max_diffs"]
    threshold = max(0.5, _thr(md, p["cell"]))
    for t, text in _tables(content, not p["ignore_markdown_tables"]):
        for rc in [rc for rc in t.text if fuzz.ratio(p["cell"], text[rc]) / 100.0 >= threshold]:
            if all(any(fuzz.ratio(p[k], text[o]) / 100.0 >= max(0.5, _thr(md, p[k])) for o in t.related(rc, k))
                   for k in RELATIONS if p[k]):
                return True
    return False


def _ngram_repeats(text: str, max_n: int = 5) -> list[int]:
    # olmocr.repeatdetect.RepeatDetector.ngram_repeats: how often the last n-gram repeats back to back
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


def _baseline(p: dict, content: str) -> bool:
    n = len("".join(ch for ch in content if ch.isalnum()).strip())
    if p["max_length"] is not None:
        if p["max_length_skips_image_alt_tags"]:
            stripped = re.sub(r"!\[.*?\]\(.*?\)", "", content)
            n = len("".join(ch for ch in stripped if ch.isalnum()).strip())
        return n <= p["max_length"]
    if n == 0 or any(cnt > p["max_repeats"] for cnt in _ngram_repeats(content)):
        return False
    return not (p["check_disallowed_characters"] and _DISALLOWED.search(content))


_FORMAT_PATTERNS = {
    "heading": [(r"^#{1,6}\s+(.+?)$", re.MULTILINE), (r"<h[1-6][^>]*>(.*?)</h[1-6]>", re.IGNORECASE | re.DOTALL)],
    "bold": [(r"\*\*(.*?)\*\*", re.DOTALL), (r"__(.*?)__", re.DOTALL), (r"<b[^>]*>(.*?)</b>", re.IGNORECASE | re.DOTALL),
             (r"<strong[^>]*>(.*?)</strong>", re.IGNORECASE | re.DOTALL)],
    "italic": [(r"(?<!\*)\*(?!\*)(.*?)(?<!\*)\*(?!\*)", re.DOTALL), (r"(?<!_)_(?!_)(.*?)(?<!_)_(?!_)", re.DOTALL),
               (r"<i[^>]*>(.*?)</i>", re.IGNORECASE | re.DOTALL), (r"<em[^>]*>(.*?)</em>", re.IGNORECASE | re.DOTALL)],
}


def _format(p: dict, content: str) -> bool:
    found = [normalize_text(m) for pat, flags in _FORMAT_PATTERNS[p["format"]] for m in re.findall(pat, content, flags)]
    ref = p["text"]
    if not p["case_sensitive"]:
        ref, found = ref.lower(), [f.lower() for f in found]
    return any(_partial(ref, f) >= _thr(p["max_diffs"], ref) for f in found)


_SUPERSCRIPT = dict(zip("0123456789", "⁰¹²³⁴⁵⁶⁷⁸⁹", strict=True))


def _alnum(text: str) -> str:
    return "".join(c for c in normalize_text(text) if c.isalnum()).lower()


def _footnote(p: dict, content: str) -> bool:
    m = re.escape(p["marker"])
    spans = [x.span() for x in re.finditer(rf"\[\^{m}\](?!:)", content)]
    spans += [x.span() for x in re.finditer(rf"<sup[^>]*>{m}</sup>", content, re.IGNORECASE)]
    if all(c in _SUPERSCRIPT for c in p["marker"]):
        spans += [x.span() for x in re.finditer(re.escape("".join(_SUPERSCRIPT[c] for c in p["marker"])), content)]
    if not spans:
        return False
    for key, side in (("appears_before_marker", "before"), ("appears_after_marker", "after")):
        if not p[key]:
            continue
        target, threshold = _alnum(p[key]), _thr(p["max_diffs"], p[key])
        ok = False
        for start, end in spans:  # up to 200 characters on that side, cut to twice the target's length
            near = _alnum(content[max(0, start - 200):start] if side == "before" else content[end:end + 200])
            if near:
                k = min(len(near), len(target) * 2)
                near = (near[-k:] if side == "before" else near[:k]) if k > 0 else near
                if _partial(target, near) >= threshold:
                    ok = True
                    break
        if not ok:
            return False
    return True


_RUN = {"present": _presence, "absent": _presence, "order": _order, "table": _table, "baseline": _baseline,
        "format": _format, "footnote": _footnote, "math": olmocr_math.run_math}


def _run(p: dict, content: str) -> bool:
    # upstream's benchmark.py counts a check whose run raises as failed (e.g. table_parsing's IndexError on
    # some overlapping rowspan/colspan tables); only our own environment errors (Chromium) stop the run
    try:
        return bool(_RUN[p["type"]](p, content))
    except QuantgateError:
        raise
    except Exception:
        return False


def run_check(c: dict, content: str) -> bool | None:
    """True/False for a check, None when it cannot run here (math without Chromium)."""
    p = prepare(c)
    if p["type"] == "math" and olmocr_math.skip_reason():
        return SKIPPED
    return _run(p, content)


@dataclass(frozen=True)
class ChecksOutcome:
    passed: int
    failed: int
    skipped: Counter = field(default_factory=Counter)  # reason -> number of checks

    @property
    def rate(self) -> float | None:
        ran = self.passed + self.failed
        return self.passed / ran if ran else None


def run_checks(checks: list[dict], content: str) -> ChecksOutcome:
    """All of a page's checks; math equations of the page are rendered in one Chromium launch."""
    prepared = [prepare(c) for c in checks]
    maths = [p for p in prepared if p["type"] == "math"]
    reason = olmocr_math.skip_reason() if maths else None
    if maths and not reason:
        olmocr_math.render_many(e for p in maths for e in olmocr_math.equations_to_render(p, content))
    passed = failed = 0
    skipped: Counter = Counter()
    for p in prepared:
        if p["type"] == "math" and reason:
            skipped[reason] += 1
        elif _run(p, content):
            passed += 1
        else:
            failed += 1
    return ChecksOutcome(passed, failed, skipped)


def checks_pass_rate(checks: list[dict], content: str) -> tuple[float | None, int, int]:
    """(pass rate over runnable checks, passed, skipped). None when no check could run."""
    o = run_checks(checks, content)
    return o.rate, o.passed, sum(o.skipped.values())
