"""ParseBench's semantic-formatting rules: one record per rule as upstream's test-case files write it, and each
rule's score of one output as upstream's ``evaluation/metrics/parse/rules_formatting.py`` decides it (1 passed,
0 failed; the title-hierarchy rule its fraction of satisfied constraints).

Every rule reads the *raw* markdown/HTML (emphasis markers are what it judges), so nothing here goes through the
content family's normalization except the title labels, which upstream compares normalized. Re-expressed by hand
because no installable package runs upstream's rules on this Python (it needs 3.12); the regular expressions
encode upstream's detection rules (markers around the text, CommonMark flanking for ``**``, fillers that may not
cross a closing marker), checked against upstream in tests/unit/scoring/test_parsebench_formatting.py."""

from __future__ import annotations

import itertools
import re
import unicodedata
from typing import Annotated, Any, Literal

from pydantic import Field, TypeAdapter

from quantgate.scoring.parsebench import text as T
from quantgate.scoring.parsebench.rules import _Rule

KINDS = ("bold", "italic", "underline", "strikeout", "mark", "sup", "sub")
StyledType = Literal["is_bold", "is_not_bold", "is_italic", "is_not_italic", "is_underline", "is_not_underline",
                     "is_strikeout", "is_not_strikeout", "is_mark", "is_not_mark", "is_sup", "is_not_sup",
                     "is_sub", "is_not_sub"]


class Styled(_Rule):
    """``is_<kind>`` passes when the text carries the style somewhere; ``is_not_<kind>`` when it nowhere does."""
    type: StyledType
    text: str = ""

    @property
    def kind(self) -> str:
        return self.type.removeprefix("is_").removeprefix("not_")

    @property
    def wanted(self) -> bool:
        return not self.type.startswith("is_not_")


class MarkColor(_Rule):
    type: Literal["mark_color"]
    text: str = ""
    color: str = ""


class Title(_Rule):
    type: Literal["is_title"]
    text: str = ""
    level: int | None = None  # upstream ignores it: any heading level or a bold title line passes


class TitleHierarchy(_Rule):
    type: Literal["title_hierarchy_percent"]
    title_hierarchy: dict[str, Any] = Field(default_factory=dict)


class Latex(_Rule):
    type: Literal["is_latex"]
    formula: str = ""


class CodeBlock(_Rule):
    type: Literal["is_code_block"]
    language: str = ""
    code: str = ""


class PageSection(_Rule):
    type: Literal["is_header", "is_footer"]
    text: str = ""


FormatRule = Annotated[Styled | MarkColor | Title | TitleHierarchy | Latex | CodeBlock | PageSection,
                       Field(discriminator="type")]
FORMAT_RULE = TypeAdapter(FormatRule)
TYPES: tuple[str, ...] = tuple(
    t for cls in (Styled, MarkColor, Title, TitleHierarchy, Latex, CodeBlock, PageSection)
    for t in cls.model_fields["type"].annotation.__args__)  # type: ignore[union-attr]

# --- markup-tolerant text ---------------------------------------------------------------------------------------

# inline markers that may sit between (and around) the words of the rule's text: **, *, ~~, _, __, any HTML tag.
# Upstream writes the stars as \*{1,2} and the underscores as __?; repeated, those match exactly the runs that
# single \* and _ match, so the answers are the same, but a run of n stars no longer splits ~1.6^n ways when the
# match fails (36 stars took 9 s; a row of them in an output would hang the scorer)
_MARKUP = r"(?:\*|~~|_|</?\w+(?:\s[^>]*)?>)*"
_BACKSLASH_ESCAPE = re.compile(r"\\([!\"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~])")
_ESCAPED_SPACE = "\\ "  # what re.escape makes of a space


def _tolerant(escaped: str) -> str:
    return _MARKUP + (_MARKUP + r"\s+" + _MARKUP).join(escaped.split(_ESCAPED_SPACE)) + _MARKUP


def _until(stop: str) -> str:
    """Lazily any characters, none of which starts ``stop``: a span's filler cannot run into the next span."""
    return f"(?:(?!{stop}).)*?"


