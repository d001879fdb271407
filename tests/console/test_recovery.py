"""Queueing that survives a broker outage, the recovery sweep, the cooldown policy and the waiter cap.

In-process (tasks run eagerly); ``tests/faults/`` does the same with a real Redis stopped and real workers.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from celery.app.task import Task
from django.urls import reverse
from django.utils import timezone
from kombu.exceptions import OperationalError

from agent_compression import OpenAISummarizer
from agent_compression.types import SummaryRequest
from console.celery import tasks_inline
from console.models import Archive, CompressionRun, SummarizerCooldown, Summary
from console.services import runs, summaries
from console.services.sessions import append_messages
from console.services.summarizer_factory import build_summarizer
from tests.console.factories import SMALL_WINDOW, sample_session
from tests.console.test_api import Api, issue_key
from tests.faults.sessions import conversation

Status = CompressionRun.Status
#: the coding sample (27,430 tokens) fits this window: a run need not shrink it now
ROOMY = {"context_window_tokens": 40_000}


@pytest.fixture
def eager() -> Iterator[None]:
    with tasks_inline():
        yield


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, Any]]:
    """Tasks the broker took (recorded, not run)."""
    taken: list[tuple[str, Any]] = []
    monkeypatch.setattr(Task, "apply_async", lambda self, args=None, **kw: taken.append((self.name, args)))
    return taken


@pytest.fixture
def broker_down(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(self: Task, *args: Any, **kwargs: Any) -> None:
        raise OperationalError("Error 111 connecting to 127.0.0.1:6379. Connection refused.")

    monkeypatch.setattr(Task, "apply_async", refuse)


def age(model: Any, pk: int, seconds: float, **fields: Any) -> None:
    then = timezone.now() - timedelta(seconds=seconds)
    model.objects.filter(pk=pk).update(created_at=then, **fields)


# --------------------------------------------------------------------------- broker down after commit


@pytest.mark.django_db(transaction=True)
def test_broker_down_after_commit_answers_what_was_written_and_leaves_it_queued(broker_down):
    """Was: the .delay() in on_commit raised after the commit, a 500 whose retry duplicated the append."""
    api = Api(issue_key("runtime", "operator"))
    full = conversation("down", 30)
    body = {"key": "down:auto", "messages": full[:-6], "context_window_tokens": 3400}
    assert api.post("/sessions", body).status_code == 201

    appended = api.post("/sessions/down:auto/messages", {"messages": full[-6:], "expected_version": 1})
    body = {"key": "down:manual", "messages": conversation("manual", 5)}
    assert api.post("/sessions", body).status_code == 201
    compressed = api.post("/sessions/down:manual/compress", {})

    assert appended.status_code == 200, appended.content
    run = CompressionRun.objects.get(pk=appended.json()["queued_run_id"])
    assert (run.status, run.sent_at, run.sends) == (Status.QUEUED, None, 0)
    assert compressed.status_code == 202 and compressed.json()["status"] == "queued"
    assert api.post("/sessions/down:auto/messages", {"messages": full[-6:], "expected_version": 1}).status_code == 409


@pytest.mark.django_db(transaction=True)
def test_broker_down_after_commit_leaves_a_re_summarize_pending_for_the_sweep(broker_down, eager):
    session = sample_session()
    with tasks_inline():
        run, _ = runs.request_compression(session.key, config=SMALL_WINDOW)
    runs.execute_run(run.pk)
    archive = Archive.objects.get(run=run)
    api = Api(issue_key("operator", "operator"))

    redo = api.post(f"/archives/{archive.pk}/summaries", {"summarizer": "extractive"})

    assert redo.status_code == 202, redo.content
    summary = Summary.objects.get(pk=redo.json()["id"])
    assert (summary.status, summary.stage, summary.sent_at) == (Summary.Status.PENDING, "queued", None)
    pipeline = Summary.objects.get(run=run)
    assert pipeline.drift_checked_at is None, "its drift check could not be sent either"


# --------------------------------------------------------------------------- the sweep


@pytest.mark.django_db
def test_the_sweep_resends_a_lost_run_within_a_minute_then_less_often(sent):
    """Was: a lost run waited 600 s, then every old queued run was re-sent every minute."""
    run, _ = runs.request_compression(sample_session().key, config=SMALL_WINDOW)
    age(CompressionRun, run.pk, 45, sent_at=timezone.now() - timedelta(seconds=45), sends=1)

    assert runs.recover_stale_runs()["resent"] == 1, "sent 45 s ago and not picked up: lost"
    assert runs.recover_stale_runs()["resent"] == 0, "not again at the next sweep"
    CompressionRun.objects.filter(pk=run.pk).update(sent_at=timezone.now() - timedelta(seconds=45))
    assert runs.recover_stale_runs()["resent"] == 0, "after two sends the wait doubles to 80 s"
    CompressionRun.objects.filter(pk=run.pk).update(sent_at=timezone.now() - timedelta(seconds=85))
    assert runs.recover_stale_runs()["resent"] == 1

    assert sent == [("console.execute_run", (run.pk,))] * 2
    run.refresh_from_db()
    assert run.sends == 3 and run.status == Status.QUEUED


@pytest.mark.django_db
def test_the_sweep_sends_at_once_what_never_reached_the_broker_and_stops_while_it_is_down(monkeypatch, sent):
    first, _ = runs.request_compression(sample_session().key, config=SMALL_WINDOW)
    second, _ = runs.request_compression(sample_session(key="coding:2").key, config=SMALL_WINDOW)
    assert runs.recover_stale_runs()["resent"] == 0, "just created: its own send may be under way"
    for run in (first, second):
        age(CompressionRun, run.pk, 10)
    calls = []

    def refuse(self: Task, *args: Any, **kwargs: Any) -> None:
        calls.append(self.name)
        raise OperationalError("Connection refused.")

    monkeypatch.setattr(Task, "apply_async", refuse)
    assert runs.recover_stale_runs()["resent"] == 0
    assert len(calls) == 1, "one failed send is enough to know the broker is down"
    monkeypatch.setattr(Task, "apply_async", lambda self, args=None, **kw: sent.append((self.name, args)))
    assert runs.recover_stale_runs()["resent"] == 2


@pytest.mark.django_db
def test_the_sweep_requeues_a_re_summarize_whose_worker_died_and_fails_it_after_the_last_attempt(
    settings, sent, django_capture_on_commit_callbacks
):
    settings.RUN_MAX_ATTEMPTS = 2
    archive = Archive.objects.get(run=compress_offline())
    summary = summaries.request_resummarize(archive.pk, summarizer="extractive")
    old = timezone.now() - timedelta(seconds=300)
    Summary.objects.filter(pk=summary.pk).update(stage="running", attempts=1, updated_at=old, sent_at=old, sends=1)

    with django_capture_on_commit_callbacks(execute=True):
        report = summaries.recover_stale_summaries(stale_after=30)

    assert report["requeued"] == 1
    assert ("console.resummarize", (summary.pk,)) in sent
    summary.refresh_from_db()
    assert (summary.status, summary.stage) == (Summary.Status.PENDING, "queued")
    assert summaries.execute_resummarize(summary.pk) == Summary.Status.DRAFT
    summary.refresh_from_db()
    assert summary.attempts == 2 and summary.text

    dying = summaries.request_resummarize(archive.pk, summarizer="extractive")
    Summary.objects.filter(pk=dying.pk).update(stage="running", attempts=2, updated_at=old)
    assert summaries.recover_stale_summaries(stale_after=30)["failed"] == 1
    dying.refresh_from_db()
    assert dying.status == Summary.Status.FAILED and "stopped responding 2 times" in dying.error


@pytest.mark.django_db
def test_the_sweep_sends_the_drift_check_that_never_ran_and_the_check_runs_once(sent):
    """Was: a drift check that could not be queued never ran, so an inverted constraint never opened a case."""
    run = compress_offline()
    summary = Summary.objects.get(run=run)
    old = timezone.now() - timedelta(seconds=60)
    # its send after the write-back failed: never sent, never checked
    Summary.objects.filter(pk=summary.pk).update(drift_checked_at=None, updated_at=old, sent_at=None, sends=0)
    sent.clear()

    assert summaries.recover_stale_summaries()["drift_resent"] == 1
    assert sent[-1] == ("console.check_drift", (summary.pk,))
    assert summaries.recover_stale_summaries()["drift_resent"] == 0

    from console.tasks import check_drift_task

    check_drift_task.run(summary.pk)
    checked = Summary.objects.get(pk=summary.pk).drift_checked_at
    assert checked is not None
    check_drift_task.run(summary.pk)  # a duplicate delivery
    assert Summary.objects.get(pk=summary.pk).drift_checked_at == checked


def compress_offline() -> CompressionRun:
    with tasks_inline():
        run, _ = runs.request_compression(sample_session().key, config=SMALL_WINDOW)
        runs.execute_run(run.pk)
    run.refresh_from_db()
    assert run.status == Status.SUCCEEDED, run.error
    return run


# --------------------------------------------------------------------------- cooldown


@pytest.mark.django_db
def test_a_run_that_would_only_lose_its_summary_waits_for_the_cooldown(model, eager, as_viewer):
    """Was: after one 429 every compression in the cooldown window was applied with "Summary unavailable"."""
    model.script("429", retry_after=60)
    first, _ = runs.request_compression(sample_session().key, config=ROOMY)

    assert runs.execute_run(first.pk) == Status.QUEUED, "its own call got the 429: it waits"
    second, _ = runs.request_compression(sample_session(key="coding:2").key, config=ROOMY)
    assert runs.execute_run(second.pk) is None, "it waits before calling the model at all"

    assert len(model.requests) == 1
    for run in (first, second):
        run.refresh_from_db()
        assert (run.status, run.stage, run.attempts, run.applied) == (Status.QUEUED, "cooldown", 0, False)
        assert 50 < (run.not_before - timezone.now()).total_seconds() <= 60
        assert [w["code"] for w in run.warnings] == ["waiting_for_summarizer"]
        assert "instead of compressing without a summary" in run.warnings[0]["message"]
        assert run.session.version == 1, "the session is left alone meanwhile"
    assert Archive.objects.filter(run=first).count() == 1
    progress = as_viewer.get(reverse("run_progress", args=[first.pk])).content.decode()
    assert "The summarizer is cooling down after a failure: this run waits until" in progress
    age(CompressionRun, first.pk, 30)
    age(CompressionRun, second.pk, 30)
    assert runs.recover_stale_runs()["resent"] == 0, "not before the cooldown ends"

    SummarizerCooldown.objects.update(until=time.time() - 1)
    CompressionRun.objects.update(not_before=timezone.now() - timedelta(seconds=1))
    assert runs.recover_stale_runs()["resent"] == 2  # runs them (eager)

    for run in (first, second):
        run.refresh_from_db()
        assert run.status == Status.SUCCEEDED and run.applied and run.attempts == 1, run.error
        assert Summary.objects.get(run=run).status == Summary.Status.ACTIVE
        assert "waiting_for_summarizer" in [w["code"] for w in run.warnings]
    assert Archive.objects.filter(run=first).count() == 1, "the wait reused the archive it stored"
    assert len(model.requests) == 3


@pytest.mark.django_db
def test_a_session_over_its_window_or_a_run_that_waited_long_enough_compresses_during_the_cooldown(
    model, settings, eager
):
    key = build_summarizer().cooldown_key  # type: ignore[attr-defined]
    SummarizerCooldown.objects.create(key=key, until=time.time() + 60)
    urgent, _ = runs.request_compression(sample_session().key, config=SMALL_WINDOW)  # 27,430 tokens in 4,000
    assert runs.execute_run(urgent.pk) == Status.DEGRADED

    settings.COOLDOWN_WAIT_MAX_SECONDS = 0
    patient, _ = runs.request_compression(sample_session(key="coding:2").key, config=ROOMY)
    age(CompressionRun, patient.pk, 1)
    assert runs.execute_run(patient.pk) == Status.DEGRADED
    assert len(model.requests) == 0


@pytest.mark.django_db
def test_a_run_waiting_for_the_cooldown_goes_now_once_appends_push_its_session_over_the_window(model, eager):
    model.script("429", retry_after=60)
    session = sample_session()
    window = {"context_window_tokens": session.token_count + 200}
    run, _ = runs.request_compression(session.key, config=window)
    assert runs.execute_run(run.pk) == Status.QUEUED
    age(CompressionRun, run.pk, 30)
    assert runs.recover_stale_runs()["resent"] == 0, "it fits: it waits"

    append_messages(session.key, conversation("more", 4))  # ~400 tokens: over the window now
    assert runs.recover_stale_runs()["resent"] == 1

    run.refresh_from_db()
    assert run.status == Status.DEGRADED and run.applied, "compressed without its summary, as it must"
    assert len(model.requests) == 1, "still no call during the cooldown"


# --------------------------------------------------------------------------- waiters


@pytest.mark.django_db
def test_compress_with_wait_answers_429_past_max_compress_waiters_and_writes_nothing(settings, eager):
    """Was: 30 waiting compress requests held every web thread and /healthz took 12.9 s."""
    settings.MAX_COMPRESS_WAITERS = 1
    api = Api(issue_key("runtime", "operator"))
    assert api.post("/sessions", {"key": "wait:1", "messages": conversation("wait", 3)}).status_code == 201

    with runs.waiter_slot():  # another request is waiting
        refused = api.post("/sessions/wait:1/compress", {"wait": 5})
        assert refused.status_code == 429, refused.content
        assert int(refused["Retry-After"]) > 0
        assert "MAX_COMPRESS_WAITERS" in refused.json()["detail"]
        assert not CompressionRun.objects.exists()
        assert api.post("/sessions/wait:1/compress", {}).status_code == 202, "not waiting needs no slot"
    assert api.post("/sessions/wait:1/compress", {"wait": 1}).status_code in (200, 202)


# --------------------------------------------------------------------------- the timeout warning


def test_the_timeout_warning_states_the_time_really_waited_over_every_attempt(fake_openai):
    """Was: "did not answer within 15s" for a call that waited 30.8 s over two attempts."""
    fake_openai.script("slow", "slow", delay=3.0)
    summarizer = OpenAISummarizer(base_url=fake_openai.base_url, api_key="k", timeout=0.5, max_retries=1)
    request = SummaryRequest(messages=[{"role": "user", "content": "hi"}], start_index=0, facts=[], max_tokens=300)

    outcome = summarizer.summarize(request)

    assert len(fake_openai.requests) == 2
    waited = float(re.search(r"waited ([\d.]+)s", outcome.error or "").group(1))  # type: ignore[union-attr]
    assert waited >= 1.0 and "0.5s timeout per attempt" in (outcome.error or ""), outcome.error
