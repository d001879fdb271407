"""Word-level inline diffs of two texts (CJK split by character), trimmed for display."""

from __future__ import annotations

import re
from dataclasses import dataclass
from difflib import SequenceMatcher

#: CJK characters (kana, ideographs, full-width forms), for a character class: each is a word of its own
_CJK = r"\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff00-\uffef"
# a word, a run of whitespace, one CJK character, or one other character: Chinese has no spaces,
# so each character is its own token and a changed character does not mark the whole sentence
_TOKEN = re.compile(rf"[{_CJK}]|\w+|\s+|[^\w\s]", re.UNICODE)

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


# --------------------------------------------------------------------------- inline diffs, trimmed for display


@dataclass(frozen=True)
class Skipped:
    """Unchanged text an inline diff leaves out (``chars`` characters); ``op`` is ``skip``."""

    chars: int
    op: str = "skip"


#: equal text longer than this is shown as its first and last ``EQUAL_CONTEXT`` characters around a gap
EQUAL_CONTEXT = 160
#: deleted or inserted text longer than this is cut after its first ``CHANGE_CHARS`` characters
CHANGE_CHARS = 1500
#: texts whose changed middle (after the common prefix and suffix) exceeds this many characters are not diffed
MAX_INLINE_DIFF_CHARS = 60_000

_BOUNDARY = re.compile(rf"[\s\W{_CJK}]")


def _common_prefix(a: str, b: str) -> int:
    n = min(len(a), len(b))
    lo, hi = 0, n
    while lo < hi:  # binary search on slices: C-speed comparisons instead of a Python loop
        mid = (lo + hi + 1) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _back_to_boundary(text: str, cut: int) -> int:
    """Move ``cut`` back to just after a space (or, when none is near, a punctuation mark), so no word is split."""
    space = max(text.rfind(" ", max(0, cut - 80), cut), text.rfind("\n", max(0, cut - 80), cut))
    if space >= 0:
        return space + 1
    while cut > 0 and not _BOUNDARY.match(text[cut - 1]):
        cut -= 1
    return cut


def inline_diff(old: str, new: str) -> list[Span | Skipped] | None:
    """The word diff of ``old`` and ``new``, trimmed for display; None when too big to diff.

    The common prefix and suffix are taken off first (cheap, and most changes are
    local: a shortened argument, a patched message), long unchanged stretches are
    shown as a :class:`Skipped` gap and long deletions or insertions are cut.
    """
    prefix = _back_to_boundary(old, _common_prefix(old, new))
    rest_old, rest_new = old[prefix:], new[prefix:]
    suffix = _common_prefix(rest_old[::-1], rest_new[::-1])
    # start the common suffix at a space (or a punctuation mark), so no word is split
    if suffix:
        start = len(rest_old) - suffix
        space = rest_old.find(" ", start, start + 80)
        if space >= 0:
            suffix = len(rest_old) - space
        else:
            while suffix and not _BOUNDARY.match(rest_old[len(rest_old) - suffix]):
                suffix -= 1
    mid_old = rest_old[: len(rest_old) - suffix]
    mid_new = rest_new[: len(rest_new) - suffix]
    if len(mid_old) > MAX_INLINE_DIFF_CHARS or len(mid_new) > MAX_INLINE_DIFF_CHARS:
        return None
    middle = word_diff(mid_old, mid_new)
    if middle is None:
        return None
    middle = _readable(middle, mid_old, mid_new)
    spans = [Span("equal", old[:prefix]), *middle, Span("equal", rest_old[len(rest_old) - suffix :])]
    return _trim([s for s in spans if s.text])


def _readable(spans: list[Span], old: str, new: str) -> list[Span]:
    """Fold the coincidences a word diff finds in unrelated text (a space, a repeated word) into the change.

    When little of the two texts matches, the change is shown as one deletion and one insertion;
    otherwise equal stretches of only a few characters between changes are folded into them.
    """
    same = sum(len(s.text) for s in spans if s.op == "equal")
    if same < 0.3 * max(len(old), len(new)):
        return [s for s in (Span("delete", old), Span("insert", new)) if s.text]
    out: list[Span] = []
    deleted: list[str] = []
    inserted: list[str] = []

    def flush() -> None:
        if deleted:
            out.append(Span("delete", "".join(deleted)))
        if inserted:
            out.append(Span("insert", "".join(inserted)))
        deleted.clear()
        inserted.clear()

    for k, span in enumerate(spans):
        if span.op == "equal":
            if len(span.text.strip()) > 3 or k in (0, len(spans) - 1):
                flush()
                out.append(span)
            else:
                deleted.append(span.text)
                inserted.append(span.text)
        elif span.op == "delete":
            deleted.append(span.text)
        else:
            inserted.append(span.text)
    flush()
    return out


def _trim(spans: list[Span]) -> list[Span | Skipped]:
    out: list[Span | Skipped] = []
    last = len(spans) - 1
    for k, span in enumerate(spans):
        text = span.text
        if span.op == "equal":
            head = 0 if k == 0 else EQUAL_CONTEXT
            tail = 0 if k == last else EQUAL_CONTEXT
            if len(text) > head + tail + 40:
                # cut at spaces near the edges of the context, so the words shown are whole
                if head:
                    space = text.find(" ", head - 30, head + 30)
                    head = space + 1 if space >= 0 else head
                if tail:
                    space = text.find(" ", len(text) - tail - 30, len(text) - tail + 30)
                    tail = len(text) - space - 1 if space >= 0 else tail
                if head:
                    out.append(Span("equal", text[:head]))
                out.append(Skipped(len(text) - head - tail))
                if tail:
                    out.append(Span("equal", text[-tail:]))
                continue
        elif len(text) > CHANGE_CHARS + 40:
            out.append(Span(span.op, text[:CHANGE_CHARS]))
            out.append(Skipped(len(text) - CHANGE_CHARS, op=f"skip-{span.op}"))
            continue
        out.append(span)
    return out