def _spans(kind: str, q: str) -> list[tuple[re.Pattern, str | None, str | None]]:
    """Where ``q`` (a regex) stands inside a ``kind`` span: each pattern with the opening and closing markers
    (regexes) a match needs around the text, for the arms whose fillers make a failing search slow."""
    i, s, m = re.IGNORECASE, re.IGNORECASE | re.DOTALL, re.IGNORECASE | re.MULTILINE
    if kind == "bold":
        star, tag = _until(r"\*\*"), _until("</b>")
        return [(re.compile(rf"\*\*(?!\s){star}{q}{star}(?<!\s)\*\*", s), r"\*\*", r"\*\*"),
                (re.compile(f"<b>{tag}{q}{tag}</b>", s), "<b>", "</b>"),
                # a heading line counts as bold; its fillers stay on the heading's line
                (re.compile(rf"^[ \t]*#{{1,6}}[ \t]+[^\n]*?{q}[^\n]*?[ \t]*(?:#+[ \t]*)?$", m), "#", None)]
    if kind == "italic":
        star, under = _until(r"\*(?!\*)"), _until("_(?!_)")
        return [(re.compile(rf"(?<!\*)\*(?!\*){star}{q}{star}\*(?!\*)", s), r"\*", r"\*"),
                (re.compile(f"(?<!_)_(?!_){under}{q}{under}_(?!_)", s), "_", "_"),
                *((re.compile(f"<{t}>{_until(f'</{t}>')}{q}{_until(f'</{t}>')}</{t}>", s), f"<{t}>", f"</{t}>")
                  for t in ("i", "em"))]
    if kind == "strikeout":
        return [(re.compile(f"~~{q}~~", i), None, None),
                (re.compile(f"<(?:s|del|strike)>{q}</(?:s|del|strike)>", i), None, None)]
    tags = {"underline": ("u", "ins"), "mark": ("mark",), "sup": ("sup",), "sub": ("sub",)}[kind]
    return [(re.compile(f"<{t}>{q}</{t}>", i), None, None) for t in tags]


def _could_match(text: str, opener: str | None, words: list[str], closer: str | None) -> bool:
    """Whether the opener, the first and the last word, and the closer occur in that order: what any match of a
    span pattern needs. Checked (in linear time) before the pattern, whose filler and markup runs can take
    cubic time to fail on an output of many tags or stars (upstream's rule runs into its 120 s stop there);
    when the check fails the pattern could not have matched, so the answer is unchanged."""
    needles = [n for n in (opener, words[0], *words[1:][-1:], closer) if n]
    at = 0
    for needle in needles:
        found = re.compile(needle, re.IGNORECASE).search(text, at)
        if found is None:
            return False
        at = found.end()
    return True


# each kind's markers, removed (content kept) from the output when another kind is judged, in upstream's order
_MARKERS: dict[str, tuple[tuple[re.Pattern, str], ...]] = {
    "bold": ((re.compile(r"\*\*\*(.+?)\*\*\*", re.DOTALL), r"\1"), (re.compile(r"\*\*(.+?)\*\*", re.DOTALL), r"\1"),
             (re.compile(r"</?b>", re.IGNORECASE), "")),
    "italic": ((re.compile(r"(?<!\*)\*(?!\*)(.+?)(?<!\*)\*(?!\*)"), r"\1"),
               (re.compile(r"(?<!_)_(?!_)(.+?)(?<!_)_(?!_)"), r"\1"), (re.compile(r"</?(?:i|em)>", re.IGNORECASE), "")),
    "underline": ((re.compile(r"</?(?:u|ins)>", re.IGNORECASE), ""),),
    "strikeout": ((re.compile("~~"), ""), (re.compile(r"</?(?:s|del|strike)>", re.IGNORECASE), "")),
    "mark": ((re.compile(r"</?mark\b[^>]*>", re.IGNORECASE), ""),),
    "sup": ((re.compile(r"</?sup>", re.IGNORECASE), ""),),
    "sub": ((re.compile(r"</?sub>", re.IGNORECASE), ""),),
}


