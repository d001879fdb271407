"""Real Celery worker processes for tests: start one on a queue of its own, send it tasks, stop or kill it."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, ExitStack, contextmanager
from pathlib import Path
from typing import Any, TypeVar

import pytest
import redis
from django.conf import settings
from django.db import connection

from tests.fakes.openai_server import FakeOpenAIServer

ROOT = Path(__file__).resolve().parents[2]
T = TypeVar("T")
WAIT_SCALE = float(os.environ.get("TEST_WAIT_SCALE") or (3 if os.environ.get("PYTEST_XDIST_WORKER") else 1))


def worker_database_url() -> str:
    """The URL of the test database, so the worker sees what the test sees."""
    db = connection.settings_dict
    if connection.vendor == "sqlite":
        return f"sqlite:///{db['NAME']}"
    return f"postgres://{db['USER']}@{db['HOST']}:{db['PORT'] or 5432}/{db['NAME']}"


def unique_queue() -> str:
    return f"test-{uuid.uuid4().hex[:8]}"


@contextmanager
def celery_worker(env: dict[str, str], queue: str) -> Iterator[subprocess.Popen]:
    """A ``--pool=solo`` worker consuming ``queue`` only, on the test database; stopped on exit.

    ``env`` adds to (or overrides) the test process's environment; REDIS_URL is passed only when
    given, so a worker uses the filesystem broker unless told otherwise.
    """
    full_env = {k: v for k, v in os.environ.items() if k not in {"REDIS_URL", "DATABASE_URL"}}
    full_env.update(env, DATABASE_URL=worker_database_url(), TEST_CELERY_QUEUE=queue)
    worker = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "tests.console.worker_app", "worker", "--pool=solo", "-Q", queue]
        + ["--loglevel=WARNING", "--without-gossip", "--without-mingle", "--without-heartbeat"],
        cwd=ROOT,
        env=full_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        yield worker
    finally:
        # the test has waited for what it sent: the worker is killed, not shut down warm (that takes 1-4 s of
        # interpreter exit and broker polling; a warm shutdown is tested with `make run`'s worker)
        worker.kill()
        worker.wait()
        if worker.stdout:
            worker.stdout.close()


class Supervised:
    """A worker started again whenever it exits, as ``restart: unless-stopped`` does in docker-compose.yml.

    Celery 5.7.0's worker can exit when the broker dies while it acknowledges a message ("Unrecoverable error:
    AttributeError: 'NoneType' object has no attribute 'hostname'", from the ``connection.close()`` it added after a
    lost connection); production restarts it, and the recovery sweep sends again what it held. Given to
    :func:`wait_until` as its worker: ``poll()`` restarts an exited worker instead of reporting the exit.
    """

    def __init__(self, start: Callable[[], AbstractContextManager[subprocess.Popen]]) -> None:
        self._start = start
        self._stack = ExitStack()
        #: what each exited worker printed
        self.exits: list[str] = []
        self.process = self._stack.enter_context(start())

    def __enter__(self) -> Supervised:
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stack.close()

    def poll(self) -> None:
        if self.process.poll() is not None:
            self.exits.append(worker_output(self.process))
            self.process = self._stack.enter_context(self._start())

    def output(self) -> str:
        return "\n--- restarted ---\n".join([*self.exits, worker_output(self.process)])


def worker_output(worker: subprocess.Popen) -> str:
    """What a worker printed (stops it first when it still runs)."""
    if worker.poll() is None:
        worker.terminate()
    try:
        return worker.communicate(timeout=20)[0] or ""
    except subprocess.TimeoutExpired:
        worker.kill()
        return worker.communicate()[0] or ""


def redis_url() -> str:
    url = settings.REDIS_URL or "redis://127.0.0.1:6379/0"
    try:
        redis.Redis.from_url(url, socket_connect_timeout=2).ping()
    except redis.ConnectionError:
        if os.environ.get("CI") == "true":
            raise
        pytest.skip(f"no Redis at {url} (required when CI=true)")
    return url


def broker_env() -> dict[str, str]:
    """Worker env for the broker the test process's own Celery app uses (Redis when configured, else files)."""
    return {"REDIS_URL": settings.REDIS_URL} if settings.REDIS_URL else {}


def worker_env(model: FakeOpenAIServer, **extra: str) -> dict[str, str]:
    """Worker env for tests: the test's broker, the fake model, no retries, no cooldown, a fast heartbeat."""
    return broker_env() | {
        "OPENAI_BASE_URL": model.base_url,
        "OPENAI_API_KEY": "test",
        "SUMMARY_TIMEOUT": "10",
        "SUMMARY_MAX_RETRIES": "0",
        "SUMMARY_COOLDOWN_SECONDS": "0",
        "RUN_HEARTBEAT_SECONDS": "0.2",
        **extra,
    }


@contextmanager
def default_queue(queue: str) -> Iterator[None]:
    """Route what the test process sends with ``.delay()`` (or on commit) to ``queue``; restore afterwards."""
    from celery import current_app

    from console.celery import app

    # shared tasks send through the current app: a client app made without set_as_current=False steals them
    assert current_app.main == app.main, f"the current Celery app is {current_app.main!r}, not the console's"
    before = app.conf.task_default_queue
    app.conf.task_default_queue = queue
    try:
        yield
    finally:
        app.conf.task_default_queue = before


def wait_until(
    read: Callable[[], T],
    done: Callable[[T], bool],
    timeout: float,
    what: str,
    worker: subprocess.Popen | Supervised | None = None,
) -> T:
    """Poll ``read()`` until ``done(value)``; fail with the worker's output after ``timeout`` seconds.

    The timeout is multiplied by ``TEST_WAIT_SCALE`` (default 3 under xdist, else 1): a worker starting
    beside other test processes on a loaded machine takes several times as long; nothing waits for a
    timeout to pass, so a longer one changes no outcome, only how long a real failure takes to show.
    """
    deadline = time.monotonic() + timeout * WAIT_SCALE
    while True:
        value = read()
        if done(value):
            return value
        if time.monotonic() > deadline or (worker is not None and worker.poll() is not None):
            output = (
                "" if worker is None else worker.output() if isinstance(worker, Supervised) else worker_output(worker)
            )
            raise AssertionError(f"timed out waiting for {what}; last value: {value!r}\nworker output:\n{output}")
        time.sleep(0.1)
