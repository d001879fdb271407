"""The broker stops mid-test, then comes back: no 5xx after a write, nothing duplicated, everything recovered.

A real worker consumes a private Redis (``conftest.py``); requests go through the API in this process. While
Redis is down, an append that crosses the trigger, a compress, a re-summarize and a reported run (whose drift
check must open a case) are all answered 2xx with their work left queued in the database. Redis restarts
empty (what it held is lost, as in a crash); the recovery sweep, driven here as beat would drive it, sends the
lost work again and everything finishes, each run once. A second test kills a worker (SIGKILL) while it
re-summarizes and the sweep gives the re-summarize to a new worker.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from console.models import CompressionRun, DriftCase, Session, Summary
from console.services import runs, summaries
from tests.console.test_api import Api, issue_key
from tests.console.workers import Supervised, celery_worker, default_queue, unique_queue, wait_until, worker_env
from tests.fakes.openai_server import FakeOpenAIServer
from tests.faults.conftest import PrivateRedis
from tests.faults.sessions import conversation

pytestmark = [pytest.mark.faults, pytest.mark.worker, pytest.mark.django_db(transaction=True)]

WINDOW = 3400  # trigger at 2,380 tokens
INVERTED = "## Constraints and preferences\n- 用户要求修改部署脚本。\n\n## Progress and next steps\n- Proceed."


def sweep() -> dict[str, Any]:
    """One pass of the recovery sweep, as beat runs it (``console.recover``)."""
    return {"runs": runs.recover_stale_runs(), "summaries": summaries.recover_stale_summaries()}


@pytest.fixture
def worker(broker: PrivateRedis, model: FakeOpenAIServer) -> Iterator[Callable[[], Any]]:
    """Start workers on the private Redis, on a queue of their own that this process sends to meanwhile."""
    queue = unique_queue()
    env = worker_env(model, REDIS_URL=broker.url, SUMMARY_TIMEOUT="60")
    model.reset()
    with default_queue(queue):
        yield lambda: celery_worker(env, queue)


def assert_no_server_errors(responses: list[Any]) -> None:
    errors = [(r.status_code, r.content[:300]) for r in responses if r.status_code >= 500]
    assert errors == [], errors


def test_a_broker_outage_answers_every_write_and_the_sweep_finishes_the_work_once(
    broker: PrivateRedis, model: FakeOpenAIServer, worker: Callable[[], Any], settings: Any
):
    settings.OPENAI_BASE_URL, settings.OPENAI_API_KEY = model.base_url, "test"
    settings.SUMMARY_COOLDOWN_SECONDS = 0
    api = Api(issue_key("fault-runtime", "operator"))
    responses: list[Any] = []

    def call(method: str, url: str, body: Any = None) -> Any:
        response = api.post(url, body) if method == "post" else api.get(url)
        responses.append(response)
        return response

    # supervised as in production: a worker that exits on the outage is started again (Supervised says why)
    with Supervised(worker) as process:
        # before the outage: sessions to work on, and one compressed (its archive is re-summarized later)
        full = conversation("auto", 30)  # ~2,500 tokens: the last three exchanges cross the trigger
        for key, messages in (("fault:auto", full[:-6]), ("fault:compress", conversation("manual", 25))):
            created = call("post", "/sessions", {"key": key, "messages": messages, "context_window_tokens": WINDOW})
            assert created.status_code == 201, created.content
        created = call(
            "post",
            "/sessions",
            {"key": "fault:archive", "messages": conversation("archive", 25), "context_window_tokens": WINDOW},
        )
        assert created.status_code == 201
        done = call("post", "/sessions/fault:archive/compress", {"wait": 30})
        assert done.status_code == 200 and done.json()["status"] == "succeeded", done.content
        archive_id = done.json()["run"]["archive_id"]

        broker.stop()
        started = time.monotonic()
        appended = call("post", "/sessions/fault:auto/messages", {"messages": full[-6:], "expected_version": 1})
        compressed = call("post", "/sessions/fault:compress/compress", {"focus_topic": "batch size"})
        again = call("post", "/sessions/fault:compress/compress", {"focus_topic": "batch size"})
        redo = call("post", f"/archives/{archive_id}/summaries", {"summarizer": "openai"})
        reported = call(
            "post",
            "/runs/report",
            {
                "session_key": "fault:report",
                "input_messages": (source := conversation("report", 12)),
                "output_messages": source[:2] + [{"role": "user", "content": "[summary of steps 0-3]"}] + source[10:],
                "archive_messages": source[2:10],
                "summary_text": INVERTED,
            },
        )
        retried = call("post", "/sessions/fault:auto/messages", {"messages": full[-6:], "expected_version": 1})
        outage_requests = time.monotonic() - started

        assert_no_server_errors(responses)
        assert appended.status_code == 200 and appended.json()["queued_run_id"], appended.content
        assert retried.status_code == 409, "a retry of the stored append is refused, not stored twice"
        assert compressed.status_code == 202 and compressed.json()["status"] == "queued"
        assert (again.status_code, again.json()["run_id"], again.json()["created"]) == (
            202,
            compressed.json()["run_id"],
            False,
        )
        assert redo.status_code == 202 and redo.json()["status"] == "pending", redo.content
        assert reported.status_code == 201, reported.content
        assert outage_requests < 10, f"six requests took {outage_requests:.1f}s with the broker down"
        auto_run = CompressionRun.objects.get(pk=appended.json()["queued_run_id"])
        assert auto_run.status == CompressionRun.Status.QUEUED and auto_run.sent_at is None

        # the sweep while the broker is still down: sends nothing, fails nothing
        assert sweep()["runs"]["failed"] == 0
        broker.start()
        restarted = time.monotonic()

        def finished() -> dict[str, Any]:
            sweep()
            return {
                "active runs": CompressionRun.objects.filter(status__in=CompressionRun.ACTIVE).count(),
                "pending summaries": Summary.objects.filter(status=Summary.Status.PENDING).count(),
                "unchecked summaries": Summary.objects.filter(drift_checked_at__isnull=True)
                .exclude(status__in=[Summary.Status.PENDING, Summary.Status.FAILED])
                .count(),
            }

        state = wait_until(finished, lambda s: not any(s.values()), 120, "the work queued during the outage", process)
        recovered = time.monotonic() - restarted
        print(
            f"recovered everything {recovered:.1f}s after the broker came back: {state}; restarts: {len(process.exits)}"
        )

    assert_no_server_errors(responses)
    auto_run.refresh_from_db()
    assert auto_run.status == CompressionRun.Status.SUCCEEDED and auto_run.applied, auto_run.error
    assert auto_run.attempts == 1
    manual = CompressionRun.objects.get(pk=compressed.json()["run_id"])
    assert manual.status == CompressionRun.Status.SUCCEEDED and manual.attempts == 1, manual.error
    for key in ("fault:auto", "fault:compress"):
        assert CompressionRun.objects.filter(session__key=key).count() == 1, f"{key}: one run, not one per retry"
    assert len(auto_run.input_keys) == len(full), "the append is stored once"
    assert Session.objects.get(key="fault:auto").version == 1 + 1 + 1, "created, appended once, written back once"
    resummary = Summary.objects.get(pk=redo.json()["id"])
    assert resummary.status == Summary.Status.DRAFT and resummary.text and resummary.attempts == 1
    assert resummary.drift_checked_at is not None
    report_summary = Summary.objects.get(archive__session__key="fault:report")
    assert report_summary.drift_checked_at is not None
    assert DriftCase.objects.filter(summary=report_summary, opened_by=None).count() == 1, report_summary.drift_findings


def test_a_re_summarize_whose_worker_was_killed_is_given_to_another_worker(
    broker: PrivateRedis, model: FakeOpenAIServer, worker: Callable[[], Any], settings: Any
):
    settings.OPENAI_BASE_URL, settings.OPENAI_API_KEY = model.base_url, "test"
    api = Api(issue_key("fault-killer", "operator"))
    created = api.post(
        "/sessions", {"key": "fault:kill", "messages": conversation("kill", 25), "context_window_tokens": WINDOW}
    )
    assert created.status_code == 201
    with worker() as doomed:
        done = api.post("/sessions/fault:kill/compress", {"wait": 30})
        assert done.status_code == 200 and done.json()["status"] == "succeeded", done.content
        calls = len(model.requests)
        model.script("slow", delay=30.0)  # the re-summarize's call hangs until its worker is killed
        redo = api.post(f"/archives/{done.json()['run']['archive_id']}/summaries", {"summarizer": "openai"})
        assert redo.status_code == 202
        wait_until(lambda: len(model.requests), lambda n: n > calls, 20, "the re-summarize's call", doomed)
        os.kill(doomed.pid, signal.SIGKILL)
        doomed.wait(timeout=10)

    summary = Summary.objects.get(pk=redo.json()["id"])
    assert (summary.status, summary.stage, summary.attempts) == (Summary.Status.PENDING, "running", 1)
    assert summaries.recover_stale_summaries(stale_after=30)["requeued"] == 0, "its heartbeat is fresh"
    time.sleep(1.2)  # the heartbeat ages (workers beat every 0.2 s while alive)
    with worker() as rescuer:
        assert summaries.recover_stale_summaries(stale_after=1)["requeued"] == 1
        summary = wait_until(
            lambda: Summary.objects.get(pk=summary.pk),
            lambda s: s.stage == "done" and s.drift_checked_at is not None,
            30,
            "the re-summarize on the second worker",
            rescuer,
        )
    assert summary.status == Summary.Status.DRAFT and summary.text, summary.error
    assert summary.attempts == 2
    assert Summary.objects.filter(archive=summary.archive).count() == 2, "the original and one re-summary"