def only_markers_of(text: str, kind: str) -> str:
    """The text with every other kind's inline markers removed (whitespace folded within lines, no space before
    closing punctuation): nested markup then no longer hides a span of ``kind``."""
    for other, steps in _MARKERS.items():
        if other != kind:
            for pattern, repl in steps:
                text = pattern.sub(repl, text)
    text = re.sub(r" ?\n ?", "\n", re.sub(r"[^\S\n]+", " ", text))
    return re.sub(r" ([,;:!?.)\]}])", r"\1", text)


_SUPERSCRIPTS = frozenset("⁰¹²³⁴⁵⁶⁷⁸⁹⁺⁻⁼⁽⁾ⁿⁱᵃᵇᶜᵈᵉᶠᵍʰʲᵏˡᵐᵒᵖʳˢᵗᵘᵛʷˣʸᶻᴬᴮᴰᴱᴳᴴᴵᴶᴷᴸᴹᴺᴼᴾᴿᵀᵁⱽᵂ")
_SUBSCRIPTS = frozenset("₀₁₂₃₄₅₆₇₈₉₊₋₌₍₎ₐₑₕᵢⱼₖₗₘₙₒₚᵣₛₜᵤᵥₓ")


def _in_unicode_script(query: str, text: str, chars: frozenset[str]) -> bool:
    """Whether a run of Unicode super/subscript characters reads (compatibility-decomposed) as the query."""
    runs = re.findall("[" + re.escape("".join(sorted(chars))) + "]+", text)
    return any(query.lower() in unicodedata.normalize("NFKD", run).lower() for run in runs)


def styled(rule: Styled, markdown: str) -> bool:
    """Whether the rule's text carries its style anywhere in the output."""
    clean, escaped = _BACKSLASH_ESCAPE.sub(r"\1", markdown), re.escape(rule.text.strip())
    words = escaped.split(_ESCAPED_SPACE)
    if any(_could_match(clean, o, words, c) and p.search(clean) for p, o, c in _spans(rule.kind, _tolerant(escaped))):
        return True
    bare = only_markers_of(clean, rule.kind)
    simple = escaped.replace(_ESCAPED_SPACE, r"\s+")
    if any(_could_match(bare, o, words, c) and p.search(bare) for p, o, c in _spans(rule.kind, simple)):
        return True
    if rule.kind in ("sup", "sub"):
        return _in_unicode_script(rule.text.strip(), markdown, _SUPERSCRIPTS if rule.kind == "sup" else _SUBSCRIPTS)
    return False


_MARK_TAG = re.compile(r"<mark\b([^>]*)>([\s\S]+?)</mark>", re.IGNORECASE)


def mark_color(rule: MarkColor, markdown: str) -> bool:
    """The text inside a <mark> whose attributes name the colour."""
    text, color = re.compile(_tolerant(re.escape(rule.text.strip())), re.IGNORECASE), rule.color.strip().lower()
    return any(text.search(m.group(2)) and color in m.group(1).lower()
               for variant in (markdown, only_markers_of(markdown, "mark")) for m in _MARK_TAG.finditer(variant))


def variants(markdown: str) -> list[str]:
    """The output as written, HTML-entity decoded, and with escaped heading/bold markers undone (each once)."""
    decoded = T.unescape(markdown)
    unescaped = re.sub(r"(?m)^\\(#{1,6}\s+)", r"\1", decoded).replace(r"\*\*", "**")
    return list(dict.fromkeys((markdown, decoded, unescaped)))


def _label(text: str) -> str:
    return T.normalize(text).strip()


_MD_HEADING = re.compile(r"^\s*(#{1,6})\s+(.+?)\s*$")
_HTML_HEADING = re.compile(r"<h([1-6])[^>]*>\s*(.*?)\s*</h\1>", re.IGNORECASE)
_BOLD_LINE = (re.compile(r"^\s*\*\*\s*(.+?)\s*\*\*\s*$"), re.compile(r"^\s*<b[^>]*>\s*(.*?)\s*</b>\s*$", re.IGNORECASE))
BOLD_LEVEL = 7  # a line that is only bold text is a title below every heading level


