"""Fault injection: a private Redis the tests stop and start, the test process's Celery app pointed at it.

The shared services are never touched: the broker here is a ``redis-server`` of our own on a free port
(no persistence, so stopping it loses what it held, as a crash would), and the database outage is a
connection pointed at a closed port.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from tests.fakes.openai_server import FakeOpenAIServer


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PrivateRedis:
    """A ``redis-server`` on a free port that a test can stop and start again (same port, empty)."""

    def __init__(self, folder: Path) -> None:
        self.port = free_port()
        self.folder = folder
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.process: subprocess.Popen | None = None

    def start(self) -> None:
        self.process = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
            + ["--dir", str(self.folder)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 10
        while True:
            try:
                redis.Redis(port=self.port, socket_connect_timeout=0.5).ping()
                return
            except redis.ConnectionError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def stop(self) -> None:
        """Down at once, like a crash (SIGKILL): what it held is gone."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=10)
        self.process = None

    @property
    def up(self) -> bool:
        try:
            return bool(redis.Redis(port=self.port, socket_connect_timeout=0.5).ping())
        except redis.ConnectionError:
            return False


@pytest.fixture(scope="module")
def private_redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrivateRedis]:
    if shutil.which("redis-server") is None:
        message = "redis-server is not installed (make test installs it: scripts/system-deps.sh)"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    server = PrivateRedis(tmp_path_factory.mktemp("redis"))
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def broker(private_redis: PrivateRedis) -> Iterator[PrivateRedis]:
    """The test process's Celery app sends through the private Redis meanwhile (its pools rebuilt both ways)."""
    from kombu import pools

    from console.celery import app

    def repoint(url: str) -> None:
        # kombu keeps its pools in process-wide registries keyed by broker URL: closing one in place would
        # leave a closed pool there for whichever test sends next in this process, so drop them all
        pools.reset()
        app._pool = None
        app.amqp._producer_pool = None
        app.conf.broker_url = url
        app.conf.broker_write_url = None

    before = app.conf.broker_url
    repoint(private_redis.url)
    try:
        yield private_redis
    finally:
        repoint(before)


@pytest.fixture(scope="module")
def model() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as server:
        yield server
