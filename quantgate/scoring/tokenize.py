"""Words for the word-level metrics (wer, bow_f1): runs of non-space characters, except that each
character of a script written without spaces between words — Chinese, Japanese kana, Thai, Lao, Khmer,
Myanmar (with the punctuation and marks those scripts share, by Unicode Script_Extensions) — is a token
of its own, as sacrebleu's ``zh`` and ``char`` tokenizers count them. Text in any other script splits
exactly as ``str.split()`` does.

Written here rather than taken from sacrebleu: its ``zh`` tokenizer also splits punctuation off Latin
words (its 13a rules), which would change wer on Latin pages, and it leaves kana and Thai whole."""

from __future__ import annotations

import regex

_UNSPACED = r"\p{scx=Han}\p{scx=Hiragana}\p{scx=Katakana}\p{scx=Thai}\p{scx=Lao}\p{scx=Khmer}\p{scx=Myanmar}"
_TOKEN = regex.compile(rf"[{_UNSPACED}]|[^\s{_UNSPACED}]+")


def words(text: str) -> list[str]:
    return _TOKEN.findall(text)
