"""ParseBench's content-faithfulness rules: one record per rule as upstream's test-case files write it, and each
rule's score of one output in [0, 1] as upstream computes it (graded rules their fraction, the order rule 1 or
0). The counting is upstream's (``evaluation/metrics/parse/rules_bag.py``, ``rules_text.py``), re-expressed
here because no installable package runs it on this Python; fuzzy substring search is ``fuzzysearch``'s."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from itertools import groupby
from typing import Annotated, Literal

from fuzzysearch import find_near_matches
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from quantgate.scoring.parsebench import text as T

_CJK = (("\u4e00", "\u9fff"), ("\u3400", "\u4dbf"), ("\uf900", "\ufaff"), ("\u3040", "\u309f"),
        ("\u30a0", "\u30ff"), ("\uac00", "\ud7af"))
MIN_WORD = 2
MIN_SENTENCE = 7
_SENTENCE_SPLIT = re.compile(r"\n+|(?<!\d)\.(?!\d)|[!?]+|[\u3002\u3001\uFF0C\uFF01\uFF1F\uFF1B\u2026\u2025\u22EF]+")
_EDGE_PUNCT = re.compile(r"^[^\w]+|[^\w]+$")
_TAGGED = re.compile(r"<[^>]+>")


class _Rule(BaseModel):
    # the fields upstream's base rule schema declares; the grounding ones are kept but not read here
    model_config = ConfigDict(extra="forbid")
    id: str | None = None
    page: int | None = None
    max_diffs: int | float = 0
    tags: list[str] = Field(default_factory=list)
    layout_id: str | None = None
    layout_ids: list[str] = Field(default_factory=list)
    layout_bindings: dict[str, str | list[str]] = Field(default_factory=dict)
    # the dataset marks some rules unverified; upstream's runner drops those only when asked (verified_only, off
    # by default), so they are kept and scored here as its default run scores them
    verified: bool | None = None


class WordBag(_Rule):
    type: Literal["missing_word_percent", "unexpected_word_percent", "too_many_word_occurence_percent"]
    bag_of_word: dict[str, int]


class SentenceBag(_Rule):
    type: Literal["missing_sentence_percent", "unexpected_sentence_percent",
                  "too_many_sentence_occurence_percent", "extra_content"]
    bag_of_sentence: dict[str, int]
    original_md: str | None = None  # unexpected_sentence_percent only: sentences of the truth are not extra


class DigitBag(_Rule):
    type: Literal["bag_of_digit_percent"]
    bag_of_digit: dict[str, int]


class Order(_Rule):
    type: Literal["order"]
    before: str
    after: str
    # upstream's "light" normalization (formatting tags kept) is used by formatting rules, not this family
    keep_formatting_text_normalisation: Literal[False] = False


Rule = Annotated[WordBag | SentenceBag | DigitBag | Order, Field(discriminator="type")]
RULE = TypeAdapter(Rule)
TYPES: tuple[str, ...] = (*WordBag.model_fields["type"].annotation.__args__,  # type: ignore[union-attr]
                          *SentenceBag.model_fields["type"].annotation.__args__,  # type: ignore[union-attr]
                          "bag_of_digit_percent", "order")


def _is_cjk(ch: str) -> bool:
    return any(lo <= ch <= hi for lo, hi in _CJK)


def tokens(text: str, min_length: int = MIN_WORD) -> list[str]:
    """Unicode word runs; inside a run CJK and non-CJK stretches split apart, CJK ones kept at any length."""
    out: list[str] = []
    for run in re.findall(r"\w+", text):
        for cjk, chars in groupby(run, key=_is_cjk):
            piece = "".join(chars)
            if cjk or len(piece) >= min_length:
                out.append(piece)
    return out


def _bounded_count(needle: str, hay: str) -> int:
    return len(re.findall(r"(?<!\w)" + re.escape(needle) + r"(?!\w)", hay))


def _word_text(markdown: str, tables: Callable[[str], str]) -> str:
    prepared = tables(T.replace_latex(T.strip_diagrams(markdown)))
    return T.HTML_TAG.sub(" ", T.AUTOLINK.sub(r"\1", T.unescape(T.normalize(prepared))))


def _word_key(word: str) -> str:
    cleaned = T.HTML_TAG.sub(" ", T.AUTOLINK.sub(r"\1", T.unescape(T.normalize(word))))
    found = tokens(T.LEADING_MARKDOWN.sub("", cleaned).strip())
    return found[0] if found else ""


def word_bag(rule: WordBag) -> Counter[str]:
    bag: Counter[str] = Counter()
    for word, n in rule.bag_of_word.items():
        if key := _word_key(word):
            bag[key] += n
    return bag


def _word_seen(word: str, counted: Counter[str], full: str) -> int:
    # the larger of the token count and a word-bounded substring count (CJK: plain substring)
    return max(counted.get(word, 0), full.count(word) if any(map(_is_cjk, word)) else _bounded_count(word, full))


def score_words(rule: WordBag, markdown: str) -> float:
    bag = word_bag(rule)
    if rule.type == "unexpected_word_percent":
        seen = Counter(tokens(_word_text(markdown, T.strip_tables)))
        total = sum(seen.values())
        return 1.0 if total == 0 else sum(n for w, n in seen.items() if w in bag) / total
    full = _word_text(markdown, T.with_table_cells)
    if rule.type == "missing_word_percent":
        seen = Counter(tokens(full))
        need = sum(bag.values())
        return 1.0 if need == 0 else sum(min(_word_seen(w, seen, full), n) for w, n in bag.items()) / need
    seen = Counter(tokens(_word_text(markdown, T.strip_tables)))
    return _excess_score((_word_seen(w, seen, full), n) for w, n in bag.items())


def _excess_score(pairs) -> float:
    excess = over = 0
    for actual, allowed in pairs:
        excess += max(0, actual - allowed)
        over += max(actual, allowed)
    return 1.0 if over == 0 else 1.0 - excess / over


def sentence_key(fragment: str) -> str:
    s = T.MULTI_DOT.sub(" ", T.normalize(fragment).strip().strip("."))
    s = T.HTML_TAG.sub(" ", T.AUTOLINK.sub(r"\1", T.unescape(s)))
    s = _EDGE_PUNCT.sub("", T.LEADING_MARKDOWN.sub("", s).strip()).strip()
    s = re.sub(r"\s+", " ", s)
    return s if len(s) >= MIN_SENTENCE else ""


def sentence_bag(rule: SentenceBag) -> Counter[str]:
    bag: Counter[str] = Counter()
    for sentence, n in rule.bag_of_sentence.items():
        if key := sentence_key(sentence):
            bag[key] += n
    return bag


def _prepared(markdown: str, tables: Callable[[str], str]) -> str:
    return tables(T.MARKDOWN_IMAGE.sub(" ", T.replace_latex(T.strip_diagrams(markdown))))


def sentences(markdown: str) -> Counter[str]:
    """The output's sentences (tables left out): short pieces join the next one rather than vanish."""
    chunks, carry = [], ""
    for piece in _SENTENCE_SPLIT.split(T.MULTI_DOT.sub(" ", _prepared(markdown, T.strip_tables))):
        piece = piece.strip()
        if not piece:
            continue
        piece = f"{carry} {piece}" if carry else piece
        carry = "" if sentence_key(piece) else piece
        if not carry:
            chunks.append(piece)
    if carry:
        chunks = [*chunks[:-1], f"{chunks[-1]} {carry}"] if chunks else [carry]
    return Counter(k for k in map(sentence_key, chunks) if k)


