"""A real OpenAI-compatible HTTP server on loopback, for tests (no mock objects).

Serves ``POST /v1/chat/completions`` (and ``/chat/completions``) from a
thread, on a free port. What it answers is scripted with :meth:`FakeOpenAIServer.script`
(a queue of behaviours, then a default):

- ``ok``: a realistic chat completion with ``usage``; ``text`` sets the answer;
- ``slow``: sleeps ``delay`` seconds (past the client's timeout), then answers ok;
- ``500``: an HTTP 500 with an OpenAI-style error body;
- ``429``: an HTTP 429 with ``Retry-After: retry_after``;
- ``garbage``: HTTP 200 with a non-JSON body (``text``: the same as ``text/plain``);
- ``disconnect``: closes the connection without answering;
- ``empty``: a completion whose content is ``""``;
- ``drift``: a summary whose prose inverts the user's constraint.

For a refused connection use :func:`closed_port_url`. Every request is
recorded (path, headers, parsed JSON body) in :attr:`FakeOpenAIServer.requests`.
Framework-free so the console's tests can reuse it.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

DEFAULT_TEXT = (
    "## Decisions\n- Reduce the export batch size because the query hits the statement timeout.\n\n"
    "## Errors\n- Statement timeout in fetch_batch - resolved after lowering the batch size.\n\n"
    "## Progress and next steps\n- Dry run passes locally; nothing deployed."
)
DRIFT_TEXT = (
    "## Constraints and preferences\n- 用户要求修改部署脚本。\n- The user asked to change infra/terraform.\n\n"
    "## Progress and next steps\n- Proceed with the changes."
)


@dataclass
class Behaviour:
    kind: str = "ok"
    text: str = DEFAULT_TEXT
    delay: float = 0.0
    retry_after: float | None = 1
    status: int = 200


@dataclass
class RecordedRequest:
    path: str
    headers: dict[str, str]  # names lower-cased
    body: Any
    raw: str

    @property
    def messages(self) -> list[dict[str, Any]]:
        return list(self.body.get("messages", [])) if isinstance(self.body, dict) else []

    @property
    def prompt_text(self) -> str:
        return "\n".join(str(m.get("content", "")) for m in self.messages)


@dataclass
class _State:
    default: Behaviour = field(default_factory=Behaviour)
    queue: deque[Behaviour] = field(default_factory=deque)
    requests: list[RecordedRequest] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


class _Handler(BaseHTTPRequestHandler):
    server_version = "FakeOpenAI/1.0"
    protocol_version = "HTTP/1.1"
    state: _State  # set on the subclass made per server

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - quiet in tests
        return

    def do_POST(self) -> None:  # noqa: N802 - http.server naming
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length).decode("utf-8", "replace") if length else ""
        try:
            body: Any = json.loads(raw) if raw else None
        except ValueError:
            body = None
        with self.state.lock:
            self.state.requests.append(
                RecordedRequest(self.path, {k.lower(): v for k, v in self.headers.items()}, body, raw)
            )
            behaviour = self.state.queue.popleft() if self.state.queue else self.state.default
        if self.path.rstrip("/") not in ("/v1/chat/completions", "/chat/completions"):
            self._json(404, {"error": {"message": f"no route {self.path}", "type": "invalid_request_error"}})
            return
        self._answer(behaviour, body if isinstance(body, dict) else {})

    def _answer(self, b: Behaviour, request: dict[str, Any]) -> None:
        if b.kind == "slow":
            time.sleep(b.delay or 5.0)
        if b.kind == "500":
            self._json(500, {"error": {"message": "internal server error (fake)", "type": "server_error"}})
        elif b.kind == "429":
            headers = {"Retry-After": str(b.retry_after)} if b.retry_after is not None else {}
            self._json(429, {"error": {"message": "rate limit reached (fake)", "type": "rate_limit"}}, headers)
        elif b.kind == "garbage":
            self._send(200, b"<html>502 Bad Gateway</html> not json {", "application/json")
        elif b.kind == "text":
            self._send(200, b"Here is your summary, but not as JSON.", "text/plain")
        elif b.kind == "disconnect":
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
        elif b.kind == "empty":
            self._json(200, _completion(request, ""))
        elif b.kind == "drift":
            self._json(200, _completion(request, DRIFT_TEXT))
        else:  # ok, slow
            self._json(200, _completion(request, b.text))

    def _json(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        self._send(status, json.dumps(payload, ensure_ascii=False).encode("utf-8"), "application/json", headers)

    def _send(self, status: int, data: bytes, ctype: str, headers: dict[str, str] | None = None) -> None:
        try:
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(data)))
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeout)
            pass


def _completion(request: dict[str, Any], text: str) -> dict[str, Any]:
    prompt = sum(len(str(m.get("content", ""))) for m in request.get("messages", []) if isinstance(m, dict))
    return {
        "id": "chatcmpl-fake-0001",
        "object": "chat.completion",
        "created": 1764547200,
        "model": request.get("model") or "fake-model",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text, "refusal": None},
                "logprobs": None,
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": max(1, prompt // 4), "completion_tokens": max(1, len(text) // 4), "total_tokens": 0},
        "system_fingerprint": "fp_fake",
    }


class FakeOpenAIServer:
    """The server; ``with FakeOpenAIServer() as server: OpenAI(base_url=server.base_url, ...)``."""

    def __init__(self, host: str = "127.0.0.1") -> None:
        self._state = _State()
        handler = type("Handler", (_Handler,), {"state": self._state})
        self._httpd = ThreadingHTTPServer((host, 0), handler)
        self._httpd.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self._httpd.server_address[1])

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def requests(self) -> list[RecordedRequest]:
        with self._state.lock:
            return list(self._state.requests)

    def script(self, *kinds: str | Behaviour, default: str | Behaviour | None = None, **options: Any) -> None:
        """Queue behaviours for the next requests (``"ok"``, ``"500"``, ...); ``options`` apply to string kinds."""
        with self._state.lock:
            for kind in kinds:
                self._state.queue.append(kind if isinstance(kind, Behaviour) else Behaviour(kind=kind, **options))
            if default is not None:
                self._state.default = default if isinstance(default, Behaviour) else Behaviour(kind=default, **options)

    def reset(self) -> None:
        with self._state.lock:
            self._state.queue.clear()
            self._state.requests.clear()
            self._state.default = Behaviour()

    def start(self) -> FakeOpenAIServer:
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, name="fake-openai", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> FakeOpenAIServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def closed_port_url() -> str:
    """A base URL on loopback where nothing listens (connections are refused)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"
