"""Stage 2: where the protected head ends and the protected tail starts.

Everything in ``[head_end, tail_start)`` (the middle) is archived and
summarized. A pure function of the messages, the config and token counts.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from .config import CompressionConfig
from .messages import call_index, content_text, role_of, tool_call_ids
from .prune import describe_tool_result, truncate_arguments
from .serialize import head_tail
from .summary_message import ACKNOWLEDGEMENT, BRIDGE, is_summary_message
from .tokens import TokenCounter, default_counter

_SYSTEM_ROLES = ("system", "developer")


@dataclass(frozen=True)
class Boundaries:
    """``messages[:head_end]`` is the head, ``messages[tail_start:]`` the tail, the rest the middle."""

    head_end: int
    tail_start: int
    total: int
    tail_tokens: int = 0
    #: the latest user message, when it lies in the middle but is kept verbatim just before the tail
    #: (the work since it did not fit the tail); it is archived and summarized with the middle too
    lifted: int | None = None

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


def _align(
    messages: Sequence[Any],
    head_end: int,
    tail_start: int,
    calls: dict[str, tuple[int, Any]],
    counts: Sequence[int] | None = None,
    budget: int | None = None,
) -> int:
    """Move ``tail_start`` back until no tail message is separated from its call (or results).

    A result out of place (other messages between it and its call) pulls its call back into the tail
    only while the tail stays within ``budget`` (tokens, with ``counts``): past it, the result is left
    alone (the validator drops it; its call is archived) rather than drag everything between them in."""
    scanned_to = len(messages)  # tail messages from here on are checked already
    while True:
        if head_end < tail_start < len(messages) and role_of(messages[tail_start]) == "tool":
            # results at the tail's start go with the call right before them; orphans (no such call) stay put
            # rather than drag whatever precedes them (a giant message) into the tail
            j = tail_start
            while j > head_end and role_of(messages[j - 1]) == "tool":
                j -= 1
            ids = {str(messages[k].get("tool_call_id")) for k in range(j, tail_start + 1)}
            if j > head_end and ids & set(tool_call_ids(messages[j - 1])):
                end = tail_start  # past the last result of that call
                while end < len(messages) and role_of(messages[end]) == "tool":
                    end += 1
                too_big = budget is not None and counts is not None and sum(counts[j - 1 :]) > budget
                # a call too big for the tail goes to the middle with its results, unless they end the
                # history (more results of its calls may still be coming)
                tail_start = end if too_big and end < len(messages) else j - 1
        target = tail_start
        for i in range(tail_start, scanned_to):
            m = messages[i]
            if role_of(m) == "tool":
                cid = m.get("tool_call_id")
                entry = calls.get(cid) if isinstance(cid, str) else None
                if entry is not None and head_end <= entry[0] < target:
                    too_big = budget is not None and counts is not None and sum(counts[entry[0] :]) > budget
                    if too_big and not _right_after_its_call(messages, i, cid):
                        continue
                    target = entry[0]
        scanned_to = tail_start
        if target == tail_start:
            return tail_start
        tail_start = target


def _right_after_its_call(messages: Sequence[Any], index: int, cid: Any) -> bool:
    j = index
    while j > 0 and role_of(messages[j - 1]) == "tool":
        j -= 1
    return j > 0 and cid in tool_call_ids(messages[j - 1])


def required_head_end(messages: Sequence[Any], head_end: int, keep_prefix: int = 0) -> int:
    """End of the part of the head that never moves to the middle: the leading system messages, the
    first user request (when the head holds it) and what lies before it, the caller's ``keep_prefix``;
    extended over tool results so a call keeps its results."""
    end = 0
    while end < head_end and role_of(messages[end]) in _SYSTEM_ROLES:
        end += 1
    first_user = next((i for i in range(head_end) if role_of(messages[i]) == "user"), None)
    if first_user is not None:
        end = max(end, first_user + 1)
    end = max(end, min(keep_prefix, head_end))
    while end < len(messages) and role_of(messages[end]) == "tool":
        end += 1
    return end


def _fit_head(messages: Sequence[Any], counts: Sequence[int], required: int, head_end: int, budget: int) -> int:
    """``head_end`` lowered so the head fits ``budget``: whole messages past ``required`` (a call with its
    results) join the middle, from the first one that does not fit on."""
    total = sum(counts[:required])
    if total + sum(counts[required:head_end]) <= budget:
        return head_end
    end = i = required
    while i < head_end:
        j = i + 1
        while j < head_end and role_of(messages[j]) == "tool":
            j += 1
        total += sum(counts[i:j])
        if total > budget:
            break
        end = i = j
    return end


def resolve_boundaries(
    messages: Sequence[dict[str, Any]],
    config: CompressionConfig,
    counter: TokenCounter | Callable[[dict[str, Any]], int] | None = None,
    keep_prefix: int = 0,
    *,
    token_counts: Sequence[int] | None = None,
    head_token_counts: Sequence[int] | None = None,
) -> Boundaries:
    """Split ``messages`` into head, middle and tail.

    - head: ``max(config.protect_head_messages, keep_prefix)`` messages, extended
      forward over tool results so a call is never cut from its results, and
      bounded by ``config.effective_head_tokens``: past it, the messages after the
      system prompt and the first request join the middle (archived, summarized)
      instead of staying verbatim (``head_token_counts``: counts of the head as
      it will be output, when ``messages`` were pruned; default ``token_counts``);
    - tail: the newest messages within ``config.effective_tail_tokens``, extended
      backward so an assistant ``tool_calls`` message stays with all its results;
    - the tail leaves room under the trigger for the head and a summary;
    - the latest user message is always kept verbatim: in the tail, or in the
      head when it lies there; when the work since it does not fit the tail, it is
      ``lifted``: archived with the middle, and output again just before the tail;
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
    required = required_head_end(messages, head_end, keep_prefix)
    head_end = _fit_head(messages, head_token_counts or token_counts, required, head_end, config.effective_head_tokens)

    # what the trigger leaves for the tail once the head and a summary are in
    room = config.trigger_tokens - sum((head_token_counts or token_counts)[:head_end]) - summary_reserve(config)
    limit = max(room, config.effective_tail_tokens)  # how far alignment may grow the tail
    calls = call_index(messages)
    tail_start = _tail_start(messages, token_counts, head_end, min(config.effective_tail_tokens, room), calls, limit)
    latest_user = _latest_real_user(messages)
    lifted = None
    if latest_user is not None and head_end <= latest_user < tail_start:
        extended = _align(messages, head_end, latest_user, calls)
        if sum(token_counts[extended:]) <= limit:
            tail_start = extended
        else:
            # the work done since the latest request does not fit: it is summarized, and the request
            # itself is lifted out of the middle, kept verbatim just before the tail
            lifted = latest_user
            budget = min(config.effective_tail_tokens, room - token_counts[latest_user])
            tail_start = max(tail_start, _tail_start(messages, token_counts, head_end, budget, calls, limit))
    if tail_start > head_end:
        tail_start = _fold_summary(messages, head_end, tail_start, None if lifted else latest_user, calls)
    tail_tokens = sum(token_counts[tail_start:]) + (token_counts[lifted] if lifted is not None else 0)
    return Boundaries(head_end=head_end, tail_start=tail_start, total=n, tail_tokens=tail_tokens, lifted=lifted)


