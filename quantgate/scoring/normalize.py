"""Text normalisation applied before edit-distance metrics.

Default: Unicode NFKC (full-width forms, ligatures and compatibility characters fold to their
plain forms) and whitespace folding (any run of whitespace becomes one space; ends trimmed), so a
re-wrapped paragraph is not an error. Options: strip markdown syntax (headings, emphasis, list
markers, table pipes and rules, HTML tags) to score content only, and fold case."""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

_MD_PATTERNS = [
    (re.compile(r"<[^>]+>"), " "),                       # HTML tags (tables, <br>)
    (re.compile(r"^\s{0,3}#{1,6}\s+", re.M), ""),        # heading markers
    (re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+", re.M), ""),  # list markers
    (re.compile(r"^\s*\|?(?:\s*:?-{3,}:?\s*\|)+\s*:?-*:?\s*$", re.M), ""),  # table rules
    (re.compile(r"\|"), " "),                             # table pipes
    (re.compile(r"(\*\*|__|\*|_|`)"), ""),                # emphasis, code ticks
]


@dataclass(frozen=True)
class Normalization:
    nfkc: bool = True
    fold_whitespace: bool = True
    strip_markdown: bool = False
    lowercase: bool = False

    def __call__(self, text: str) -> str:
        if self.nfkc:
            text = unicodedata.normalize("NFKC", text)
        if self.strip_markdown:
            for pat, rep in _MD_PATTERNS:
                text = pat.sub(rep, text)
        if self.lowercase:
            text = text.casefold()
        if self.fold_whitespace:
            text = " ".join(text.split())
        return text


DEFAULT = Normalization()
