"""A summarizer backed by any OpenAI-compatible chat-completions endpoint.

Every failure (429, 5xx, timeout, refused connection, empty or garbage
answer, a bug) ends as ``SummaryOutcome(text=None, error=...)``, never as an
exception, and starts a cooldown: until it ends, calls return a failed outcome
at once without touching the endpoint. The cooldown state is injectable so the
console can keep it in its database and share it between workers.
"""

from __future__ import annotations

import functools
import re
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol
from urllib.parse import urlsplit

from .messages import one_line
from .prompt import PROMPT_HASH, PROMPT_VERSION, build_prompt
from .serialize import serialize_segment
from .summary_body import finalize_summary
from .tokens import count_text_tokens
from .types import SummaryOutcome, SummaryRequest

#: tokens of the prompt around the segment (instructions, previous summary and pinned facts are counted apart)
_PROMPT_OVERHEAD = 700
#: an answer shorter than this (characters, stripped) is not a summary
MIN_SUMMARY_CHARS = 40
_REFUSAL = re.compile(
    r"^\s*(?:i'?m sorry|i am sorry|sorry,|i cannot|i can'?t|i am unable|i'm unable|as an ai|error[:\s]|"
    r"抱歉|对不起|我无法|我不能|无法完成)",
    re.I,
)


class CooldownState(Protocol):
    """Where the end of a cooldown is kept: ``get(key)`` / ``set(key, until)`` with ``until`` on the clock's scale.

    A store shared between processes should be used with a wall clock (``clock=time.time``).
    """

    def get(self, key: str) -> float | None: ...

    def set(self, key: str, until: float | None) -> None: ...


class InMemoryCooldown:
    """The default cooldown store: a dict guarded by a lock (per process)."""

    def __init__(self) -> None:
        self._until: dict[str, float] = {}
        self._lock = threading.Lock()

    def get(self, key: str) -> float | None:
        with self._lock:
            return self._until.get(key)

    def set(self, key: str, until: float | None) -> None:
        with self._lock:
            if until is None:
                self._until.pop(key, None)
            else:
                self._until[key] = until


