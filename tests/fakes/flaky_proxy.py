"""A TCP proxy in front of a live console that a test takes down, slows, or makes lose answers.

``down()`` closes the listening socket (a client is refused, as by a stopped server) and ``up()`` opens
it again on the same port. ``lose_answers = n``: the next n requests reach the console, which handles
them, but the client's connection is closed before the answer (a response lost on the way back).
``delay``: seconds waited before each request is passed on (a slow console).
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
import time


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class FlakyProxy:
    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.delay = 0.0
        self.lose_answers = 0
        #: connections accepted and answers lost, for the test to check what happened
        self.connections = 0
        self.lost = 0
        self._listener: socket.socket | None = None
        self._lock = threading.Lock()
        self._closed = False

    def up(self) -> None:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(16)
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def down(self) -> None:
        listener, self._listener = self._listener, None
        if listener is not None:
            # shutdown wakes the thread blocked in accept(); close alone does not on Linux
            with contextlib.suppress(OSError):
                listener.shutdown(socket.SHUT_RDWR)
            listener.close()

    def close(self) -> None:
        """Down for good: a request still waiting out ``delay`` is not passed on (it would reach the
        live server during a later test)."""
        self._closed = True
        self.down()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            with self._lock:
                self.connections += 1
                lose = self.lose_answers > 0
                if lose:
                    self.lose_answers -= 1
            threading.Thread(target=self._serve, args=(client, lose), daemon=True).start()

    def _serve(self, client: socket.socket, lose: bool) -> None:
        with client:
            if self.delay:
                time.sleep(self.delay)
            if self._closed:
                return
            try:
                upstream = socket.create_connection(("127.0.0.1", self.upstream_port), timeout=30)
            except OSError:
                return
            with upstream:
                threading.Thread(target=_pump, args=(client, upstream), daemon=True).start()
                answer = b""
                while chunk := _recv(upstream):
                    if lose:
                        answer += chunk  # read to the end: the console finished the request
                    else:
                        client.sendall(chunk)
                if lose:
                    with self._lock:
                        self.lost += 1
                    # a reset, not a clean close: the client sees the connection broken mid-request (shutdown
                    # first: it wakes the pump thread blocked reading the client, which close() alone does not)
                    client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    with contextlib.suppress(OSError):
                        client.shutdown(socket.SHUT_RDWR)


def _recv(sock: socket.socket) -> bytes:
    try:
        return sock.recv(65536)
    except OSError:
        return b""


def _pump(source: socket.socket, target: socket.socket) -> None:
    while chunk := _recv(source):
        try:
            target.sendall(chunk)
        except OSError:
            return
    with contextlib.suppress(OSError):
        target.shutdown(socket.SHUT_WR)
