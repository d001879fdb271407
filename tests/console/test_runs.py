"""Compression runs in-process: queue, execute, write back without losing data, fail cleanly, recover.

Tasks run eagerly here (a follow-up drift check runs inline); ``tests/console/test_runs_worker.py``
does the same through real worker processes. Where a test needs something to happen *during* a
run (an append, a rival run, a dying worker) it uses a summarizer that does it when it is called.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.utils import timezone

from agent_compression import ExtractiveSummarizer, count_tokens, validate_messages
from agent_compression.messages import message_sha256, messages_sha256
from agent_compression.types import SummaryOutcome, SummaryRequest
from console.celery import tasks_inline
from console.errors import ArchiveCorrupted, InvalidInput
from console.models import Archive, CompressionRun, Message, Session, SummarizerCooldown, Summary
from console.services import runs
from console.services.drift import check_summary_drift
from console.services.reported import record_reported_run
from console.services.sessions import append_messages
from console.services.summaries import execute_resummarize, request_resummarize
from tests.console.factories import SMALL_WINDOW, sample_session

CODING = "coding_export_job.json"
CHAT = "wechat_wxid_demo01.jsonl"
STAGES = ["prune", "boundaries", "archive", "summarize", "assemble", "validate"]
Status = CompressionRun.Status

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def eager_tasks() -> Iterator[None]:
    """Tasks sent while a test runs execute inline instead of going to a broker."""
    with tasks_inline():
        yield


def compress(session: Session, **options: Any) -> CompressionRun:
    """Queue a run (as the API does) and execute it as a worker would; returns the finished row."""
    options.setdefault("config", SMALL_WINDOW)
    run, created = runs.request_compression(session.key, **options)
    assert created
    runs.execute_run(run.pk)
    run.refresh_from_db()
    return run


def turn(n: int) -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": f"follow-up question {n}: is batch {n} exported?"},
        {"role": "assistant", "content": f"Yes, batch {n} is exported."},
    ]


class HookedSummarizer(ExtractiveSummarizer):
    """The offline summarizer, calling ``hook`` first (once): something happens while the run summarizes."""

    def __init__(self, hook: Callable[[], None]) -> None:
        self.hook: Callable[[], None] | None = hook

    def summarize(self, request: SummaryRequest) -> SummaryOutcome:
        hook, self.hook = self.hook, None
        if hook is not None:
            hook()
        return super().summarize(request)


def during_summarize(monkeypatch: pytest.MonkeyPatch, hook: Callable[[], None]) -> None:
    summarizer = HookedSummarizer(hook)
    monkeypatch.setattr(runs, "build_summarizer", lambda *args, **kwargs: summarizer)


def assert_history_valid(session: Session) -> None:
    session.refresh_from_db()
    keys = session.keys()
    assert session.message_count == len(keys)
    assert session.token_count == Message.token_total(keys)
    assert validate_messages(session.messages()) == []


# --------------------------------------------------------------------------- a run, start to end


def test_it_compresses_a_session_and_records_what_it_did():
    session = sample_session()
    original = session.keys()

    run = compress(session, focus_topic="export batch size")

    assert run.status == Status.SUCCEEDED
    assert run.applied and run.was_compressed
    assert run.attempts == 1 and run.error == ""
    assert [stage["name"] for stage in run.stages] == STAGES
    assert run.input_keys == original and run.base_length == len(original)
    assert run.tokens_before == Message.token_total(original)
    assert run.tokens_after < run.tokens_before
    assert "summary_failed" not in [w["code"] for w in run.warnings]
    session.refresh_from_db()
    assert session.keys() == run.output_keys
    assert_history_valid(session)

    archive = Archive.objects.get(run=run)
    assert archive.verified_messages() == Message.load(original)[archive.start : archive.end]
    assert archive.sha256 == messages_sha256(Message.load(original)[archive.start : archive.end])

    summary = Summary.objects.get(run=run)
    assert summary.status == Summary.Status.ACTIVE
    assert summary.provenance["generator"] == "extractive"
    assert summary.provenance["focus_topic"] == "export batch size"
    assert summary.provenance["trigger"] == CompressionRun.Trigger.API
    assert summary.drift_checked_at is not None
    assert session.live_summary_index({summary.summary_id}) is not None


# --------------------------------------------------------------------------- coalescing and races


def test_it_coalesces_compress_requests_onto_the_run_in_flight(django_capture_on_commit_callbacks):
    session = sample_session()

    with django_capture_on_commit_callbacks() as sent:
        first, created = runs.request_compression(session.key, config=SMALL_WINDOW)
        second, created_again = runs.request_compression(session.key, config=SMALL_WINDOW)

    assert created and not created_again
    assert second.pk == first.pk
    assert len(sent) == 1, "one task for one run"
    assert CompressionRun.objects.filter(session=session).count() == 1

    runs.execute_run(first.pk)
    third, created = runs.request_compression(session.key)
    assert created and third.pk != first.pk, "a finished run does not absorb new requests"


def test_it_ends_the_later_of_two_racing_runs_as_conflict_and_leaves_the_session_to_the_winner(monkeypatch):
    session = sample_session()
    original = session.keys()
    loser = runs.queue_run(session, CompressionRun.Trigger.MANUAL, config=SMALL_WINDOW)
    winner = runs.queue_run(session, CompressionRun.Trigger.MANUAL, config=SMALL_WINDOW)
    # the loser snapshots the session, then the winner runs and writes back while the loser summarizes
    during_summarize(monkeypatch, lambda: runs.execute_run(winner.pk))

    assert runs.execute_run(loser.pk) == Status.CONFLICT

    winner.refresh_from_db()
    loser.refresh_from_db()
    session.refresh_from_db()
    assert winner.status == Status.SUCCEEDED and winner.applied
    assert loser.status == Status.CONFLICT and not loser.applied
    assert "changed while the run worked" in loser.error
    assert loser.input_keys == winner.input_keys == original
    assert session.keys() == winner.output_keys
    assert session.version == 2, "created, then written back once (by the winner)"
    assert not Summary.objects.filter(run=loser, status=Summary.Status.ACTIVE).exists()
    assert_history_valid(session)


def test_it_does_nothing_on_a_duplicate_delivery():
    from console.tasks import execute_run_task

    session = sample_session()
    run, _ = runs.request_compression(session.key, config=SMALL_WINDOW)

    assert execute_run_task.delay(run.pk).get() == Status.SUCCEEDED
    session.refresh_from_db()
    version = session.version
    assert execute_run_task.delay(run.pk).get() is None
    assert runs.execute_run(run.pk) is None

    run.refresh_from_db()
    session.refresh_from_db()
    assert run.status == Status.SUCCEEDED and run.attempts == 1
    assert Archive.objects.filter(run=run).count() == 1
    assert Summary.objects.filter(run=run).count() == 1
    assert session.version == version


# --------------------------------------------------------------------------- appends during a run


def test_it_keeps_every_message_appended_while_the_run_worked(monkeypatch):
    session = sample_session()
    appended: list[dict[str, Any]] = []

    def append_three_times() -> None:
        for n in range(3):
            current = Session.objects.get(pk=session.pk)
            append_messages(session.key, turn(n), expected_version=current.version)
            appended.extend(turn(n))

    during_summarize(monkeypatch, append_three_times)
    run = compress(session)

    assert run.status == Status.SUCCEEDED and run.applied
    session.refresh_from_db()
    assert session.keys() == run.output_keys + [message_sha256(m) for m in appended]
    assert session.messages()[-len(appended) :] == appended
    assert session.version == 1 + 3 + 1, "created, three appends, one write-back"
    assert_history_valid(session)


# --------------------------------------------------------------------------- failure paths


@pytest.mark.parametrize(
    ("behaviour", "reason"),
    [
        ("500", "HTTP 500"),
        ("slow", "timeout"),
        ("garbage", "not valid"),
        ("429", "HTTP 429"),
    ],
)
def test_it_compresses_without_a_summary_when_the_model_fails(model, behaviour, reason):
    model.script(behaviour, delay=2.0, retry_after=30)
    session = sample_session()
    original = session.keys()

    run = compress(session)

    assert len(model.requests) == 1
    assert run.status == Status.DEGRADED
    assert run.was_compressed and run.applied
    warnings = {w["code"]: w["message"] for w in run.warnings}
    assert "summary_failed" in warnings
    assert reason in warnings["summary_failed"]
    assert not Summary.objects.exists()
    archive = Archive.objects.get(run=run)
    assert archive.verified_messages() == Message.load(original)[archive.start : archive.end]
    session.refresh_from_db()
    assert session.keys() == run.output_keys
    assert_history_valid(session)


def test_it_does_not_call_the_model_again_while_a_429_cooldown_lasts(model):
    model.script("429", retry_after=60)
    first = compress(sample_session(CODING))
    assert first.status == Status.DEGRADED
    cooldown = SummarizerCooldown.objects.get()
    assert 50 < cooldown.until - time.time() <= 60

    second = compress(sample_session(CHAT))

    assert len(model.requests) == 1, "the second run must not call the endpoint during the cooldown"
    assert second.status == Status.DEGRADED and second.applied
    assert "cooling down" in next(w["message"] for w in second.warnings if w["code"] == "summary_failed")


def test_it_fails_a_run_whose_stored_messages_are_missing_and_leaves_the_session_alone():
    session = sample_session()
    before = (session.keys(), session.version, session.message_count, session.token_count)
    lost = Message.objects.get(pk=before[0][5]).data
    # a message row lost behind the database's back (foreign keys are checked at commit, which never comes here)
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM console_message WHERE sha256 = %s", [before[0][5]])
    run, _ = runs.request_compression(session.key, config=SMALL_WINDOW)

    assert runs.execute_run(run.pk) == Status.FAILED
    Message.store([lost])  # the test database checks its foreign keys at the end

    run.refresh_from_db()
    session.refresh_from_db()
    assert run.status == Status.FAILED and not run.applied
    assert "LookupError" in run.error and "missing" in run.error
    assert run.finished_at is not None
    assert (session.keys(), session.version, session.message_count, session.token_count) == before
    assert not Archive.objects.exists()


# --------------------------------------------------------------------------- recovery


class WorkerDied(BaseException):
    """Stands for the process dying: nothing in the worker code catches it."""


def die_in_summarize(monkeypatch: pytest.MonkeyPatch) -> None:
    def die() -> None:
        raise WorkerDied

    during_summarize(monkeypatch, die)


def go_silent(run: CompressionRun, seconds: float = 60) -> None:
    """Age the heartbeat, as a dead worker would."""
    CompressionRun.objects.filter(pk=run.pk).update(heartbeat_at=timezone.now() - timedelta(seconds=seconds))


def test_it_requeues_a_run_whose_worker_died_and_a_new_attempt_finishes_it(
    monkeypatch, settings, django_capture_on_commit_callbacks
):
    settings.RUN_MAX_ATTEMPTS = 3
    session = sample_session()
    before = (session.keys(), session.version)
    run, _ = runs.request_compression(session.key, config=SMALL_WINDOW)
    die_in_summarize(monkeypatch)
    with pytest.raises(WorkerDied):
        runs.execute_run(run.pk)
    run.refresh_from_db()
    assert run.status == Status.RUNNING and run.stage == "summarize"
    assert Archive.objects.filter(run=run).count() == 1, "the archive is stored before the model is called"
    go_silent(run)

    with django_capture_on_commit_callbacks() as sent:
        report = runs.recover_stale_runs(stale_after=30)

    assert report == {"requeued": 1, "failed": 0, "resent": 0}
    assert len(sent) == 1
    run.refresh_from_db()
    assert run.status == Status.QUEUED and run.attempts == 1
    assert [w["code"] for w in run.warnings] == ["worker_lost"]
    assert "summarize" in run.warnings[0]["message"]
    session.refresh_from_db()
    assert (session.keys(), session.version) == before, "untouched until a write-back succeeds"

    monkeypatch.undo()
    assert runs.execute_run(run.pk) == Status.SUCCEEDED
    run.refresh_from_db()
    session.refresh_from_db()
    assert run.attempts == 2 and run.applied
    assert [w["code"] for w in run.warnings][:1] == ["worker_lost"]
    assert Archive.objects.filter(run=run).count() == 1
    assert Summary.objects.filter(run=run).count() == 1
    assert session.keys() == run.output_keys
    assert_history_valid(session)


def test_it_fails_a_run_whose_worker_keeps_dying_after_the_last_attempt(monkeypatch, settings):
    settings.RUN_MAX_ATTEMPTS = 2
    session = sample_session()
    before = (session.keys(), session.version)
    run, _ = runs.request_compression(session.key, config=SMALL_WINDOW)
    for attempt in (1, 2):
        die_in_summarize(monkeypatch)
        with pytest.raises(WorkerDied):
            runs.execute_run(run.pk)
        go_silent(run)
        report = runs.recover_stale_runs(stale_after=30)
        run.refresh_from_db()
        assert run.attempts == attempt
        if attempt == 1:
            assert report["requeued"] == 1 and run.status == Status.QUEUED

    assert report == {"requeued": 0, "failed": 1, "resent": 0}
    assert run.status == Status.FAILED and run.finished_at is not None
    assert "stopped responding 2 times" in run.error and "summarize" in run.error
    assert not CompressionRun.objects.filter(status__in=CompressionRun.ACTIVE).exists()
    session.refresh_from_db()
    assert (session.keys(), session.version) == before


def test_it_drops_the_result_of_an_attempt_that_recovery_gave_to_another_worker(monkeypatch):
    session = sample_session()
    run, _ = runs.request_compression(session.key, config=SMALL_WINDOW)

    def presumed_dead() -> None:
        # this attempt's heartbeat went silent (a stalled worker): recovery re-queued the run and
        # a second worker ran it to the end, while this attempt was waiting for the model
        go_silent(run)
        assert runs.recover_stale_runs(stale_after=30)["requeued"] == 1
        assert runs.execute_run(run.pk) == Status.SUCCEEDED

    during_summarize(monkeypatch, presumed_dead)

    assert runs.execute_run(run.pk) is None, "the late attempt is not the run's any more"

    run.refresh_from_db()
    session.refresh_from_db()
    assert run.status == Status.SUCCEEDED and run.applied and run.attempts == 2
    assert run.error == ""
    assert session.keys() == run.output_keys
    assert session.version == 2, "created, then written back once (by the second attempt)"
    archive = Archive.objects.get(run=run)
    assert archive.inserted_id == Summary.objects.get(run=run, status=Summary.Status.ACTIVE).summary_id
    assert session.live_summary_index({archive.inserted_id}) is not None
    assert_history_valid(session)


def test_it_keeps_a_written_back_run_succeeded_when_its_drift_check_cannot_be_queued(monkeypatch):
    from kombu.exceptions import OperationalError

    from console.tasks import check_drift_task

    def broker_down(*args: Any, **kwargs: Any) -> None:
        raise OperationalError("Error 111 connecting to the broker. Connection refused.")

    monkeypatch.setattr(check_drift_task, "apply_async", broker_down)
    session = sample_session()

    run = compress(session)

    assert run.status == Status.SUCCEEDED and run.applied, run.error
    session.refresh_from_db()
    assert session.keys() == run.output_keys
    redo = request_resummarize(Archive.objects.get(run=run).pk, summarizer="extractive")
    assert execute_resummarize(redo.pk) == Summary.Status.DRAFT
    redo.refresh_from_db()
    assert redo.status == Summary.Status.DRAFT and redo.text and redo.error == ""


def test_it_leaves_a_run_with_a_live_heartbeat_alone():
    session = sample_session()
    run, _ = runs.request_compression(session.key, config=SMALL_WINDOW)
    runs.claim(run.pk)

    assert runs.recover_stale_runs(stale_after=30) == {"requeued": 0, "failed": 0, "resent": 0}
    run.refresh_from_db()
    assert run.status == Status.RUNNING


def test_it_sends_a_queued_run_again_when_its_task_was_lost():
    session = sample_session()
    run, _ = runs.request_compression(session.key, config=SMALL_WINDOW)  # its task never leaves the test
    CompressionRun.objects.filter(pk=run.pk).update(created_at=timezone.now() - timedelta(minutes=30))

    report = runs.recover_stale_runs(queued_after=60)

    assert report["resent"] == 1
    run.refresh_from_db()
    assert run.status == Status.SUCCEEDED and run.attempts == 1


# --------------------------------------------------------------------------- automatic compression


def test_it_queues_one_automatic_run_however_many_appends_cross_the_trigger(
    django_capture_on_commit_callbacks, settings
):
    settings.AUTO_COMPRESS = True
    long_turn = [{"role": "user", "content": "请继续导出下一批数据，并记录每一批的耗时。" * 10}]  # ~260 tokens a turn
    # a window whose trigger (70 %) the sample reaches after two and a half appends
    start = sample_session().token_count
    trigger = start + 2.5 * count_tokens(long_turn + turn(0))
    session = sample_session(key="coding:auto", context_window_tokens=int(trigger / 0.7) + 1)

    with django_capture_on_commit_callbacks() as sent:
        queued = [append_messages(session.key, long_turn + turn(n))[1] for n in range(6)]

    session.refresh_from_db()
    assert session.token_count >= trigger
    auto = CompressionRun.objects.filter(session=session, trigger=CompressionRun.Trigger.AUTO)
    assert auto.count() == 1
    assert [r.pk for r in queued if r is not None] == [auto.get().pk]
    assert queued[:2] == [None, None], "the first appends stay under the trigger"
    assert len(sent) == 1


def test_it_never_rewrites_the_consolidated_prefix():
    session = sample_session(CHAT, last_consolidated=12)
    original = session.keys()

    run = compress(session)

    # the 12 kept messages alone are over the small window's trigger: applied, but not a success
    assert run.status == Status.DEGRADED and run.applied
    assert "fixed_part_over_trigger" in [w["code"] for w in run.warnings]
    assert run.boundaries["head_end"] >= 12
    session.refresh_from_db()
    assert session.keys()[:12] == original[:12]
    assert Archive.objects.get(run=run).start >= 12


# --------------------------------------------------------------------------- reported runs


def reported(messages: list[dict[str, Any]], start: int, end: int) -> dict[str, Any]:
    """What a runtime that compressed ``messages[start:end]`` in-process would report."""
    marker = {"role": "user", "content": "[earlier turns summarized by the runtime]"}
    ack = {"role": "assistant", "content": "Understood."}
    return {
        "input_messages": messages,
        "output_messages": messages[:start] + [marker, ack] + messages[end:],
        "archive_messages": messages[start:end],
    }


def test_it_applies_a_reported_run_when_the_live_history_is_its_input():
    session = sample_session()
    messages = session.messages()
    report = reported(messages, 3, 20)

    run = record_reported_run(session_key=session.key, summary_text="Runtime's own summary.", **report)

    session.refresh_from_db()
    assert run.applied and run.status == Status.SUCCEEDED
    assert session.messages() == report["output_messages"]
    archive = Archive.objects.get(run=run)
    assert (archive.start, archive.end) == (3, 20)
    assert archive.verified_messages() == messages[3:20]
    assert Summary.objects.get(run=run).status == Summary.Status.ACTIVE


def test_it_applies_a_reported_run_whose_input_starts_with_the_live_history():
    """A runtime that only reports: its history grew since the last report, the console's did not."""
    session = sample_session()
    live = session.messages()
    grown = [*live, {"role": "user", "content": "one more thing"}, {"role": "assistant", "content": "Sure."}]

    run = record_reported_run(session_key=session.key, **reported(grown, 3, 20))

    session.refresh_from_db()
    assert run.applied and not run.warnings
    assert session.messages() == reported(grown, 3, 20)["output_messages"]