class SummaryFailed(Exception):
    """Internal: a failure with a human-readable reason and an optional cooldown length."""

    def __init__(self, reason: str, cooldown: float | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.cooldown = cooldown


class OpenAISummarizer:
    """Summarize with a model behind an OpenAI-compatible endpoint (``openai`` package).

    ``timeout`` and ``max_retries`` are passed to the client. ``cooldown_seconds``
    is how long to stop calling after a failure (a 429's ``Retry-After`` wins).
    ``cooldown`` stores the cooldown (default: in memory); ``clock`` reads time.
    """

    name = "openai"

    def __init__(
        self,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        model: str = "gpt-4o-mini",
        timeout: float = 30.0,
        max_retries: int = 1,
        cooldown: CooldownState | None = None,
        cooldown_seconds: float = 120.0,
        clock: Callable[[], float] = time.monotonic,
        temperature: float = 0.2,
    ) -> None:
        self.base_url = base_url
        self.api_key = api_key
        self.model = model
        self.timeout = timeout
        self.max_retries = max_retries
        self.cooldown = cooldown if cooldown is not None else InMemoryCooldown()
        self.cooldown_seconds = cooldown_seconds
        self.clock = clock
        self.temperature = temperature
        self.endpoint_host = urlsplit(base_url).hostname if base_url else "api.openai.com"
        self._client: Any = None
        self._client_lock = threading.Lock()

    @property
    def cooldown_key(self) -> str:
        return f"openai:{self.endpoint_host}:{self.model}"

    # ------------------------------------------------------------ public

    def summarize(self, request: SummaryRequest) -> SummaryOutcome:
        """Call the endpoint once (plus the client's retries). Never raises."""
        started = time.perf_counter()
        try:
            self._check_cooldown()
            messages, input_tokens = self._prompt(request)
            response = self._sync_client().chat.completions.create(**self._create_args(messages, request))
            return self._success(response, request, input_tokens, started)
        except Exception as exc:
            return self._failure(exc, started)

    async def asummarize(self, request: SummaryRequest) -> SummaryOutcome:
        """Async variant of :meth:`summarize` (a fresh ``AsyncOpenAI`` per call, closed afterwards)."""
        started = time.perf_counter()
        try:
            self._check_cooldown()
            messages, input_tokens = self._prompt(request)
            async with _client_classes()[1](**self._client_args()) as client:
                response = await client.chat.completions.create(**self._create_args(messages, request))
            return self._success(response, request, input_tokens, started)
        except Exception as exc:
            return self._failure(exc, started)

    # ------------------------------------------------------------ internals

    def _client_args(self) -> dict[str, Any]:
        return {
            "base_url": self.base_url,
            # local OpenAI-compatible servers often need no key, but the client insists on one
            "api_key": self.api_key or "no-key",
            "timeout": self.timeout,
            "max_retries": self.max_retries,
        }

    def _sync_client(self) -> Any:
        with self._client_lock:
            if self._client is None:
                self._client = _client_classes()[0](**self._client_args())
            return self._client

    def _check_cooldown(self) -> None:
        until = self.cooldown.get(self.cooldown_key)
        if until is not None:
            left = until - self.clock()
            if left > 0:
                raise SummaryFailed(f"cooling down after an earlier failure ({left:.0f}s left); endpoint not called")

    def _prompt(self, request: SummaryRequest) -> tuple[list[dict[str, Any]], int]:
        fixed = _PROMPT_OVERHEAD + count_text_tokens(request.previous_summary or "")
        fixed += sum(count_text_tokens(f.text) + 8 for f in request.facts)
        budget = max(200, request.input_tokens - fixed)
        segment = serialize_segment(request.messages, request.start_index, budget, indexes=request.history_indexes)
        messages = build_prompt(
            segment,
            facts=request.facts,
            focus_topic=request.focus_topic,
            previous_summary=request.previous_summary,
            max_tokens=request.max_tokens,
            first_index=_first(request),
            last_index=_last(request),
        )
        input_tokens = sum(count_text_tokens(m["content"]) for m in messages)
        return messages, input_tokens

    def _create_args(self, messages: list[dict[str, Any]], request: SummaryRequest) -> dict[str, Any]:
        return {
            "model": self.model,
            "messages": messages,
            "temperature": self.temperature,
            "max_tokens": max(256, request.max_tokens),
        }

    def _success(self, response: Any, request: SummaryRequest, input_tokens: int, started: float) -> SummaryOutcome:
        text = _answer_text(response)
        usage = getattr(response, "usage", None)
        body = finalize_summary(text, request.facts, request.max_tokens)
        self.cooldown.set(self.cooldown_key, None)
        return SummaryOutcome(
            text=body,
            generator=self.name,
            model=getattr(response, "model", None) or self.model,
            endpoint_host=self.endpoint_host,
            prompt_version=PROMPT_VERSION,
            prompt_hash=PROMPT_HASH,
            input_tokens=int(getattr(usage, "prompt_tokens", 0) or input_tokens),
            output_tokens=int(getattr(usage, "completion_tokens", 0) or count_text_tokens(text)),
            latency_ms=(time.perf_counter() - started) * 1000,
        )

    def _failure(self, exc: Exception, started: float) -> SummaryOutcome:
        reason, cooldown, skipped = _describe(exc, self.timeout, time.perf_counter() - started)
        if not skipped:
            length = cooldown if cooldown is not None else self.cooldown_seconds
            if length > 0:
                self.cooldown.set(self.cooldown_key, self.clock() + length)
        return SummaryOutcome(
            text=None,
            generator=self.name,
            model=self.model,
            endpoint_host=self.endpoint_host,
            prompt_version=PROMPT_VERSION,
            prompt_hash=PROMPT_HASH,
            latency_ms=(time.perf_counter() - started) * 1000,
            error=reason,
            extra={"skipped": True} if skipped else {},
        )


@functools.cache
def _client_classes() -> tuple[type[Any], type[Any]]:
    """``OpenAI`` / ``AsyncOpenAI`` that do not retry a 429 themselves.

    The client would sleep for the server's ``Retry-After`` (up to two minutes)
    inside the call; a summarizer should give up at once and cool down instead.
    """
    from openai import AsyncOpenAI, OpenAI

    class NoRateLimitRetry:
        def _should_retry(self, response: Any) -> bool:
            if getattr(response, "status_code", None) == 429:
                return False
            return bool(super()._should_retry(response))  # type: ignore[misc]

    class SyncClient(NoRateLimitRetry, OpenAI):
        pass

    class AsyncClient(NoRateLimitRetry, AsyncOpenAI):
        pass

    return SyncClient, AsyncClient


def _answer_text(response: Any) -> str:
    """The answer's text, or :class:`SummaryFailed` when there is no usable summary in it."""
    choices = getattr(response, "choices", None)
    if not choices:
        raise SummaryFailed("the endpoint answered without choices (not a chat completion)")
    message = getattr(choices[0], "message", None)
    content = getattr(message, "content", None)
    if not isinstance(content, str):
        raise SummaryFailed("the endpoint answered without text content")
    text = content.strip()
    if not text:
        raise SummaryFailed("the endpoint answered with an empty summary")
    if len(text) < MIN_SUMMARY_CHARS:
        raise SummaryFailed(f"the endpoint's answer is far too short to be a summary ({len(text)} chars)")
    if _REFUSAL.match(text) and len(text) < 400:
        raise SummaryFailed("the endpoint answered with an error or a refusal instead of a summary")
    return text


def _describe(exc: Exception, timeout: float, waited: float) -> tuple[str, float | None, bool]:
    """(human-readable reason, cooldown override, skipped?) for a failure; ``waited``: seconds, retries included."""
    if isinstance(exc, SummaryFailed):
        return exc.reason, exc.cooldown, exc.reason.startswith("cooling down")
    try:
        import openai
    except ImportError:  # pragma: no cover - the package is a dependency
        return f"the openai package is not available: {exc}", None, False
    if isinstance(exc, openai.RateLimitError):
        retry_after = _retry_after(exc)
        wait = f"; retry after {retry_after:.0f}s" if retry_after is not None else ""
        return f"rate limited by the endpoint (HTTP 429){wait}", retry_after, False
    if isinstance(exc, openai.APIStatusError):
        return f"the endpoint answered HTTP {exc.status_code}: {one_line(str(exc.message), 200)}", None, False
    if isinstance(exc, openai.APITimeoutError):
        # the client retries a timeout: say how long the call really took, not one attempt's limit
        return f"the endpoint did not answer: waited {waited:.1f}s ({timeout:g}s timeout per attempt)", None, False
    if isinstance(exc, openai.APIConnectionError):
        cause = exc.__cause__ or exc.__context__
        detail = f": {one_line(str(cause), 200)}" if cause else ""
        return f"connection to the endpoint failed{detail}", None, False
    if isinstance(exc, openai.APIResponseValidationError):
        return "the endpoint's answer is not a valid chat completion", None, False
    if isinstance(exc, ValueError):  # JSON decoding of a garbage body
        return f"the endpoint's answer is not valid JSON: {one_line(str(exc), 200)}", None, False
    return f"summarizer failed: {type(exc).__name__}: {one_line(str(exc), 200)}", None, False


def _retry_after(exc: Any) -> float | None:
    headers = getattr(getattr(exc, "response", None), "headers", None)
    if headers is None:
        return None
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        value = headers.get(name)
        if value:
            try:
                return max(0.0, float(value) * scale)
            except ValueError:
                continue
    return None


def _first(request: SummaryRequest) -> int:
    """The segment's first history index (the ``#N`` numbering the model is asked to use)."""
    known = [i for i in (request.index_of(p) for p in range(len(request.messages))) if i is not None]
    return min(known, default=request.start_index)


def _last(request: SummaryRequest) -> int:
    known = [i for i in (request.index_of(p) for p in range(len(request.messages))) if i is not None]
    return max(known, default=request.start_index + max(0, len(request.messages) - 1))
