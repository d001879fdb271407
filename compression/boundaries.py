"""Stage 2: where the protected head ends and the protected tail starts.

Everything in ``[head_end, tail_start)`` (the middle) is archived and
summarized. A pure function of the messages, the config and token counts.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from .config import CompressionConfig
from .messages import call_index, role_of
from .summary_message import ACKNOWLEDGEMENT, BRIDGE, is_summary_message
from .tokens import TokenCounter, default_counter


@dataclass(frozen=True)
class Boundaries:
    """``messages[:head_end]`` is the head, ``messages[tail_start:]`` the tail, the rest the middle."""

    head_end: int
    tail_start: int
    total: int
    tail_tokens: int = 0

    @property
    def middle_size(self) -> int:
        return self.tail_start - self.head_end

    @property
    def is_empty(self) -> bool:
        """True when there is no middle to summarize."""
        return self.tail_start <= self.head_end

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _is_inserted(message: Any) -> bool:
    return isinstance(message, dict) and (
        is_summary_message(message) or (message.get("role") == "assistant" and message.get("content") == BRIDGE)
    )


def _latest_real_user(messages: Sequence[Any]) -> int | None:
    """The latest user message that is not an earlier summary."""
    for i in range(len(messages) - 1, -1, -1):
        m = messages[i]
        if role_of(m) == "user" and not is_summary_message(m):
            return i
    return None


def _fold_summary(
    messages: Sequence[Any], head_end: int, tail_start: int, latest_user: int | None, calls: dict[str, tuple[int, Any]]
) -> int:
    """An earlier summary in the tail joins the middle, so the new summary replaces it."""
    last = None
    for i in range(tail_start, len(messages)):
        if _is_inserted(messages[i]):
            last = i
    if last is None:
        return tail_start
    end = last + 1
    if (
        end < len(messages)
        and messages[end].get("role") == "assistant"
        and messages[end].get("content") == ACKNOWLEDGEMENT
    ):
        end += 1
    limit = len(messages) - 1 if latest_user is None or latest_user < head_end else latest_user
    if end > limit:
        return tail_start
    return _align(messages, end - 1, end, calls) if end > tail_start else tail_start


def _align(messages: Sequence[Any], head_end: int, tail_start: int, calls: dict[str, tuple[int, Any]]) -> int:
    """Move ``tail_start`` back until no tail message is separated from its call (or results)."""
    scanned_to = len(messages)  # tail messages from here on are checked already
    while True:
        while head_end < tail_start < len(messages) and role_of(messages[tail_start]) == "tool":
            tail_start -= 1
        target = tail_start
        for i in range(tail_start, scanned_to):
            m = messages[i]
            if role_of(m) == "tool":
                cid = m.get("tool_call_id")
                entry = calls.get(cid) if isinstance(cid, str) else None
                if entry is not None and head_end <= entry[0] < target:
                    target = entry[0]
        scanned_to = tail_start
        if target == tail_start:
            return tail_start
        tail_start = target


def resolve_boundaries(
    messages: Sequence[dict[str, Any]],
    config: CompressionConfig,
    counter: TokenCounter | Callable[[dict[str, Any]], int] | None = None,
    keep_prefix: int = 0,
    *,
    token_counts: Sequence[int] | None = None,
) -> Boundaries:
    """Split ``messages`` into head, middle and tail.

    - head: ``max(config.protect_head_messages, keep_prefix)`` messages, extended
      forward over tool results so a call is never cut from its results;
    - tail: the newest messages within ``config.effective_tail_tokens``, extended
      backward so an assistant ``tool_calls`` message stays with all its results;
    - the latest user message is always kept verbatim: in the tail, or in the
      head when it lies there;
    - an earlier summary (and its bridge) past ``keep_prefix`` is never part of
      the head, so a later compression updates it instead of freezing it;
    - the tail holds at least the last message (with its call, when it is a result),
      so calls still in flight are never archived.
    """
    n = len(messages)
    if token_counts is None:
        count = counter.message if isinstance(counter, TokenCounter) else counter or default_counter.message
        token_counts = [count(m) if isinstance(m, dict) else 0 for m in messages]
    head_end = min(n, max(config.protect_head_messages, keep_prefix, 0))
    for i in range(max(keep_prefix, 0), head_end):
        if _is_inserted(messages[i]):
            # an earlier summary is updated, never frozen into the head (keep_prefix aside)
            head_end = i
            break
    while head_end < n and role_of(messages[head_end]) == "tool":
        head_end += 1

    budget = config.effective_tail_tokens
    total = 0
    tail_start = n
    for i in range(n - 1, head_end - 1, -1):
        total += token_counts[i]
        if total > budget:
            break
        tail_start = i

    if tail_start == n and n > head_end:
        # never an empty tail: the last message may be an in-flight call whose results are still coming
        tail_start = n - 1
    calls = call_index(messages)
    tail_start = _align(messages, head_end, tail_start, calls)
    latest_user = _latest_real_user(messages)
    if latest_user is not None and head_end <= latest_user < tail_start:
        tail_start = _align(messages, head_end, latest_user, calls)
    if tail_start > head_end:
        tail_start = _fold_summary(messages, head_end, tail_start, latest_user, calls)
    tail_tokens = sum(token_counts[tail_start:])
    return Boundaries(head_end=head_end, tail_start=tail_start, total=n, tail_tokens=tail_tokens)
