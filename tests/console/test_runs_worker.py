"""Compression runs in real Celery worker processes, with a fake model on loopback.

Tasks are sent from the test process (on commit, or with ``.delay()``) through the broker the
settings name (Redis in CI, files otherwise) to a worker consuming a queue of its own. One worker
serves most tests of this module; the test that kills workers starts its own.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone

from agent_compression import validate_messages
from agent_compression.messages import message_sha256, messages_sha256
from agent_compression.prompt import PROMPT_VERSION
from console.importers import read_session_file
from console.models import Archive, AuditEvent, CompressionRun, Message, Session, SummarizerCooldown, Summary
from console.services import runs
from console.services.sessions import append_messages
from console.services.summaries import promote_summary, request_resummarize
from console.tasks import execute_run_task
from tests.console.factories import SMALL_WINDOW, sample_session
from tests.console.workers import celery_worker, default_queue, unique_queue, wait_until, worker_env
from tests.fakes.openai_server import FakeOpenAIServer
from tests.samples import CODING, sample_path

STAGES = ["prune", "boundaries", "archive", "summarize", "assemble", "validate"]
Status = CompressionRun.Status

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


@dataclass
class Worker:
    process: subprocess.Popen
    queue: str


@pytest.fixture(scope="module")
def model() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as server:
        yield server


@pytest.fixture(scope="module")
def worker(django_db_setup: None, model: FakeOpenAIServer) -> Iterator[Worker]:
    """One worker for the module, its queue the test process's default queue meanwhile."""
    queue = unique_queue()
    with celery_worker(worker_env(model), queue) as process, default_queue(queue):
        yield Worker(process, queue)


@pytest.fixture(autouse=True)
def fresh_model(model: FakeOpenAIServer, settings: Any) -> FakeOpenAIServer:
    """Each test scripts the model from scratch; the test process sees the same endpoint as the workers."""
    model.reset()
    settings.OPENAI_BASE_URL = model.base_url
    settings.OPENAI_API_KEY = "test"
    return model


def finished(run: CompressionRun, worker: Worker | None, seconds: float = 30) -> CompressionRun:
    return wait_until(
        lambda: CompressionRun.objects.get(pk=run.pk),
        lambda r: r.finished,
        seconds,
        f"run {run.pk} to finish",
        worker.process if worker else None,
    )


def session_keys(session: Session) -> list[str]:
    return Session.objects.get(pk=session.pk).keys()


def assert_history_valid(session: Session) -> list[str]:
    session.refresh_from_db()
    keys = session.keys()
    assert session.message_count == len(keys)
    assert session.token_count == Message.token_total(keys)
    assert validate_messages(session.messages()) == []
    return keys


