"""The summary body: fixed section headings, the code-written ``## Pinned facts``, a size cap.

Both summarizers produce the same shape::

    ## Focus                        (only when a focus topic matched something)
    ## Decisions
    ## Files and identifiers
    ## Errors
    ## Constraints and preferences
    ## Progress and next steps
    ## Key tool results
    ## Pinned facts                 (always, appended by code; parsed back by facts.py)

:func:`finalize_summary` strips whatever a model wrote under ``## Pinned
facts``, appends the code's own section, and caps the whole body at a token
budget, so repeated compressions do not grow it. Pinned facts have their own
share (:data:`PINNED_SHARE`, more when the prose is short); the prose is cut
by dropping whole items (a bullet with its continuation lines) by priority:
tool results first, user turns and constraints last, the oldest (lowest
``#N``) first within a priority. A line or a heading is never cut in half; a
section whose items are all dropped loses its heading.

The headings are written in the session's language (:func:`session_language`:
English, or Chinese when the user writes Chinese); :func:`parse_sections` reads
either back to the same canonical (English) heading, so an earlier summary in
one language merges into the next.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from .facts import PINNED_HEADING, render_fact
from .language import texts_language
from .tokens import count_text_tokens
from .types import Fact

FOCUS = "## Focus"
SECTION_HEADINGS: tuple[str, ...] = (
    "## Decisions",
    "## Files and identifiers",
    "## Errors",
    "## Constraints and preferences",
    "## Progress and next steps",
    "## Key tool results",
)
ALL_HEADINGS: tuple[str, ...] = (FOCUS, *SECTION_HEADINGS, PINNED_HEADING)

#: the headings of a Chinese session's summary (the pinned facts keep theirs: code parses it back)
HEADINGS_ZH: dict[str, str] = {
    FOCUS: "## 关注",
    "## Decisions": "## 决定",
    "## Files and identifiers": "## 文件和标识",
    "## Errors": "## 错误",
    "## Constraints and preferences": "## 约束",
    "## Progress and next steps": "## 进展",
    "## Key tool results": "## 工具结果",
}

_HEADING = re.compile(r"^#{1,3}\s+(.+?)\s*$", re.M)
_CANONICAL = {h[3:].lower(): h for h in ALL_HEADINGS} | {zh[3:]: h for h, zh in HEADINGS_ZH.items()}
_ZH_TITLES = {zh[3:] for zh in HEADINGS_ZH.values()}


def session_language(user_texts: Sequence[str]) -> str:
    """``"zh"`` when the user writes mostly Chinese, else ``"en"`` (:func:`.language.texts_language`)."""
    return texts_language(user_texts)


#: share of the cap the pinned facts may take (the prose keeps at least the rest) before facts are dropped
PINNED_SHARE = 0.5

#: what the prose trim drops first (lowest), by section; lines of unknown sections get 2
SECTION_PRIORITY = {
    "## Key tool results": 0,
    "## Files and identifiers": 1,
    "## Decisions": 2,
    "": 2,
    FOCUS: 3,
    "## Errors": 3,
    "## Progress and next steps": 3,
    "## Constraints and preferences": 4,
}
#: line prefixes that outrank their section: user turns are the ground truth of intent
_USER_LINE = re.compile(r"^\s*[-*]\s*(?:\*\*)?User\b|^\s*[-*]\s*(?:\*\*)?用户")
_NEXT_LINE = re.compile(r"^\s*[-*]\s*(?:\*\*)?(?:Next\b|下一步)")
_INDEX = re.compile(r"#(\d+)")


def parse_sections(body: str) -> dict[str, list[str]]:
    """Map heading -> lines of a markdown body; text before the first heading goes under ``""``.

    Headings are matched case-insensitively to the fixed ones (``# Errors`` and
    ``## errors`` both become ``## Errors``); unknown headings are kept as written.
    """
    sections: dict[str, list[str]] = {}
    current = ""
    for line in body.splitlines():
        m = _HEADING.match(line)
        if m:
            title = m.group(1).strip().rstrip(":：")
            current = _CANONICAL.get(title.lower(), "## " + title)
            sections.setdefault(current, [])
            continue
        if line.strip():
            sections.setdefault(current, []).append(line.rstrip())
    return sections


def _zh_heading(line: str) -> bool:
    m = _HEADING.match(line)
    return m is not None and m.group(1).strip().rstrip(":：") in _ZH_TITLES


def render_sections(sections: dict[str, list[str]], language: str = "en") -> str:
    """Markdown text of ``sections`` in the fixed order (unknown sections after, pinned facts excluded),
    headings in ``language`` ("en" or "zh")."""
    names = HEADINGS_ZH if language == "zh" else {}
    order = [h for h in ALL_HEADINGS if h != PINNED_HEADING]
    order += [h for h in sections if h not in ALL_HEADINGS and h]
    parts = []
    if sections.get(""):
        parts.append("\n".join(sections[""]))
    for heading in order:
        lines = sections.get(heading)
        if lines:
            parts.append(names.get(heading, heading) + "\n" + "\n".join(lines))
    return "\n\n".join(parts)


#: kinds dropped whole, lowest first, before the balanced trimming of the middle kinds
_DROP_FIRST = ("identifier", "command")
#: kinds trimmed together: the one with most (weighted) lines loses its weakest, oldest line first;
#: an assistant's "let's …" weighs more than an edited file or an error, so it goes sooner
_BALANCED = ("decision", "path", "error")
_WEIGHT = {"decision": 1.5, "path": 0.8, "error": 1.0}


def _fit_pinned(facts: Sequence[Fact], budget: int) -> list[str]:
    lines = [render_fact(f) for f in facts]
    costs = [count_text_tokens(line) + 1 for line in lines]
    total = sum(costs)
    if total <= budget:
        return lines
    keep = [True] * len(facts)

    def drop(i: int) -> None:
        nonlocal total
        keep[i] = False
        total -= costs[i]

    for kind in _DROP_FIRST:
        for i, fact in enumerate(facts):
            if total > budget and keep[i] and fact.kind == kind:
                drop(i)
    while total > budget:
        alive = {k: [i for i, f in enumerate(facts) if keep[i] and f.kind == k] for k in _BALANCED}
        kind = max(_BALANCED, key=lambda k: len(alive[k]) * _WEIGHT[k])
        if not alive[kind]:
            break
        # the weakest first (paths: listed before read before edited), what tools printed before what
        # users said; within each, the oldest first
        drop(min(alive[kind], key=lambda i: (facts[i].rank, facts[i].role in ("user", "summary"), i)))
    for kind in ("approval", "constraint"):  # only when they alone exceed the cap
        for i, fact in enumerate(facts):
            if total > budget and keep[i] and fact.kind == kind:
                drop(i)
    return [line for line, k in zip(lines, keep, strict=True) if k]


def _items(lines: list[str]) -> list[list[str]]:
    """Lines grouped into items: a bullet (or a plain line) with the indented lines that continue it."""
    items: list[list[str]] = []
    for line in lines:
        if items and line[:1].isspace() and line.strip():
            items[-1].append(line)
        else:
            items.append([line])
    return items


def _priority(heading: str, item: list[str]) -> int:
    first = item[0]
    if _USER_LINE.match(first):
        return 5
    base = SECTION_PRIORITY.get(heading, 2)
    return min(base, 2) if _NEXT_LINE.match(first) else base


def _trim_prose(sections: dict[str, list[str]], budget: int) -> dict[str, list[str]]:
    """Drop whole items, lowest priority first and the oldest first within a priority, until it fits."""
    grouped = {h: _items(lines) for h, lines in sections.items()}
    candidates = []  # (priority, age, heading, item number, cost)
    total = 0
    for heading, items in grouped.items():
        total += 4 if heading else 0
        for n, item in enumerate(items):
            cost = sum(count_text_tokens(line) + 1 for line in item)
            total += cost
            found = _INDEX.search(item[0])
            age = int(found.group(1)) if found else -1  # no #N: treat as old (carried or unnumbered)
            candidates.append((_priority(heading, item), age, n, heading, cost))
    if total <= budget:
        return sections
    dropped: set[tuple[str, int]] = set()
    left = {h: len(items) for h, items in grouped.items()}
    for _, _, n, heading, cost in sorted(candidates, key=lambda c: (c[0], c[1], c[2])):
        if total <= budget:
            break
        dropped.add((heading, n))
        total -= cost
        left[heading] -= 1
        if left[heading] == 0 and heading:
            total -= 4  # the heading goes with its last item
    return {
        h: [line for n, item in enumerate(items) if (h, n) not in dropped for line in item]
        for h, items in grouped.items()
    }


def finalize_summary(prose: str, facts: Sequence[Fact], max_tokens: int) -> str:
    """The final body: ``prose`` sections (model or extractive) + the code's ``## Pinned facts``, capped.

    Pinned facts get up to :data:`PINNED_SHARE` of ``max_tokens`` (more if the
    prose is short); the prose is trimmed by whole items, by priority, to fit
    what is left (see the module docstring).
    """
    language = "zh" if any(_zh_heading(line) for line in prose.splitlines()) else "en"
    sections = parse_sections(prose)
    sections.pop(PINNED_HEADING, None)
    budget = max(64, max_tokens)
    pinned_budget = int(budget * PINNED_SHARE)
    prose_tokens = count_text_tokens(render_sections(sections))
    pinned_budget = max(pinned_budget, budget - prose_tokens - 8)
    pinned_lines = _fit_pinned(facts, pinned_budget - 6)
    pinned = PINNED_HEADING + "\n" + ("\n".join(pinned_lines) if pinned_lines else "- (none)")
    left = budget - count_text_tokens(pinned) - 4
    sections = _trim_prose(sections, max(0, left))
    text = render_sections(sections, language)
    body = (text + "\n\n" + pinned) if text else pinned
    if count_text_tokens(body) > budget:  # a pathological single line: hard cut, pinned facts first
        body = pinned
        while pinned_lines and count_text_tokens(body) > budget:
            pinned_lines.pop()
            body = PINNED_HEADING + "\n" + "\n".join(pinned_lines)
    return body.strip()