def sentence_text(markdown: str) -> str:
    """The whole output normalized as the bag's sentences are, tables' cells appended: for substring counts."""
    s = T.MULTI_DOT.sub(" ", T.normalize(_prepared(markdown, T.with_table_cells)))
    return re.sub(r"\s+", " ", T.HTML_TAG.sub(" ", T.AUTOLINK.sub(r"\1", T.unescape(s))))


def _sentence_count(sentence: str, full: str) -> int:
    # a short sentence must stand as words of its own ("the" is not in "other"); a long one cannot mislead
    return _bounded_count(sentence, full) if len(sentence) < 20 else full.count(sentence)


def score_sentences(rule: SentenceBag, markdown: str) -> float:
    bag = sentence_bag(rule)
    if rule.type == "missing_sentence_percent":
        full, need = sentence_text(markdown), sum(bag.values())
        return 1.0 if need == 0 else sum(min(_sentence_count(s, full), n) for s, n in bag.items()) / need
    if rule.type == "too_many_sentence_occurence_percent":
        seen, full = sentences(markdown), sentence_text(markdown)
        return _excess_score((max(seen.get(s, 0), _sentence_count(s, full)), n) for s, n in bag.items())
    seen, joined = sentences(markdown), " ".join(bag)
    if rule.type == "extra_content":  # pass/fail: no sentence more often than the bag allows
        return float(all(n <= (bag.get(s, 0) or int(s in joined)) for s, n in seen.items()))
    truth = sentence_text(rule.original_md) if rule.original_md is not None else None
    total = sum(seen.values())
    hits = sum(n for s, n in seen.items() if s in bag or s in joined or (truth is not None and s in truth))
    return 1.0 if total == 0 else hits / total