def title_events(markdown: str) -> list[tuple[int, int, str]]:
    """Every title the output writes, as (line, level, normalized label), sorted: headings (markdown or HTML)
    at their level, whole-line bold at BOLD_LEVEL."""
    found: set[tuple[int, int, str]] = set()
    for variant in variants(markdown):
        for no, line in enumerate(variant.splitlines()):
            raw: list[tuple[int, str]] = []
            if m := _MD_HEADING.match(line):
                raw.append((len(m.group(1)), re.sub(r"\s+#+\s*$", "", m.group(2)).strip()))
            raw += [(int(h.group(1)), re.sub(r"<[^>]+>", " ", h.group(2)).strip()) for h in _HTML_HEADING.finditer(line)]
            if m := _BOLD_LINE[0].match(line):
                raw.append((BOLD_LEVEL, m.group(1)))
            if m := _BOLD_LINE[1].match(line):
                raw.append((BOLD_LEVEL, re.sub(r"<[^>]+>", " ", m.group(1)).strip()))
            found.update((no, level, label) for level, text in raw if (label := _label(text)))
    return sorted(found)


def is_title(rule: Title, markdown: str) -> bool:
    q = _tolerant(re.escape(rule.text.strip()))
    forms = [re.compile(rf"^#{{1,6}}\s+{q}", re.MULTILINE | re.IGNORECASE),
             re.compile(rf"<h[1-6][^>]*>\s*{q}\s*</h[1-6]>", re.IGNORECASE),
             re.compile(rf"^\s*\*\*\s*{q}\s*\*\*\s*$", re.MULTILINE | re.IGNORECASE),
             re.compile(rf"^\s*<b[^>]*>\s*{q}\s*</b>\s*$", re.MULTILINE | re.IGNORECASE)]
    if any(p.search(v) for v in variants(markdown) for p in forms):
        return True
    # inner markup can defeat the patterns: compare the normalized labels of the titles written
    label = _label(rule.text.strip())
    return bool(label) and any(t == label for _, _, t in title_events(markdown))


def hierarchy_constraints(tree: dict[str, Any]) -> tuple[set[str], list[tuple[str, str, bool]]]:
    """The titles the hierarchy names and its edges (parent, child, child must be deeper), siblings listed in
    order adding (earlier, later, False). Empty labels and non-text keys are skipped, as upstream skips them."""
    titles: set[str] = set()
    edges: list[tuple[str, str, bool]] = []

    def children_of(parent: str, node: Any) -> None:
        items: list[tuple[str, Any]] = []
        if isinstance(node, str):
            items = [(node, None)]
        elif isinstance(node, dict):
            items = list(node.items())
        elif isinstance(node, list):
            for child in node:
                items += [(child, None)] if isinstance(child, str) else \
                    list(child.items()) if isinstance(child, dict) else []
        order: list[str] = []
        for key, grand in items:
            if not isinstance(key, str) or not (child := _label(key)):
                continue
            titles.add(child)
            edges.append((parent, child, True))
            order.append(child)
            children_of(child, grand)
        edges.extend((a, b, False) for a, b in itertools.pairwise(order))

    for key, node in tree.items():
        if isinstance(key, str) and (root := _label(key)):
            titles.add(root)
            children_of(root, node)
    return titles, edges


def hierarchy_score(rule: TitleHierarchy, markdown: str) -> float:
    """The fraction of the hierarchy's constraints met: each title written, each child after its parent and at a
    deeper level, each sibling after the one listed before it (first occurrences count)."""
    first: dict[str, tuple[int, int]] = {}
    for no, level, label in title_events(markdown):
        first.setdefault(label, (no, level))
    titles, edges = hierarchy_constraints(rule.title_hierarchy)
    if not titles:
        return 0.0
    met = sum(t in first for t in titles)
    for parent, child, deeper in edges:
        if parent in first and child in first:
            (pl, plev), (cl, clev) = first[parent], first[child]
            met += pl < cl and (plev < clev or not deeper)
    return max(0.0, min(1.0, met / (len(titles) + len(edges))))


