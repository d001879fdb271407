"""A webhook receiver on loopback: ``http.server`` in a thread that records every POST (headers, raw body)
and answers a scripted list of status codes, then 200."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class Receiver:
    """An HTTP server on 127.0.0.1 that records each POST and answers the next scripted status (then 200)."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.script: list[int] = []
        #: sent as Retry-After with every non-2xx answer, when set
        self.retry_after: str | None = None
        #: sent as Location with every 3xx answer, when set
        self.location: str | None = None
        #: the body of every non-2xx answer
        self.answer = b"receiver says no"
        self.lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                with receiver.lock:
                    status = receiver.script.pop(0) if receiver.script else 200
                    receiver.requests.append({"headers": dict(self.headers), "body": body, "path": self.path})
                self.send_response(status)
                self.send_header("Content-Type", "text/plain")
                if status >= 300 and receiver.retry_after is not None:
                    self.send_header("Retry-After", receiver.retry_after)
                if 300 <= status < 400 and receiver.location is not None:
                    self.send_header("Location", receiver.location)
                answer = b"ok" if status < 300 else receiver.answer
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        # shutdown() waits for the serve loop's next poll: 0.5 s by default, at every test's teardown
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    def __enter__(self) -> Receiver:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.shutdown()
        self.server.server_close()

    def events(self) -> list[str]:
        return [r["headers"]["X-Compression-Event"] for r in self.requests]
