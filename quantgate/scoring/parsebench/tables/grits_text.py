"""How GriTS-Con normalizes a table cell before comparing it, as upstream's ``normalize_cell_text``
(``evaluation/metrics/parse/utils.py`` at the pinned commit) does: <sup>/<sub> tags and Unicode super/subscripts
to plain text (in a table H₂O and x² are content, not footnote markers), inline formatting tags and markdown
emphasis dropped (models bold totals the truth does not), bullet and circled-x variants to one symbol, quotes and
fullwidth punctuation to ASCII, dashes to "-", trailing dot leaders dropped, whitespace collapsed, a cell of only
dashes to "-". Case and accents are kept. Written by hand, as the rest of the ParseBench family (text.py says
why); checked against upstream's in tests/unit/scoring/test_parsebench_tables_grits.py."""

from __future__ import annotations

import re

from quantgate.scoring.parsebench.tables.records_norm import sub_sup_plain
from quantgate.scoring.parsebench.text import _QUOTE_FOLD

_FORMATTING = re.compile(r"</?(?:b|i|u|s|em|strong|del|strike|mark|ins)>", re.IGNORECASE)
_SPAN = re.compile(r"</?span\b[^>]*>", re.IGNORECASE)
_MD_BOLD = re.compile(r"\*\*(.*?)\*\*|__(.*?)__")
_MD_ITALIC = re.compile(r"(?<!\*)\*(?!\*)(.*?)(?<!\*)\*(?!\*)|(?<!_)_(?!_)(.*?)(?<!_)_(?!_)")
_MD_STRIKE = re.compile(r"~~(.*?)~~")
# the cell-level symbol classes only (text.normalize folds more: ellipsis, micro sign, newlines)
_SYMBOLS = str.maketrans({**dict.fromkeys("●○◦∙⦁·", "•"), **dict.fromkeys("⮾ⓧ⨂", "⊗")})
_DASHES = str.maketrans(dict.fromkeys("–—‑‒−", "-"))
_DOT_LEADER = re.compile(r"\.{2,}\s*$")
_SPACES = re.compile(r"\s+")
_DASH_ONLY = re.compile(r"^[\s\-–—‑‒−]+$")


def normalize_cell_text(text: str) -> str:
    text = sub_sup_plain(text)  # the record match folds them the same way
    text = _SPAN.sub("", _FORMATTING.sub("", text))
    text = _MD_STRIKE.sub(r"\1", _MD_ITALIC.sub(r"\1\2", _MD_BOLD.sub(r"\1\2", text)))
    text = text.translate(_SYMBOLS).translate(_QUOTE_FOLD).translate(_DASHES)
    text = _SPACES.sub(" ", _DOT_LEADER.sub("", text)).strip()
    return "-" if _DASH_ONLY.match(text) else text
