"""Two summary versions compared section by section: what changed first, word by word.

A summary is Markdown in ``## `` sections. The versions are split at their headings and matched by heading;
inside a changed section the lines are diffed first and only the lines that differ are diffed word by word,
so two long summaries that differ in a few lines cost a few small diffs, not one quadratic one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from difflib import SequenceMatcher

from .words import Span, word_diff

_HEADING = re.compile(r"^#{1,6}\s+\S")


@dataclass
class SectionDiff:
    """One section of either version: ``state`` is ``changed``, ``same``, ``only_a`` or ``only_b``."""

    heading: str
    state: str
    #: the section's body A → B: equal, deleted and inserted spans (for ``same``: the text, one equal span)
    spans: list[Span] = field(default_factory=list)
    #: words deleted and inserted, to say how much changed
    deleted: int = 0
    inserted: int = 0


def split_sections(text: str) -> list[tuple[str, str]]:
    """``(heading, body)`` in order; text before the first heading has heading ``""``."""
    sections: list[tuple[str, list[str]]] = [("", [])]
    for line in text.splitlines():
        if _HEADING.match(line):
            sections.append((line.strip(), []))
        else:
            sections[-1][1].append(line)
    return [(h, "\n".join(lines).strip("\n")) for h, lines in sections if h or any(x.strip() for x in lines)]


def lines_diff(a: str, b: str) -> list[Span]:
    """A → B by lines, the lines that were replaced diffed word by word (each small)."""
    la, lb = a.splitlines(keepends=True), b.splitlines(keepends=True)
    spans: list[Span] = []
    for op, i1, i2, j1, j2 in SequenceMatcher(None, la, lb, autojunk=False).get_opcodes():
        old, new = "".join(la[i1:i2]), "".join(lb[j1:j2])
        if op == "equal":
            spans.append(Span("equal", old))
        elif op == "replace":
            words = word_diff(old, new)
            spans.extend(words if words is not None else [Span("delete", old), Span("insert", new)])
        else:
            spans.extend([Span("delete", old)] if old else [Span("insert", new)])
    return _merged([s for s in spans if s.text])


def _merged(spans: list[Span]) -> list[Span]:
    out: list[Span] = []
    for span in spans:
        if out and out[-1].op == span.op:
            out[-1] = Span(span.op, out[-1].text + span.text)
        else:
            out.append(span)
    return out


def _words(text: str) -> int:
    return len(text.split())


def section_diff(a: str, b: str) -> list[SectionDiff]:
    """The sections of A and B matched by heading: the changed ones first (in B's order, then those only in A),
    then the unchanged ones."""
    sections_a, sections_b = split_sections(a), split_sections(b)
    bodies_a = dict(sections_a)
    headings_b = {h for h, _ in sections_b}
    changed: list[SectionDiff] = []
    same: list[SectionDiff] = []
    for heading, body in sections_b:
        if heading not in bodies_a:
            changed.append(SectionDiff(heading, "only_b", [Span("insert", body)], inserted=_words(body)))
        elif bodies_a[heading] == body:
            same.append(SectionDiff(heading, "same", [Span("equal", body)]))
        else:
            spans = lines_diff(bodies_a[heading], body)
            deleted = sum(_words(s.text) for s in spans if s.op == "delete")
            inserted = sum(_words(s.text) for s in spans if s.op == "insert")
            changed.append(SectionDiff(heading, "changed", spans, deleted, inserted))
    for heading, body in sections_a:
        if heading not in headings_b:
            changed.append(SectionDiff(heading, "only_a", [Span("delete", body)], deleted=_words(body)))
    return changed + same
