"""A real OpenAI-compatible chat server on loopback for the proxy's tests and benchmark (no mock objects).

``POST /v1/chat/completions`` answers like a small tool-using model: when the request offers ``tools`` (and
``tool_choice`` is not ``"none"``) and its last message is the user's, it calls the first tool; otherwise it
answers in text. ``"stream": true``
gets server-sent events (chunked, a delta at a time, tool calls split across deltas, a usage chunk when
``stream_options.include_usage``). ``GET /v1/models`` lists one model. :meth:`ChatUpstream.script` queues
one-off behaviours: ``("status", 429, {"Retry-After": "7"})`` answers that status with an OpenAI error body.
Every request is recorded (path, lower-cased headers, JSON body). Framework-free.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

MODEL = "loopback-chat-1"


@dataclass
class Recorded:
    path: str
    headers: dict[str, str]
    body: Any

    @property
    def messages(self) -> list[dict[str, Any]]:
        return list(self.body.get("messages", [])) if isinstance(self.body, dict) else []


@dataclass
class _State:
    queue: deque[tuple[Any, ...]] = field(default_factory=deque)
    requests: list[Recorded] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    record: bool = True
    #: seconds each answer takes (a model's latency), 0 for the benchmark's pure overhead
    delay: float = 0.0


def _answer(body: dict[str, Any]) -> tuple[str | None, list[dict[str, Any]]]:
    messages = body.get("messages") or [{}]
    last = messages[-1] if isinstance(messages[-1], dict) else {}
    tools = body.get("tools") or []
    if tools and body.get("tool_choice") != "none" and last.get("role") == "user":
        name = tools[0].get("function", {}).get("name", "tool")
        turn = sum(1 for m in messages if isinstance(m, dict) and m.get("role") == "user")
        call = {"id": f"call_{turn}_{len(messages)}", "type": "function"}
        call["function"] = {"name": name, "arguments": json.dumps({"turn": turn})}
        return None, [call]
    text = last.get("content") if isinstance(last.get("content"), str) else ""
    return f"Done: {text[:60]}", []


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "ChatUpstream/1.0"
    # headers and body leave in one write, without Nagle's wait: a loopback answer takes microseconds, not 40 ms
    disable_nagle_algorithm = True
    wbufsize = 1 << 16
    state: _State

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def _send(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        if self.path.rstrip("/").endswith("/models"):
            self._send(200, {"object": "list", "data": [{"id": MODEL, "object": "model", "owned_by": "test"}]})
        else:
            self._send(404, {"error": {"message": "not found", "type": "invalid_request_error"}})

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
        state = self.state
        with state.lock:
            if state.record:
                headers = {k.lower(): v for k, v in self.headers.items()}
                state.requests.append(Recorded(self.path, headers, body))
            scripted = state.queue.popleft() if state.queue else None
        if scripted and scripted[0] == "status":
            _, status, headers = scripted
            error = {"message": f"scripted {status}", "type": "rate_limit_error" if status == 429 else "server_error"}
            self._send(status, {"error": error}, headers)
            return
        if not isinstance(body, dict) or not self.path.endswith("/chat/completions"):
            self._send(400, {"error": {"message": "bad request", "type": "invalid_request_error"}})
            return
        if state.delay:
            time.sleep(state.delay)
        text, calls = _answer(body)
        if body.get("stream"):
            self._stream(body, text, calls)
            return
        message: dict[str, Any] = {"role": "assistant", "content": text}
        if calls:
            message["tool_calls"] = calls
        self._send(
            200,
            {
                "id": "chatcmpl-loopback",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": MODEL,
                "choices": [
                    {"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop"},
                ],
                "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
            },
        )

    def _stream(self, body: dict[str, Any], text: str | None, calls: list[dict[str, Any]]) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        base = {"id": "chatcmpl-loopback", "object": "chat.completion.chunk", "created": 0, "model": MODEL}

        def event(choices: list[dict[str, Any]], **extra: Any) -> None:
            data = b"data: " + json.dumps(base | {"choices": choices} | extra).encode() + b"\n\n"
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            self.wfile.flush()

        event([{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}])
        for start in range(0, len(text or ""), 8):
            event([{"index": 0, "delta": {"content": (text or "")[start : start + 8]}, "finish_reason": None}])
        for i, call in enumerate(calls):
            head = {"index": i, "id": call["id"], "type": "function", "function": {"name": call["function"]["name"]}}
            event([{"index": 0, "delta": {"tool_calls": [head | {"function": head["function"] | {"arguments": ""}}]}}])
            args = call["function"]["arguments"]
            for start in range(0, len(args), 5):
                piece = {"index": i, "function": {"arguments": args[start : start + 5]}}
                event([{"index": 0, "delta": {"tool_calls": [piece]}, "finish_reason": None}])
        event([{"index": 0, "delta": {}, "finish_reason": "tool_calls" if calls else "stop"}])
        if (body.get("stream_options") or {}).get("include_usage"):
            event([], usage={"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15})
        done = b"data: [DONE]\n\n"
        self.wfile.write(f"{len(done):x}\r\n".encode() + done + b"\r\n0\r\n\r\n")
        self.wfile.flush()


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128


class ChatUpstream:
    def __init__(self, record: bool = True) -> None:
        self.state = _State(record=record)
        handler = type("Handler", (_Handler,), {"state": self.state})
        self.server = _Server(("127.0.0.1", 0), handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    @property
    def requests(self) -> list[Recorded]:
        with self.state.lock:
            return list(self.state.requests)

    def chat_requests(self) -> list[Recorded]:
        return [r for r in self.requests if r.path.endswith("/chat/completions")]

    def script(self, *behaviours: tuple[Any, ...]) -> None:
        with self.state.lock:
            self.state.queue.extend(behaviours)

    def __enter__(self) -> ChatUpstream:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


if __name__ == "__main__":  # a standalone upstream for manual tries: python -m tests.fakes.chat_upstream
    with ChatUpstream(record=False) as upstream:
        print(upstream.url, flush=True)
        threading.Event().wait()