def test_it_stores_but_does_not_apply_a_reported_run_whose_input_is_not_the_live_history():
    session = sample_session()
    messages = session.messages()
    append_messages(session.key, turn(1))
    session.refresh_from_db()
    live = session.keys()

    run = record_reported_run(session_key=session.key, summary_text="Summary.", **reported(messages, 3, 20))

    session.refresh_from_db()
    assert not run.applied
    assert [w["code"] for w in run.warnings] == ["not_applied"]
    assert session.keys() == live
    assert Summary.objects.get(run=run).status == Summary.Status.DRAFT


def test_it_does_not_apply_a_reported_run_that_rewrote_the_consolidated_prefix():
    session = sample_session(CHAT, last_consolidated=12)
    messages = session.messages()
    live = session.keys()

    run = record_reported_run(session_key=session.key, **reported(messages, 3, 20))

    session.refresh_from_db()
    assert not run.applied
    assert [w["code"] for w in run.warnings] == ["not_applied"]
    assert "consolidated" in run.warnings[0]["message"]
    assert session.keys() == live
    assert record_reported_run(session_key=session.key, **reported(messages, 12, 20)).applied


def test_it_refuses_a_reported_archive_that_is_not_a_slice_of_the_input_and_writes_nothing():
    session = sample_session()
    messages = session.messages()
    report = reported(messages, 3, 20)
    report["archive_messages"] = messages[3:8] + messages[9:20]  # one message left out
    report["output_messages"] = [*report["output_messages"], {"role": "user", "content": "never stored"}]
    counts = (Message.objects.count(), CompressionRun.objects.count(), Archive.objects.count(), Session.objects.count())

    with pytest.raises(InvalidInput, match="contiguous"):
        record_reported_run(session_key=session.key, **report)
    with pytest.raises(InvalidInput, match="contiguous"):
        record_reported_run(session_key="runtime:new", **report)

    after = (Message.objects.count(), CompressionRun.objects.count(), Archive.objects.count(), Session.objects.count())
    assert after == counts
    session.refresh_from_db()
    assert session.messages() == messages


