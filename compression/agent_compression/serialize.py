"""Compact text form of a segment, for a model summarizer's input.

Every entry is labelled ``#N`` with its history index (the one numbering of summaries and facts,
see :func:`agent_compression.facts.history_indexes`); an earlier summary is labelled with the range it
stands for. User turns are numbered, tool calls appear by name with short arguments,
tool results are abbreviated, long content becomes head + tail with an
``[... N chars omitted ...]`` marker. The text is trimmed to a token budget
by shortening, then dropping, the least important entries first (old tool
results, then old assistant text); user turns are kept. Secrets are masked.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .messages import call_arguments, call_name, content_text
from .secrets import mask_secrets
from .summary_message import is_summary_message, parse_summary_message, summary_history_range
from .tokens import count_text_tokens, estimate_text_tokens

# per-role character limits at each tightening level
_LEVELS: tuple[dict[str, int], ...] = (
    {"user": 4_000, "assistant": 2_000, "tool": 800, "args": 300},
    {"user": 2_000, "assistant": 800, "tool": 300, "args": 160},
    {"user": 1_200, "assistant": 400, "tool": 120, "args": 100},
    {"user": 800, "assistant": 200, "tool": 0, "args": 60},
)
# importance when dropping: lower goes first
_IMPORTANCE = {"tool": 0, "assistant": 1, "calls": 2, "summary": 3, "user": 4, "system": 4}


def head_tail(text: str, limit: int) -> str:
    """``text`` if it fits in ``limit`` characters, else its head and tail around an omitted marker.

    Cuts are moved to the nearest whitespace (within 40 chars) so that a
    token such as a key is not split and half-revealed.
    """
    if len(text) <= limit:
        return text
    if limit <= 0:
        return f"[{len(text)} chars omitted]"
    head_len = max(1, int(limit * 0.6))
    tail_len = max(0, limit - head_len)
    cut = text.rfind(" ", max(0, head_len - 40), head_len)
    head_end = cut if cut > 0 else head_len
    tail_start = len(text) - tail_len
    cut = text.find(" ", tail_start, tail_start + 40)
    tail_start = cut + 1 if cut >= 0 else tail_start
    omitted = tail_start - head_end
    return f"{text[:head_end]} [... {omitted} chars omitted ...] {text[tail_start:]}".strip()


def _short_args(raw: str, limit: int) -> str:
    try:
        parsed = json.loads(raw) if raw else {}
    except ValueError:
        return head_tail(raw.replace("\n", " "), limit)
    if isinstance(parsed, dict):
        parts = []
        for key, value in parsed.items():
            text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
            parts.append(f"{key}={head_tail(text.replace(chr(10), ' '), max(20, limit // max(1, len(parsed))))}")
        return head_tail(", ".join(parts), limit)
    return head_tail(json.dumps(parsed, ensure_ascii=False), limit)


@dataclass
class _Entry:
    position: int
    kind: str  # user | assistant | calls | tool | summary | system
    message: dict[str, Any]
    turn: int | None = None
    tool_name: str = ""

    def render(self, index: int | None, level: dict[str, int]) -> str:
        m = self.message
        if self.kind == "summary":
            parsed = parse_summary_message(m)
            body = parsed[1] if parsed else content_text(m)
            span = summary_history_range(m)
            label = f"#{span[0]}-#{span[1]} " if span else (f"#{index} " if index is not None else "")
            return f"{label}EARLIER SUMMARY:\n{head_tail(body, level['user'] * 2)}"
        if self.kind == "user":
            return f"#{index} USER (turn {self.turn}): {head_tail(content_text(m), level['user'])}"
        if self.kind == "system":
            return f"#{index} SYSTEM: {head_tail(content_text(m), level['assistant'])}"
        if self.kind == "tool":
            text = content_text(m)
            lines = text.count("\n") + 1 if text else 0
            size = f"{len(text)} chars, {lines} lines"
            if level["tool"] <= 0:
                return f"#{index} TOOL RESULT {self.tool_name}: ({size})"
            return f"#{index} TOOL RESULT {self.tool_name} ({size}): {head_tail(text, level['tool'])}"
        if self.kind == "calls":
            calls = [
                f"{call_name(c) or '?'}({_short_args(call_arguments(c), level['args'])})"
                for c in m.get("tool_calls") or ()
                if isinstance(c, dict)
            ]
            text = content_text(m).strip()
            prefix = f"{head_tail(text, level['assistant'])} " if text else ""
            return f"#{index} ASSISTANT: {prefix}-> calls " + "; ".join(calls)
        return f"#{index} ASSISTANT: {head_tail(content_text(m), level['assistant'])}"


def _entries(messages: Sequence[dict[str, Any]]) -> list[_Entry]:
    entries: list[_Entry] = []
    names: dict[str, str] = {}
    turn = 0
    for position, m in enumerate(messages):
        if not isinstance(m, dict):
            continue
        role = m.get("role")
        if is_summary_message(m):
            entries.append(_Entry(position, "summary", m))
        elif role == "user":
            turn += 1
            entries.append(_Entry(position, "user", m, turn=turn))
        elif role == "assistant":
            calls = [c for c in m.get("tool_calls") or () if isinstance(c, dict)]
            for c in calls:
                if isinstance(c.get("id"), str):
                    names[c["id"]] = call_name(c)
            if calls:
                entries.append(_Entry(position, "calls", m))
            elif content_text(m).strip():
                entries.append(_Entry(position, "assistant", m))
        elif role == "tool":
            name = m.get("name") if isinstance(m.get("name"), str) else names.get(str(m.get("tool_call_id")), "tool")
            entries.append(_Entry(position, "tool", m, tool_name=name or "tool"))
        elif role in ("system", "developer"):
            entries.append(_Entry(position, "system", m))
    return entries


def _drop(order: list[int], costs: list[int], entries: list[_Entry], target: int) -> set[int]:
    total = sum(costs)
    dropped: set[int] = set()
    for i in order:
        if total <= target:
            break
        if entries[i].kind in ("user", "summary") and i == len(entries) - 1:
            continue  # the segment's last user turn stays
        dropped.add(i)
        total -= costs[i]
    return dropped


def _without(rendered: list[str], dropped: set[int]) -> str:
    kept: list[str] = []
    gap = 0
    for i, line in enumerate(rendered):
        if i in dropped:
            gap += 1
            continue
        if gap:
            kept.append(f"[... {gap} messages omitted ...]")
            gap = 0
        kept.append(line)
    if gap:
        kept.append(f"[... {gap} messages omitted ...]")
    return "\n".join(kept)


def _index(indexes: Sequence[int | None] | None, start: int, position: int) -> int | None:
    if indexes is not None and position < len(indexes):
        return indexes[position]
    return start + position


def serialize_segment(
    messages: Sequence[dict[str, Any]],
    start_index: int = 0,
    budget_tokens: int = 12_000,
    *,
    mask: bool = True,
    indexes: Sequence[int | None] | None = None,
) -> str:
    """Compact, masked text of ``messages`` within ``budget_tokens``, each entry labelled ``#N``: its
    history index from ``indexes`` when given, else ``start_index`` + its position."""
    entries = _entries(messages)
    if not entries:
        return ""
    budget = max(50, budget_tokens)
    rendered: list[str] = []
    for level in _LEVELS:
        rendered = [e.render(_index(indexes, start_index, e.position), level) for e in entries]
        # a cheap estimate first; the real count only when the estimate says it may fit
        if sum(estimate_text_tokens(r) for r in rendered) <= budget * 1.3:
            text = "\n".join(rendered)
            if count_text_tokens(text) <= budget:
                return mask_secrets(text) if mask else text
    # still too big at the tightest level: drop the least important, oldest first;
    # the omitted-markers cost tokens too, so aim lower until the result fits
    costs = [count_text_tokens(r) + 1 for r in rendered]
    order = sorted(range(len(entries)), key=lambda i: (_IMPORTANCE[entries[i].kind], i))
    target = budget
    text = ""
    for _ in range(6):
        text = _without(rendered, _drop(order, costs, entries, target))
        excess = count_text_tokens(text) - budget
        if excess <= 0:
            break
        target -= excess + 8
    if count_text_tokens(text) > budget:  # a single huge user turn: hard cut by characters
        text = head_tail(text, budget * 3)
    return mask_secrets(text) if mask else text
