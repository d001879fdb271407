"""A task sent from the test process runs in a real worker process, through Redis and through the filesystem broker."""

from __future__ import annotations

import subprocess

import pytest
from celery import Celery

from tests.console.celery_clients import filesystem_client
from tests.console.workers import celery_worker, redis_url, unique_queue, worker_output

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


def run_health_check(client: Celery, worker: subprocess.Popen, queue: str) -> dict:
    result = client.send_task("console.health_check", queue=queue)
    try:
        return result.get(timeout=60)
    except Exception:
        output = worker_output(worker)
        raise AssertionError(f"worker did not answer; its output:\n{output}") from None


def test_it_runs_a_task_in_a_worker_through_redis():
    url = redis_url()
    queue = unique_queue()
    client = Celery("test-client", broker=url, backend=url, set_as_current=False)
    with celery_worker({"REDIS_URL": url}, queue) as worker:
        answer = run_health_check(client, worker, queue)
    assert answer["ok"] is True
    assert answer["db"] is True


def test_it_runs_a_task_in_a_worker_through_the_filesystem_broker(tmp_path):
    queue = unique_queue()
    client = filesystem_client(tmp_path)
    with celery_worker({"VAR_DIR": str(tmp_path)}, queue) as worker:
        answer = run_health_check(client, worker, queue)
    assert answer["ok"] is True
    assert answer["db"] is True
