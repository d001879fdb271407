"""A summarizer backed by any OpenAI-compatible chat-completions endpoint.

Small models loop and copy: with the current prompt (see :mod:`agent_compression.prompt`) the request carries
a ``frequency_penalty`` and the answer is cleaned before it becomes the summary (:func:`clean_answer`):
repeated lines and in-line loops are cut, lines copying the prompt's rules or the pinned-fact lines are
dropped, Chinese or bold headings are mapped to the fixed ones, and a line cut off by ``max_tokens`` goes.
The raw answer is kept in ``SummaryOutcome.extra["raw_answer"]`` (also when it is refused).

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
from .prompt import PROMPT_HASHES, PROMPT_VERSION, PROMPTS, build_prompt, segment_language
from .serialize import serialize_segment
from .summary_body import SECTION_HEADINGS, finalize_summary
from .tokens import count_text_tokens
from .types import SummaryOutcome, SummaryRequest

#: tokens of the prompt around the segment (instructions, previous summary and pinned facts are counted apart)
_PROMPT_OVERHEAD = 700
#: an answer shorter than this (characters, stripped) is not a summary
MIN_SUMMARY_CHARS = 40
#: frequency penalty sent with the current prompt (identifiers repeat, so it stays mild)
FREQUENCY_PENALTY = 0.3
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
        self.extra: dict[str, Any] = {}


class OpenAISummarizer:
    """Summarize with a model behind an OpenAI-compatible endpoint (``openai`` package).

    ``timeout`` and ``max_retries`` are passed to the client. ``cooldown_seconds``
    is how long to stop calling after a failure (a 429's ``Retry-After`` wins).
    ``cooldown`` stores the cooldown (default: in memory); ``clock`` reads time.
    ``prompt_version``: one of :data:`agent_compression.prompt.PROMPTS` (benchmarks compare the legacy ones);
    ``frequency_penalty`` is sent with prompts that cut repetition; ``language`` forces the summary's
    language (``"en"`` / ``"zh"``; default: the segment's user turns decide). ``max_answer_tokens`` caps
    what the model may generate (``max_tokens`` of the request) below the summary budget: slow local models.
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
        prompt_version: str = PROMPT_VERSION,
        frequency_penalty: float = FREQUENCY_PENALTY,
        language: str | None = None,
        max_answer_tokens: int | None = None,
    ) -> None:
        if prompt_version not in PROMPTS:
            raise ValueError(f"unknown prompt version {prompt_version!r}; known: {', '.join(PROMPTS)}")
        self.base_url = base_url
        self.api_key = api_key
        self.model = model
        self.timeout = timeout
        self.max_retries = max_retries
        self.cooldown = cooldown if cooldown is not None else InMemoryCooldown()
        self.cooldown_seconds = cooldown_seconds
        self.clock = clock
        self.temperature = temperature
        self.prompt_version = prompt_version
        self.frequency_penalty = frequency_penalty
        self.language = language
        self.max_answer_tokens = max_answer_tokens
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
            args = self._create_args(messages, request)
            response = self._sync_client().chat.completions.create(**args)
            return self._success(response, request, input_tokens, started, args)
        except Exception as exc:
            return self._failure(exc, started)

    async def asummarize(self, request: SummaryRequest) -> SummaryOutcome:
        """Async variant of :meth:`summarize` (a fresh ``AsyncOpenAI`` per call, closed afterwards)."""
        started = time.perf_counter()
        try:
            self._check_cooldown()
            messages, input_tokens = self._prompt(request)
            args = self._create_args(messages, request)
            async with _client_classes()[1](**self._client_args()) as client:
                response = await client.chat.completions.create(**args)
            return self._success(response, request, input_tokens, started, args)
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
            max_tokens=self._answer_tokens(request),
            first_index=_first(request),
            last_index=_last(request),
            version=self.prompt_version,
            language=self.language or segment_language(segment),
        )
        input_tokens = sum(count_text_tokens(m["content"]) for m in messages)
        return messages, input_tokens

    @property
    def _cuts_repetition(self) -> bool:
        return PROMPTS[self.prompt_version].cut_repetition

    def _answer_tokens(self, request: SummaryRequest) -> int:
        """What the model may write: the whole budget (legacy), or what the pinned facts leave of it."""
        if not self._cuts_repetition:
            return request.max_tokens
        pinned = sum(count_text_tokens(f.text) + 8 for f in request.facts)
        room = max(384, min(request.max_tokens, request.max_tokens - pinned))
        return min(room, self.max_answer_tokens) if self.max_answer_tokens else room

    def _create_args(self, messages: list[dict[str, Any]], request: SummaryRequest) -> dict[str, Any]:
        args: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            "temperature": self.temperature,
            "max_tokens": max(256, min(self._answer_tokens(request), self.max_answer_tokens or request.max_tokens)),
        }
        if self._cuts_repetition and self.frequency_penalty:
            args["frequency_penalty"] = self.frequency_penalty
        return args

    def _success(
        self, response: Any, request: SummaryRequest, input_tokens: int, started: float, args: dict[str, Any]
    ) -> SummaryOutcome:
        params = {k: v for k, v in args.items() if k not in ("messages", "model")}
        raw = _raw_text(response)
        try:
            text = _answer_text(response)
            removed = 0
            if self._cuts_repetition:
                finish = getattr(getattr(response, "choices", [None])[0], "finish_reason", None)
                system = str(args["messages"][0]["content"])
                cut = finish == "length"
                text, removed = clean_answer(text, facts_lines=request.facts, prompt=system, truncated=cut)
                if len(text.strip()) < MIN_SUMMARY_CHARS:
                    raise SummaryFailed("the endpoint's answer only repeated the prompt or the pinned facts")
        except SummaryFailed as exc:
            exc.extra = {"raw_answer": raw, "params": params}
            raise
        usage = getattr(response, "usage", None)
        body = finalize_summary(text, request.facts, request.max_tokens)
        self.cooldown.set(self.cooldown_key, None)
        return SummaryOutcome(
            text=body,
            generator=self.name,
            model=getattr(response, "model", None) or self.model,
            endpoint_host=self.endpoint_host,
            prompt_version=self.prompt_version,
            prompt_hash=PROMPT_HASHES[self.prompt_version],
            input_tokens=int(getattr(usage, "prompt_tokens", 0) or input_tokens),
            output_tokens=int(getattr(usage, "completion_tokens", 0) or count_text_tokens(raw or text)),
            latency_ms=(time.perf_counter() - started) * 1000,
            extra={"raw_answer": raw, "params": params, "removed_lines": removed},
        )

    def _failure(self, exc: Exception, started: float) -> SummaryOutcome:
        reason, cooldown, skipped = _describe(exc, self.timeout, time.perf_counter() - started)
        extra: dict[str, Any] = {"skipped": True} if skipped else {}
        extra.update(getattr(exc, "extra", None) or {})
        if not skipped:
            length = cooldown if cooldown is not None else self.cooldown_seconds
            if length > 0:
                self.cooldown.set(self.cooldown_key, self.clock() + length)
        return SummaryOutcome(
            text=None,
            generator=self.name,
            model=self.model,
            endpoint_host=self.endpoint_host,
            prompt_version=self.prompt_version,
            prompt_hash=PROMPT_HASHES[self.prompt_version],
            latency_ms=(time.perf_counter() - started) * 1000,
            error=reason,
            extra=extra,
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


def _raw_text(response: Any) -> str | None:
    """The answer's content exactly as the endpoint sent it (``None`` when there is none)."""
    choices = getattr(response, "choices", None)
    content = getattr(getattr(choices[0], "message", None), "content", None) if choices else None
    return content if isinstance(content, str) else None


#: heading names a model writes instead of the fixed ones (Chinese, other wording), lower-cased
_HEADING_ALIASES = {
    **{h[3:].lower(): h for h in SECTION_HEADINGS},
    "focus": "## Focus",
    "重点": "## Focus",
    "决策": "## Decisions",
    "决定": "## Decisions",
    "文件和标识符": "## Files and identifiers",
    "文件与标识符": "## Files and identifiers",
    "文件和标识": "## Files and identifiers",
    "标识符": "## Files and identifiers",
    "错误": "## Errors",
    "约束和偏好": "## Constraints and preferences",
    "约束与偏好": "## Constraints and preferences",
    "约束": "## Constraints and preferences",
    "constraints": "## Constraints and preferences",
    "进展和下一步": "## Progress and next steps",
    "进展与下一步": "## Progress and next steps",
    "进度和下一步": "## Progress and next steps",
    "progress": "## Progress and next steps",
    "next steps": "## Progress and next steps",
    "关键工具结果": "## Key tool results",
    "工具结果": "## Key tool results",
    "pinned facts": "## Pinned facts",
}
_HEADING_LIKE = re.compile(r"^\s*(?:#{1,4}\s*|\*\*)(?P<name>[^#*]+?)(?:\*\*)?\s*[:：]?\s*$")
_BARE_HEADING = re.compile(r"^\s*(?P<name>[^\s#*\-][^#*:：]*?)\s*[:：]\s*$")
_PINNED_COPY = re.compile(r"^\s*[-*]?\s*\[(?:constraint|approval|path|identifier|error|command|decision)\]", re.I)
_CITATION = re.compile(r"\(\s*#\d+(?:\s*[-–,]\s*#?\d+)*\s*\)")
_LOOP = re.compile(r"(.{6,}?)(?:\s*\1){2,}")
_FENCE = re.compile(r"^\s*```")


def _key(line: str) -> str:
    """A line's identity for de-duplication: no bullet, no (#N) citations, no case, spaces or end punctuation."""
    text = _CITATION.sub("", line)
    text = re.sub(r"^\s*(?:[-*•]|\d+[.)])\s*", "", text)
    text = re.sub(r"\*\*|`", "", text)
    return " ".join(text.split()).strip(" .。;；,，:：").lower()


def clean_answer(text: str, *, facts_lines: Any = (), prompt: str = "", truncated: bool = False) -> tuple[str, int]:
    """(cleaned answer, number of lines removed): see the module docstring. ``prompt``: the system prompt
    whose rule lines must not be copied; ``facts_lines``: the pinned facts (their lines must not be copied);
    ``truncated``: the answer hit ``max_tokens`` (its last line is cut off)."""
    rules = {_key(line) for line in prompt.splitlines() if len(_key(line)) >= 12}
    pinned = {_key(getattr(f, "text", str(f))) for f in facts_lines}
    lines = text.splitlines()
    if truncated and len(lines) > 1:
        lines = lines[:-1]
    out: list[str] = []
    seen: set[str] = set()
    removed = 0
    for raw in lines:
        if _FENCE.match(raw):
            continue
        line = raw[:2000].rstrip()
        heading = _HEADING_LIKE.match(line) or _BARE_HEADING.match(line)
        if heading and (canonical := _HEADING_ALIASES.get(heading.group("name").strip().lower())):
            out.append(canonical)
            continue
        line = _LOOP.sub(r"\1", line)
        key = _key(line)
        if not key:
            if not line.strip():
                out.append("")
            continue  # an empty bullet (the skeleton's "- ")
        if key in seen or key in rules or _PINNED_COPY.match(line) or (key in pinned and len(key) >= 8):
            removed += 1
            continue
        seen.add(key)
        out.append(line)
    return "\n".join(out).strip(), removed


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
