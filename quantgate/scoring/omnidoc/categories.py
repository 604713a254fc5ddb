"""OmniDocBench's block categories and what its end-to-end protocol (v1.0, upstream commit 24e6428) does
with each: the one place these rules live."""

from __future__ import annotations

# Truth blocks matched against the prediction's text blocks, in the order upstream lists them: a tie in
# reading order (blocks without one, such as headers) keeps this order, and the order decides ties in
# the matching.
TEXT_MATCHED = (
    "text_block", "title", "code_txt", "code_txt_caption", "reference", "equation_caption",
    "figure_caption", "figure_footnote", "table_caption", "table_footnote", "code_algorithm",
    "code_algorithm_caption", "header", "footer", "page_footnote", "page_number",
)

# Matched (so that a prediction of a header is not left over as an extra block) but not scored:
# a pair whose truth is mostly of these categories is dropped from the text and reading-order metrics.
TEXT_NOT_SCORED = frozenset({
    "figure_caption", "figure_footnote", "table_caption", "table_footnote", "code_algorithm",
    "code_algorithm_caption", "header", "footer", "page_footnote", "page_number", "equation_caption",
})

FORMULA = "equation_isolated"
TABLE = "table"

# Annotated but not used by the end-to-end metrics (figures, masks, inline formulas inside text, …).
UNSCORED = frozenset({
    "figure", "table_mask", "equation_ignore", "equation_inline", "footnote_mark", "abandon", "list",
    "text_mask", "need_mask",
})

KNOWN = frozenset(TEXT_MATCHED) | {FORMULA, TABLE} | UNSCORED

# The field each scored category's content is read from.
CONTENT_FIELD = {**{c: "text" for c in TEXT_MATCHED}, FORMULA: "latex", TABLE: "html"}
