"""A task sent from the test process runs in a real worker process, through Redis and through the filesystem broker."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import redis
from celery import Celery
from django.conf import settings
from django.db import connection

from tests.console.celery_clients import filesystem_client

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


def worker_database_url() -> str:
    """The URL of the test database, so the worker sees what the test sees."""
    db = connection.settings_dict
    if connection.vendor == "sqlite":
        return f"sqlite:///{db['NAME']}"
    return f"postgres://{db['USER']}@{db['HOST']}:{db['PORT'] or 5432}/{db['NAME']}"


@contextmanager
def celery_worker(env: dict[str, str], queue: str) -> Iterator[subprocess.Popen]:
    full_env = {k: v for k, v in os.environ.items() if k not in {"REDIS_URL", "DATABASE_URL"}}
    full_env.update(env, DATABASE_URL=worker_database_url())
    worker = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "console", "worker", "--pool=solo", "-Q", queue, "--loglevel=WARNING"],
        cwd=ROOT,
        env=full_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        yield worker
    finally:
        worker.terminate()
        try:
            worker.wait(timeout=20)
        except subprocess.TimeoutExpired:
            worker.kill()


def redis_url() -> str:
    url = settings.REDIS_URL or "redis://127.0.0.1:6379/0"
    try:
        redis.Redis.from_url(url, socket_connect_timeout=2).ping()
    except redis.ConnectionError:
        if os.environ.get("CI") == "true":
            raise
        pytest.skip(f"no Redis at {url} (required when CI=true)")
    return url


def run_health_check(client: Celery, worker: subprocess.Popen, queue: str) -> dict:
    result = client.send_task("console.health_check", queue=queue)
    try:
        return result.get(timeout=60)
    except Exception:
        worker.terminate()
        output = worker.communicate(timeout=20)[0]
        raise AssertionError(f"worker did not answer; its output:\n{output}") from None


def test_it_runs_a_task_in_a_worker_through_redis():
    url = redis_url()
    queue = f"test-{uuid.uuid4().hex[:8]}"
    client = Celery("test-client", broker=url, backend=url)
    with celery_worker({"REDIS_URL": url}, queue) as worker:
        answer = run_health_check(client, worker, queue)
    assert answer["ok"] is True
    assert answer["db"] is True


def test_it_runs_a_task_in_a_worker_through_the_filesystem_broker(tmp_path):
    queue = f"test-{uuid.uuid4().hex[:8]}"
    client = filesystem_client(tmp_path)
    with celery_worker({"VAR_DIR": str(tmp_path)}, queue) as worker:
        answer = run_health_check(client, worker, queue)
    assert answer["ok"] is True
    assert answer["db"] is True