# --------------------------------------------------------------------------- archive integrity


def test_it_refuses_to_use_an_archive_whose_originals_were_altered():
    session = sample_session()
    run = compress(session)
    archive = Archive.objects.get(run=run)
    summary = Summary.objects.get(run=run)
    key = archive.message_keys[0]
    data = dict(Message.objects.get(pk=key).data)
    data["content"] = "先修改部署脚本。"  # the opposite of what was said
    Message.objects.filter(pk=key).update(data=data)

    with pytest.raises(ArchiveCorrupted, match="altered"):
        archive.verified_messages()
    with pytest.raises(ArchiveCorrupted):
        check_summary_drift(summary.pk)
    redo = request_resummarize(archive.pk, summarizer="extractive")
    assert execute_resummarize(redo.pk) == Summary.Status.FAILED
    redo.refresh_from_db()
    assert "altered" in redo.error and redo.text == ""


def test_summaries_use_the_pages_placeholders_and_hold_no_raw_secret():
    from agent_compression.secrets import mask_secrets
    from console.display import mask_unless_revealed
    from console.masking import placeholder_key
    from console.services.sessions import ImportedSession, create_session

    secret = "sk_live_" + "51HxYz2AbCdEfGhIjKlMn0pQ"
    messages = [{"role": "system", "content": "You are a billing agent."}, {"role": "user", "content": "Fix billing."}]
    messages += [{"role": "assistant", "content": "On it."}, {"role": "user", "content": "Read the invoices."}]
    messages.append({"role": "user", "content": f"Do not rotate {secret} before Friday."})  # in the middle
    for n in range(40):
        messages += [{"role": "user", "content": f"step {n}: " + "look at the invoices again " * 20}]
        messages += [{"role": "assistant", "content": f"Checked invoice batch {n}."}]
    session = create_session(ImportedSession(key="billing:secret", messages=messages, metadata={}))

    run = compress(session)

    summary = Summary.objects.get(run=run)
    text = summary.text + json.dumps(summary.facts, ensure_ascii=False)
    assert secret not in text
    placeholder = mask_unless_revealed(secret)
    assert placeholder == mask_secrets(secret, key=placeholder_key()) != mask_secrets(secret)
    assert placeholder in text