def score_digits(rule: DigitBag, markdown: str) -> float:
    seen = Counter(c for c in _TAGGED.sub(" ", T.with_table_cells(markdown)) if c in "0123456789")
    need = sum(rule.bag_of_digit.values())
    return 1.0 if need == 0 else sum(min(seen[d], n) for d, n in rule.bag_of_digit.items()) / need


def _order_form(text: str) -> str:
    return re.sub(r" +", " ", T.MULTI_DOT.sub(" ", T.normalize(T.replace_latex(text))))


def score_order(rule: Order, markdown: str) -> float:
    """1 when the first 'before' starts ahead of the last 'after' (exact, else within a few edits), else 0."""
    before, after, hay = _order_form(rule.before), _order_form(rule.after), _order_form(markdown)
    first, last = hay.find(before), hay.rfind(after)
    if first != -1 and last != -1 and first < last:
        return 1.0

    def starts(needle: str, exact: int) -> list[int]:
        if exact != -1:
            return [exact]
        dist = min(max(len(needle) // 20, int(rule.max_diffs)), 15)
        return [m.start for m in find_near_matches(needle, hay, max_l_dist=dist)]

    b, a = starts(before, first), starts(after, last)
    return float(bool(b and a) and min(b) < max(a))


def problem(rule: WordBag | SentenceBag | DigitBag | Order) -> str | None:
    """Why upstream would refuse to build this rule (it raises), or None: such a rule is bad input here too."""
    bag = getattr(rule, "bag_of_word", None) or getattr(rule, "bag_of_sentence", None) \
        or getattr(rule, "bag_of_digit", None)
    if isinstance(rule, Order):
        before, after = _order_form(rule.before), _order_form(rule.after)
        if not before.strip() or not after.strip():
            return "'before' and 'after' must both keep some text after normalization"
        if rule.max_diffs > min(len(before), len(after)) // 2:
            return "max_diffs is over half the length of 'before' or 'after'"
        return None
    if not bag:
        return f"{rule.type} needs a non-empty bag"
    if any(n < 0 for n in bag.values()) or (not isinstance(rule, DigitBag) and any(not k.strip() for k in bag)):
        return "bag keys must be non-empty and counts non-negative"
    if isinstance(rule, DigitBag) and any(k not in "0123456789" for k in bag):
        return "bag_of_digit keys must be digits"
    if isinstance(rule, WordBag) and not word_bag(rule):
        return f"no word of bag_of_word is {MIN_WORD}+ characters after normalization"
    return None


def score(rule: WordBag | SentenceBag | DigitBag | Order, markdown: str) -> float:
    """One rule's score of one output, in [0, 1]."""
    if isinstance(rule, WordBag):
        return score_words(rule, markdown)
    if isinstance(rule, SentenceBag):
        return score_sentences(rule, markdown)
    if isinstance(rule, DigitBag):
        return score_digits(rule, markdown)
    return score_order(rule, markdown)