_LATEX_SPANS = (re.compile(r"(?<!\\)\$\$(.+?)(?<!\\)\$\$", re.DOTALL),
                re.compile(r"(?<!\\)\$(?!\$)(.+?)(?<!\\)\$(?!\$)", re.DOTALL),
                re.compile(r"\\\((.+?)\\\)", re.DOTALL), re.compile(r"\\\[(.+?)\\\]", re.DOTALL))
_DELIMITERS = (("$$", "$$"), ("$", "$"), ("\\(", "\\)"), ("\\[", "\\]"))


def formula_key(formula: str) -> str:
    """A formula without its delimiters, entities decoded, all whitespace removed."""
    body = formula.strip()
    for left, right in _DELIMITERS:
        if body.startswith(left) and body.endswith(right) and len(body) >= len(left) + len(right):
            body = body[len(left):-len(right)].strip()
            break
    return re.sub(r"\s+", "", T.unescape(body))


def formulas(markdown: str) -> set[str]:
    return {k for v in variants(markdown) for p in _LATEX_SPANS for m in p.finditer(v) if (k := formula_key(m.group(1)))}


_FENCE = re.compile(r"(?ms)^[ \t]*```(?P<lang>[^\n`]*)\n(?P<body>.*?)[ \t]*\n[ \t]*```[ \t]*$")


def _collapse(text: str) -> str:
    return re.sub(r"\s+", " ", text)


def has_code(rule: CodeBlock, markdown: str) -> bool:
    """A fenced block in the rule's language holding the code (as written, or whitespace-collapsed)."""
    lang, code = rule.language.strip().lower(), rule.code.strip()
    bodies = [m.group("body").strip() for v in variants(markdown) for m in _FENCE.finditer(v)
              if m.group("lang").strip().lower() == lang]
    return any(code in b or _collapse(code) in _collapse(b) for b in bodies)


_DASHES = "-\u2010\u2011\u2012\u2013\u2014\u2015\u2212"


def in_section(rule: PageSection, markdown: str) -> bool:
    """The text inside the output's <page_header> / <page_footer> tag (any dash matching any dash). Upstream
    prefers a parser's structured page sections; a markdown output has none, so its tag fallback is the rule."""
    q = "".join(f"[{re.escape(_DASHES)}]" if c in _DASHES else r"\s+" if c == " " else re.escape(c)
                for c in rule.text.strip())
    tag = "page_header" if rule.type == "is_header" else "page_footer"
    return bool(re.search(f"<{tag}>[^<]*?{q}[^<]*?</{tag}>", markdown, re.IGNORECASE | re.DOTALL))


def problem(rule: Any) -> str | None:
    """Why upstream would refuse to build this rule (it raises), or None."""
    if isinstance(rule, TitleHierarchy):
        return None if rule.title_hierarchy else "title_hierarchy must be a non-empty object"
    if isinstance(rule, Latex):
        return None if formula_key(rule.formula) else "formula must keep some text without its delimiters"
    if isinstance(rule, CodeBlock):
        return None if rule.language.strip() and rule.code.strip() else "language and code must both be non-empty"
    if isinstance(rule, MarkColor) and not rule.color.strip():
        return "color must be non-empty"
    return None if rule.text.strip() else "text must be non-empty"


def score(rule: Any, markdown: str) -> float:
    """One rule's score of one output, in [0, 1]."""
    if isinstance(rule, TitleHierarchy):
        return hierarchy_score(rule, markdown)
    if isinstance(rule, Styled):
        return float(styled(rule, markdown) == rule.wanted)
    if isinstance(rule, MarkColor):
        return float(mark_color(rule, markdown))
    if isinstance(rule, Title):
        return float(is_title(rule, markdown))
    if isinstance(rule, Latex):
        return float(formula_key(rule.formula) in formulas(markdown))
    if isinstance(rule, CodeBlock):
        return float(has_code(rule, markdown))
    return float(in_section(rule, markdown))
