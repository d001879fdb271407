"""Diffs the pages show: word-level inline diffs of two texts.

(The run page's message-by-message alignment of two key lists lives here too.)
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from difflib import SequenceMatcher

# a word, a run of whitespace, one CJK character, or one other character: Chinese has no spaces,
# so each character is its own token and a changed character does not mark the whole sentence
_TOKEN = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff00-\uffef]|\w+|\s+|[^\w\s]", re.UNICODE)

#: past this many tokens on a side an inline diff is not worth its cost; show both texts instead
MAX_WORD_DIFF_TOKENS = 20_000


@dataclass(frozen=True)
class Span:
    """A piece of an inline diff: ``op`` is ``equal``, ``delete`` (only in the old text) or ``insert``."""

    op: str
    text: str


def tokens(text: str) -> list[str]:
    return _TOKEN.findall(text)


def word_diff(old: str, new: str) -> list[Span] | None:
    """The inline diff of two texts by words (CJK by character); None when they are too long to diff."""
    a, b = tokens(old), tokens(new)
    if len(a) > MAX_WORD_DIFF_TOKENS or len(b) > MAX_WORD_DIFF_TOKENS:
        return None
    spans: list[Span] = []
    for op, i1, i2, j1, j2 in SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if op == "equal":
            spans.append(Span("equal", "".join(a[i1:i2])))
            continue
        if i2 > i1:
            spans.append(Span("delete", "".join(a[i1:i2])))
        if j2 > j1:
            spans.append(Span("insert", "".join(b[j1:j2])))
    return spans