#: tokens of the summary message's header, the bridge and the acknowledgement around a summary body
SUMMARY_OVERHEAD_TOKENS = 80


def summary_reserve(config: CompressionConfig) -> int:
    """Tokens the boundaries leave under the trigger for the summary message (the summary gives way past it)."""
    return min(config.effective_summary_max_tokens, config.trigger_tokens // 4) + SUMMARY_OVERHEAD_TOKENS


def _tail_start(
    messages: Sequence[Any],
    counts: Sequence[int],
    head_end: int,
    budget: int,
    calls: dict[str, tuple[int, Any]],
    limit: int,
) -> int:
    """Start of the newest messages within ``budget`` (at least the last one), aligned to its calls
    while the tail stays within ``limit``."""
    n = len(messages)
    total = 0
    tail_start = n
    for i in range(n - 1, head_end - 1, -1):
        total += counts[i]
        if total > budget:
            break
        tail_start = i
    if tail_start == n and n > head_end:
        # never an empty tail: the last message may be an in-flight call whose results are still coming
        tail_start = n - 1
    return _align(messages, head_end, tail_start, calls, counts, limit)


#: characters of a shortened head message's text that stay at most / at least (head and tail around a marker)
HEAD_KEEP_CHARS = 1_200
HEAD_MIN_CHARS = 120


def _shortened(
    message: dict[str, Any], calls: dict[str, tuple[int, Any]], max_arg_chars: int, keep_chars: int
) -> dict[str, Any]:
    """A head message that is too big, shortened the way stage 1 prunes: a tool result becomes its
    one-line description, long call arguments are cut inside the JSON, other text keeps head and tail."""

    text = content_text(message)
    if role_of(message) == "tool":
        cid = message.get("tool_call_id")
        entry = calls.get(cid) if isinstance(cid, str) else None
        fn = entry[1].get("function") if entry else None
        fn = fn if isinstance(fn, dict) else {}
        name = message.get("name") if isinstance(message.get("name"), str) else fn.get("name")
        args = fn.get("arguments")
        tool = name if isinstance(name, str) and name else "tool"
        description = describe_tool_result(tool, args if isinstance(args, str) else "", text)
        return {**message, "content": description} if len(description) < len(text) else message
    new = message
    if len(text) > keep_chars:
        new = {**new, "content": head_tail(text, keep_chars)}
    if isinstance(message.get("tool_calls"), list):
        shortened = []
        for c in message["tool_calls"]:
            fn = c.get("function") if isinstance(c, dict) else None
            args = fn.get("arguments") if isinstance(fn, dict) else None
            limit = max(64, min(max_arg_chars, keep_chars // max(1, len(message["tool_calls"]))))
            short = truncate_arguments(args, limit) if isinstance(args, str) else None
            if short is not None and isinstance(c, dict) and isinstance(fn, dict):
                c = {**c, "function": {**fn, "arguments": short}}
            shortened.append(c)
        new = {**new, "tool_calls": shortened}
    return new


def shorten_head(
    messages: Sequence[dict[str, Any]],
    head_end: int,
    config: CompressionConfig,
    token_counts: Sequence[int],
    counter: TokenCounter | None = None,
    keep_prefix: int = 0,
) -> tuple[list[dict[str, Any]], list[tuple[int, int]]]:
    """The head ``messages[:head_end]`` as output, and ``(index, tokens after)`` of each message shortened.

    What :func:`resolve_boundaries` could not move to the middle (what lies before the first request,
    results of calls made there) may still be too big: while the head is over
    ``config.effective_head_tokens``, its biggest messages are shortened in place, biggest first. The system
    messages at the start, the first user request and ``keep_prefix`` (a prefix the caller never lets
    compression rewrite) stay verbatim. ``token_counts``: of ``messages`` as given.
    """
    head = list(messages[:head_end])
    budget = config.effective_head_tokens
    total = sum(token_counts[:head_end])
    if total <= budget:
        return head, []
    counter = counter or default_counter
    first_user = next((i for i in range(head_end) if role_of(head[i]) == "user"), None)
    fixed = {i for i in range(head_end) if i < keep_prefix or i == first_user}
    i = 0
    while i < head_end and role_of(head[i]) in _SYSTEM_ROLES:
        fixed.add(i)
        i += 1
    calls = call_index(head)
    changed: list[tuple[int, int]] = []
    for i in sorted((i for i in range(head_end) if i not in fixed), key=lambda i: -token_counts[i]):
        if total <= budget:
            break
        # keep what the budget leaves, at this message's own characters per token
        left = max(0, token_counts[i] - (total - budget)) * 4 // 5  # a margin: cut text counts a little more
        chars_per_token = len(content_text(head[i])) / max(1, token_counts[i])
        keep = max(HEAD_MIN_CHARS, min(HEAD_KEEP_CHARS, int(left * chars_per_token)))
        new = _shortened(head[i], calls, config.max_tool_arg_chars, keep)
        if new is head[i]:
            continue
        after = counter.message(new)
        if after >= token_counts[i]:
            continue
        head[i] = new
        total -= token_counts[i] - after
        changed.append((i, after))
    return head, sorted(changed)


def fixed_part_tokens(
    messages: Sequence[Any],
    counter: TokenCounter | None = None,
    keep_prefix: int = 0,
    *,
    token_counts: Sequence[int] | None = None,
) -> int:
    """Tokens of what compression always keeps verbatim: the system messages at the start, the first and
    the latest user messages, and ``keep_prefix``. When they alone exceed the trigger, nothing fits.
    ``token_counts``: the messages' counts when the caller has them (nothing is tokenized then)."""
    counter = counter or default_counter
    keep = set(range(min(keep_prefix, len(messages))))
    i = 0
    while i < len(messages) and role_of(messages[i]) in _SYSTEM_ROLES:
        keep.add(i)
        i += 1
    first = next((i for i, m in enumerate(messages) if role_of(m) == "user"), None)
    latest = _latest_real_user(messages)
    keep.update(i for i in (first, latest) if i is not None)
    if token_counts is not None:
        return sum(token_counts[i] for i in keep)
    return sum(counter.message(messages[i]) for i in keep if isinstance(messages[i], dict))
