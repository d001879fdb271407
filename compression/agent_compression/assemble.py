"""Stage 5a: reassembly. Head + summary message + acknowledgement + tail.

The summary goes in as a user message labelled as reference material (see
:mod:`agent_compression.summary_message`); an assistant acknowledgement follows it.
Neighbours are chosen so that no two user or two assistant messages meet at
the seams: when the head ends with a user message a short assistant bridge
goes first, and when the tail starts with an assistant message the
acknowledgement is left out.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .facts import PINNED_HEADING, render_fact
from .messages import role_of
from .summary_message import ACKNOWLEDGEMENT, BRIDGE, SummaryHeader, render_summary_message
from .types import Fact

#: fact kinds a failure note keeps whatever its size: they carry the user's own words
_ALWAYS_KEPT = ("constraint", "approval")


def render_failure_body(archived: int, facts: Sequence[Fact], error: str | None, max_chars: int) -> str:
    """Body used when the summarizer failed: what was archived, and the pinned facts verbatim.

    Pinned facts come from code, not a model, so constraints survive a failed
    summary; they use the ``## Pinned facts`` section a later compression
    carries over. Other kinds stop at ``max_chars`` so tokens still drop;
    constraints and approvals are always kept.
    """
    reason = f" ({error})" if error else ""
    lines = [
        f"Summary unavailable: the summarizer failed{reason}. {archived} earlier messages were archived "
        "and removed from the context; an operator can re-summarize them from the archive.",
        "",
        PINNED_HEADING,
    ]
    size = sum(len(line) + 1 for line in lines)
    skipped = 0
    for fact in facts:
        line = render_fact(fact)
        if fact.kind not in _ALWAYS_KEPT and size + len(line) > max_chars:
            skipped += 1
            continue
        lines.append(line)
        size += len(line) + 1
    if not facts:
        lines.append("- (none)")
    if skipped:
        lines.append(f"- ({skipped} more facts are in the archive)")
    return "\n".join(lines)


def _role(message: Any) -> str | None:
    return role_of(message)


def assemble(
    head: Sequence[dict[str, Any]],
    tail: Sequence[dict[str, Any]],
    body: str,
    header: SummaryHeader,
) -> list[dict[str, Any]]:
    """Return head + [bridge] + summary + [acknowledgement] + tail."""
    middle: list[dict[str, Any]] = []
    if _role(head[-1] if head else None) == "user":
        middle.append({"role": "assistant", "content": BRIDGE})
    middle.append(render_summary_message(body, header))
    if _role(tail[0] if tail else None) != "assistant":
        middle.append({"role": "assistant", "content": ACKNOWLEDGEMENT})
    return [*head, *middle, *tail]


__all__ = ["BRIDGE", "assemble", "is_inserted_message", "render_failure_body"]


def is_inserted_message(message: dict[str, Any]) -> bool:
    """True for the bridge and acknowledgement messages this stage inserts."""
    return message.get("role") == "assistant" and message.get("content") in (BRIDGE, ACKNOWLEDGEMENT)
