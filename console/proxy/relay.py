"""The upstream side of the proxy: one pooled httpx client per process, and the answer read from what was relayed.

The upstream's key is put on the outgoing request and nowhere else: it is never stored, logged or echoed.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from typing import Any

import httpx
from django.conf import settings

from ..services.proxy import Answer

_client: httpx.Client | None = None
_client_lock = threading.Lock()

#: upstream response headers a runtime may act on, relayed as they are (rate limits, request ids)
RELAYED_HEADERS = ("retry-after", "x-request-id", "openai-processing-ms", "openai-version")
RELAYED_PREFIXES = ("x-ratelimit-",)


def client() -> httpx.Client:
    """The process's upstream client (created on first use, so each gunicorn worker gets its own pool)."""
    global _client
    with _client_lock:
        if _client is None:
            _client = httpx.Client(
                timeout=httpx.Timeout(settings.PROXY_UPSTREAM_TIMEOUT, connect=10.0),
                limits=httpx.Limits(max_connections=200, max_keepalive_connections=64),
                follow_redirects=False,
            )
        return _client


def upstream_url(path: str) -> str:
    return settings.PROXY_UPSTREAM_BASE_URL.rstrip("/") + path


def upstream_headers(api_key: str) -> dict[str, str]:
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    return headers


def relayed_headers(response: httpx.Response) -> dict[str, str]:
    return {
        name: value
        for name, value in response.headers.items()
        if name.lower() in RELAYED_HEADERS or name.lower().startswith(RELAYED_PREFIXES)
    }


def answer_message(message: Any) -> dict[str, Any] | None:
    """The assistant message to store, in the request format (what the runtime sends back next time)."""
    if not isinstance(message, dict):
        return None
    out: dict[str, Any] = {"role": message.get("role") or "assistant", "content": message.get("content")}
    calls = [
        {
            "id": call.get("id"),
            "type": call.get("type") or "function",
            "function": {
                "name": (call.get("function") or {}).get("name"),
                "arguments": (call.get("function") or {}).get("arguments") or "",
            },
        }
        for call in message.get("tool_calls") or []
        if isinstance(call, dict)
    ]
    if calls:
        out["tool_calls"] = calls
    elif out["content"] is None:
        out["content"] = ""
    return out


def completion_answer(status: int, body: bytes, latency_ms: int) -> Answer:
    """The answer of a non-streamed completion."""
    answer = Answer(status_code=status, latency_ms=latency_ms)
    try:
        data = json.loads(body)
    except ValueError:
        return answer
    if not isinstance(data, dict):
        return answer
    choices = data.get("choices") or []
    choice = choices[0] if choices and isinstance(choices[0], dict) else {}
    answer.message = answer_message(choice.get("message"))
    answer.finish_reason = str(choice.get("finish_reason") or "")
    answer.model = str(data.get("model") or "")
    usage = data.get("usage")
    answer.usage = usage if isinstance(usage, dict) else {}
    return answer


class StreamAssembler:
    """Reads the server-sent events as they pass and assembles the answer: content, tool calls, usage, finish."""

    def __init__(self) -> None:
        self.buffer = b""
        self.content: list[str] = []
        self.calls: dict[int, dict[str, Any]] = {}
        self.role = "assistant"
        self.model = ""
        self.finish_reason = ""
        self.usage: dict[str, Any] = {}
        self.done = False

    def feed(self, chunk: bytes) -> None:
        self.buffer += chunk
        while b"\n" in self.buffer:
            line, self.buffer = self.buffer.split(b"\n", 1)
            self._line(line.strip())

    def _line(self, line: bytes) -> None:
        if not line.startswith(b"data:"):
            return
        data = line[5:].strip()
        if data == b"[DONE]":
            self.done = True
            return
        try:
            event = json.loads(data)
        except ValueError:
            return
        if not isinstance(event, dict):
            return
        self.model = str(event.get("model") or self.model)
        if isinstance(event.get("usage"), dict):
            self.usage = event["usage"]
        for choice in event.get("choices") or []:
            if isinstance(choice, dict) and choice.get("index", 0) == 0:
                self._delta(choice.get("delta") or {})
                if choice.get("finish_reason"):
                    self.finish_reason = str(choice["finish_reason"])

    def _delta(self, delta: dict[str, Any]) -> None:
        if delta.get("role"):
            self.role = str(delta["role"])
        if isinstance(delta.get("content"), str):
            self.content.append(delta["content"])
        for call in delta.get("tool_calls") or []:
            if not isinstance(call, dict):
                continue
            slot = self.calls.setdefault(int(call.get("index", 0)), {"id": None, "name": "", "arguments": ""})
            slot["id"] = call.get("id") or slot["id"]
            function = call.get("function") or {}
            slot["name"] += function.get("name") or ""
            slot["arguments"] += function.get("arguments") or ""

    @property
    def complete(self) -> bool:
        return self.done or bool(self.finish_reason)

    def answer(self, status: int, latency_ms: int) -> Answer:
        message: dict[str, Any] | None = None
        if self.complete:
            message = {"role": self.role, "content": "".join(self.content) if self.content else None}
            calls = [
                {"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}}
                for _, c in sorted(self.calls.items())
            ]
            if calls:
                message["tool_calls"] = calls
            elif message["content"] is None:
                message["content"] = ""
        return Answer(
            status_code=status,
            message=message,
            model=self.model,
            finish_reason=self.finish_reason,
            usage=self.usage,
            latency_ms=latency_ms,
            stream=True,
        )


class Relay:
    """A streamed answer relayed chunk by chunk as it arrives; ``close`` (after the last byte went) records it."""

    def __init__(self, upstream: httpx.Response, on_close: Callable[[StreamAssembler], None]) -> None:
        self.upstream = upstream
        self.assembler = StreamAssembler()
        self.on_close = on_close
        self.closed = False

    def __iter__(self) -> Iterator[bytes]:
        for chunk in self.upstream.iter_raw():
            self.assembler.feed(chunk)
            yield chunk

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        self.upstream.close()
        self.on_close(self.assembler)