def test_it_compresses_resummarizes_and_promotes_through_a_worker(worker, model):
    alice = get_user_model().objects.create_user("alice")
    session = sample_session(user=alice)
    question = {"role": "user", "content": "Why did the export job time out, and is the batch size fixed now?"}
    append_messages(session.key, [question], expected_version=session.version, user=alice)
    session.refresh_from_db()
    original = session.keys()

    run, created = runs.request_compression(
        session.key, user=alice, config=SMALL_WINDOW, focus_topic="export batch size"
    )
    execute_run_task.delay(run.pk)  # a duplicate delivery of the same task
    run = finished(run, worker)

    assert created
    assert run.status == Status.SUCCEEDED, run.error
    assert run.applied and run.was_compressed and run.attempts == 1 and run.worker
    assert [stage["name"] for stage in run.stages] == STAGES
    assert run.input_keys == original and run.base_length == len(original)
    assert run.tokens_before == Message.token_total(original) > run.tokens_after
    assert [w["code"] for w in run.warnings if w["code"] == "summary_failed"] == []
    assert session_keys(session) == run.output_keys
    assert_history_valid(session)

    archive = Archive.objects.get(run=run)
    assert archive.verified_messages() == Message.load(original)[archive.start : archive.end]
    assert archive.sha256 == messages_sha256(Message.load(original)[archive.start : archive.end])
    assert len(model.requests) == 1
    assert "export batch size" in model.requests[0].prompt_text

    summary = Summary.objects.get(run=run)
    assert summary.status == Summary.Status.ACTIVE
    assert summary.provenance["generator"] == "openai"
    assert summary.provenance["endpoint_host"] == "127.0.0.1"
    assert summary.provenance["prompt_version"] == PROMPT_VERSION
    assert summary.provenance["focus_topic"] == "export batch size"
    assert summary.provenance["created_by"] == "alice"
    assert summary.provenance["trigger"] == CompressionRun.Trigger.API
    position, _ = session.live_summary_index({summary.summary_id}) or (None, None)
    assert position is not None
    # the drift check is sent after the duplicate delivery, so once it ran the duplicate was handled too
    wait_until(lambda: Summary.objects.get(pk=summary.pk), lambda s: s.drift_checked_at, 20, "the drift check")
    assert CompressionRun.objects.get(pk=run.pk).attempts == 1
    assert Archive.objects.filter(run=run).count() == 1
    assert Summary.objects.count() == 1

    model.script("ok", text="## Decisions\n- Keep the export batch size at 500 (re-summarized).")
    redo = request_resummarize(
        archive.pk, summarizer="openai", model="fake-model-2", focus_topic="deploy script", user=alice
    )
    assert redo.status == Summary.Status.PENDING
    redo = wait_until(
        lambda: Summary.objects.get(pk=redo.pk), lambda s: s.stage == "done", 20, "the re-summarize", worker.process
    )
    assert redo.status == Summary.Status.DRAFT, redo.error
    assert "re-summarized" in redo.text
    assert redo.parent_id == summary.pk
    assert redo.provenance["model"] == "fake-model-2" and redo.provenance["focus_topic"] == "deploy script"
    assert "deploy script" in model.requests[-1].prompt_text

    promote_summary(redo.pk, user=alice)

    keys = assert_history_valid(session)
    assert session.live_summary_index({redo.summary_id}) == (position, redo.summary_id)
    assert session.live_summary_index({summary.summary_id}) is None
    assert "re-summarized" in Message.load([keys[position]])[0]["content"]
    summary.refresh_from_db()
    redo.refresh_from_db()
    assert (summary.status, redo.status) == (Summary.Status.SUPERSEDED, Summary.Status.ACTIVE)
    actions = set(AuditEvent.objects.filter(actor=alice).values_list("action", flat=True))
    assert {"session.create", "run.queue", "summary.resummarize", "summary.promote"} <= actions
    promoted = AuditEvent.objects.get(action="summary.promote")
    assert promoted.before == {"status": "draft", "live_summary": summary.summary_id, "summary_version": 1}
    assert (promoted.after["live_summary"], promoted.after["summary_version"]) == (redo.summary_id, 2)
    wait_until(
        lambda: Summary.objects.get(pk=redo.pk), lambda s: s.drift_checked_at, 20, "the re-summary's drift check"
    )


def test_it_keeps_messages_appended_while_the_worker_waits_for_the_model(worker, model):
    model.script("slow", delay=2.0)
    session = sample_session()
    original = session.keys()
    run, _ = runs.request_compression(session.key, config=SMALL_WINDOW)
    wait_until(lambda: CompressionRun.objects.get(pk=run.pk), lambda r: r.stage == "summarize", 20, "summarize")

    appended: list[dict[str, Any]] = []
    for n in range(3):
        turn = [
            {"role": "user", "content": f"第 {n} 批导出完成了吗？"},
            {"role": "assistant", "content": f"Batch {n} is exported; 500 rows."},
        ]
        version = Session.objects.get(pk=session.pk).version
        append_messages(session.key, turn, expected_version=version)
        appended.extend(turn)
    assert CompressionRun.objects.get(pk=run.pk).status == Status.RUNNING, "the appends landed during the run"
    run = finished(run, worker)

    assert run.status == Status.SUCCEEDED and run.applied, run.error
    assert run.input_keys == original
    keys = assert_history_valid(session)
    assert keys == run.output_keys + [message_sha256(m) for m in appended]
    assert Message.load(keys[-len(appended) :]) == appended
    session.refresh_from_db()
    assert session.version == 1 + 3 + 1, "created, three appends, one write-back"


def test_it_degrades_on_a_429_and_every_worker_respects_the_cooldown(worker, model):
    model.script("429", retry_after=60)
    first, _ = runs.request_compression(sample_session().key, config=SMALL_WINDOW)
    first = finished(first, worker)

    assert first.status == Status.DEGRADED and first.was_compressed and first.applied
    failed = next(w["message"] for w in first.warnings if w["code"] == "summary_failed")
    assert "HTTP 429" in failed
    assert not Summary.objects.exists()
    assert Archive.objects.filter(run=first).count() == 1
    assert 50 < SummarizerCooldown.objects.get().until - time.time() <= 60
    assert_history_valid(first.session)

    second, _ = runs.request_compression(sample_session("wechat_wxid_demo01.jsonl").key, config=SMALL_WINDOW)
    second = finished(second, worker)

    assert len(model.requests) == 1, "no call to the endpoint while it cools down"
    assert second.status == Status.DEGRADED and second.applied
    assert "cooling down" in next(w["message"] for w in second.warnings if w["code"] == "summary_failed")
    assert_history_valid(second.session)


def test_it_recovers_a_run_whose_worker_was_killed_mid_call(model, settings):
    settings.RUN_MAX_ATTEMPTS = 3
    model.script("slow", delay=30.0)  # the first call never comes back in time; later ones answer at once
    session = sample_session()
    before = (session.keys(), session.version)
    queue = unique_queue()
    env = worker_env(model, SUMMARY_TIMEOUT="60")

    with default_queue(queue):
        with celery_worker(env, queue) as doomed:
            run, _ = runs.request_compression(session.key, config=SMALL_WINDOW)
            wait_until(lambda: len(model.requests), bool, 20, "the call to the model", doomed)
            os.kill(doomed.pid, signal.SIGKILL)
            doomed.wait(timeout=10)

        # the run is left running; nothing moves until its heartbeat is older than stale_after
        run = CompressionRun.objects.get(pk=run.pk)
        assert (run.status, run.stage, run.attempts) == (Status.RUNNING, "summarize", 1)
        assert runs.recover_stale_runs(stale_after=5) == {"requeued": 0, "failed": 0, "resent": 0}
        wait_until(
            lambda: CompressionRun.objects.get(pk=run.pk),
            lambda r: timezone.now() - r.heartbeat_at > timedelta(seconds=1),
            10,
            "the heartbeat to age",
        )
        assert session_keys(session) == before[0]

        assert runs.recover_stale_runs(stale_after=1) == {"requeued": 1, "failed": 0, "resent": 0}
        run = CompressionRun.objects.get(pk=run.pk)
        assert run.status == Status.QUEUED and run.attempts == 1
        assert [w["code"] for w in run.warnings] == ["worker_lost"]
        session.refresh_from_db()
        assert (session.keys(), session.version) == before, "untouched until a write-back succeeds"

        with celery_worker(env, queue) as rescuer:
            run = finished(run, Worker(rescuer, queue))

    assert run.status == Status.SUCCEEDED and run.applied, run.error
    assert run.attempts == 2
    assert "worker_lost" in [w["code"] for w in run.warnings]
    assert len(model.requests) == 2
    assert Archive.objects.filter(run=run).count() == 1
    assert Summary.objects.get(run=run).status == Summary.Status.ACTIVE
    assert assert_history_valid(session) == run.output_keys


def test_a_runtime_compresses_over_the_api_and_waits_for_the_result(worker, model):
    """The integration path: create, append, compress with `wait`, use the answer as the new context."""
    from tests.console.test_api import Api, issue_key

    api = Api(issue_key("runtime", "operator"))
    model.script("slow", delay=1.5)  # keeps the automatic run in flight while the compress request arrives
    data = read_session_file(sample_path(CODING))
    created = api.post("/sessions", {"key": "rt:wait", "messages": data.messages[:-1], "context_window_tokens": 4000})
    assert created.status_code == 201, created.content
    appended = api.post("/sessions/rt:wait/messages", {"messages": data.messages[-1:], "expected_version": 1})
    assert appended.status_code == 200
    auto_run = appended.json()["queued_run_id"]  # past the trigger: the append queued a run by itself
    assert auto_run is not None

    response = api.post("/sessions/rt:wait/compress", {"focus_topic": "batch size", "wait": 30})
    assert response.status_code == 200, response.content
    body = response.json()
    # the request joined the run in flight instead of queuing a second one
    assert (body["run_id"], body["created"], body["status"]) == (auto_run, False, "succeeded")
    assert body["run"]["trigger"] == "auto" and CompressionRun.objects.count() == 1
    assert body["run"]["applied"] and body["run"]["summary"]["provenance"]["generator"] == "openai"
    assert body["messages"] == api.get("/sessions/rt:wait").json()["messages"]
    assert validate_messages(body["messages"]) == []
    assert body["version"] == 3
    hits = api.get("/sessions/rt:wait/archive/search", q="timeout").json()["hits"]
    assert hits and all(h["archive_id"] == body["run"]["archive_id"] for h in hits)
