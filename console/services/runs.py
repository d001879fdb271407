"""Compression runs: queue, execute in a worker, write back without losing data, recover.

A run is created in a transaction and its task is sent after commit. The task
claims the run with a conditional update (a second delivery finds it claimed and
does nothing), snapshots the session, runs the pipeline (the archive is stored
before the summarizer is called), then writes back under the session's row lock:
only if the prefix it compressed is unchanged, keeping whatever was appended
meanwhile. Anything else ends the run ``conflict`` and leaves the session alone.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.db.models import F, Q
from django.utils import timezone

from agent_compression import Archive as PipelineArchive
from agent_compression import (
    CompressionConfig,
    CompressionResult,
    CompressionWarning,
    Compressor,
    Summarizer,
    ThrashState,
)
from agent_compression.pipeline import DEGRADED_CODES

from ..audit import audit, person
from ..errors import InvalidInput, ServiceError, TooManyWaiters
from ..models import Archive, CompressionRun, Message, Session, Summary
from . import notifications, queue
from .summarizer_factory import build_summarizer
from .validation import locked_session, session_config

log = logging.getLogger(__name__)

Status = CompressionRun.Status


def queue_run(
    session: Session,
    trigger: str,
    *,
    user: Any = None,
    focus_topic: str = "",
    config: dict[str, Any] | None = None,
) -> CompressionRun:
    """Create a queued run and send its task once the surrounding transaction commits.

    A broker that is down leaves the run queued (the recovery sweep sends it), never fails the request.
    """
    session_config(session, config)  # refuse a bad override now, not in the worker
    run = CompressionRun.objects.create(
        session=session,
        trigger=trigger,
        created_by=person(user),
        focus_topic=focus_topic or "",
        config=config or {},
    )
    queue.send_on_commit(queue.EXECUTE_RUN, run.pk)
    return run


def request_compression(
    key: str, *, user: Any = None, trigger: str = CompressionRun.Trigger.API, focus_topic: str = "", config: Any = None
) -> tuple[CompressionRun, bool]:
    """Queue a compression unless one is already queued or running for the session.

    Returns ``(run, created)``; a request while a run is in flight gets that run.
    """
    if config is not None and not isinstance(config, dict):
        raise InvalidInput("config must be a JSON object of CompressionConfig fields")
    with transaction.atomic():
        session = locked_session(key)
        active = session.runs.filter(status__in=CompressionRun.ACTIVE).order_by("created_at").first()
        if active is not None:
            return active, False
        run = queue_run(session, trigger, user=user, focus_topic=focus_topic, config=config)
        if user is not None:
            audit(user, "run.queue", run, after={"session": session.key, "trigger": trigger})
        return run, True


# --------------------------------------------------------------------------- worker side


def _set(run: CompressionRun, **fields: Any) -> None:
    """Update some fields of the run right away (pages poll them).

    Only while the row is still this attempt's: an attempt that recovery presumed dead and gave to
    another worker must not overwrite what that worker records.
    """
    for name, value in fields.items():
        setattr(run, name, value)
    CompressionRun.objects.filter(pk=run.pk, status=Status.RUNNING, attempts=run.attempts).update(**fields)


def claim(run_id: int) -> CompressionRun | None:
    """Move a queued run to running; None when another delivery got it first (or it is gone)."""
    now = timezone.now()
    claimed = CompressionRun.objects.filter(pk=run_id, status=Status.QUEUED).update(
        status=Status.RUNNING,
        stage="",
        started_at=now,
        heartbeat_at=now,
        attempts=F("attempts") + 1,
        worker=f"{socket.gethostname()}",
    )
    if not claimed:
        return None
    return CompressionRun.objects.select_related("session").get(pk=run_id)


def execute_run(run_id: int, summarizer: Summarizer | None = None) -> str | None:
    """Run one compression; returns the final status, or None when the run was not ours to run.

    ``summarizer``: the one to use instead of the configured one (the proxy's compressions in the request path).

    While the summarizer cools down, a run that would only lose its summary is put back (queued, with a
    ``not_before``) instead; see :func:`wait_for_cooldown`.
    """
    if _deferred(run_id):
        return None
    run = claim(run_id)
    if run is None:
        log.info("run %s is not queued; nothing to do (a duplicate delivery)", run_id)
        return None
    try:
        with heartbeat(run.pk, run.attempts):
            return _execute(run, summarizer)
    except Exception as exc:
        log.exception("run %s failed", run_id)
        error = "".join(traceback.format_exception_only(exc)).strip()
        _finish(run, Status.FAILED, error=error[:4000])
        return Status.FAILED


@contextmanager
def heartbeat(run_id: int, attempt: int) -> Iterator[None]:
    """Refresh the run's heartbeat from a thread while the work (a long model call, say) goes on."""
    mine = CompressionRun.objects.filter(pk=run_id, status=Status.RUNNING, attempts=attempt)
    with beating(f"run-{run_id}", lambda: mine.update(heartbeat_at=timezone.now())):
        yield


@contextmanager
def beating(name: str, refresh: Callable[[], object]) -> Iterator[None]:
    """Call ``refresh`` every RUN_HEARTBEAT_SECONDS from a thread while the block runs (runs, re-summarizes)."""
    stop = threading.Event()

    def beat() -> None:
        try:
            while not stop.wait(settings.RUN_HEARTBEAT_SECONDS):
                try:
                    refresh()
                except Exception:  # a missed beat is not fatal; a long silence is what recovery looks for
                    log.warning("heartbeat for %s failed", name, exc_info=True)
        finally:
            connection.close()

    thread = threading.Thread(target=beat, name=f"{name}-heartbeat", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


def _execute(run: CompressionRun, summarizer: Summarizer | None = None) -> str | None:
    """Snapshot, compress (the archive is stored before the summarizer runs), then write back under lock."""
    keys = _snapshot(run)
    messages, token_counts = Message.load_counted(keys)
    config = session_config(run.session, run.config)
    session = run.session
    thrash = ThrashState(ineffective=session.ineffective_compressions, stopped=session.auto_compression_stopped)
    summarizer = summarizer or build_summarizer()
    archive_row: list[Archive] = []
    # the library judges a run by the trigger of the config it ran with; a run with overrides gets a
    # memory of its own, and the session's is judged against the session's own config afterwards
    judged = ThrashState() if run.config else thrash
    result = _compress(run, Compressor(config, summarizer, thrash_state=judged), messages, token_counts, archive_row)
    if run.config:
        _judge_for_session(result, thrash, session_config(session))
    # this run's own call failed and started a cooldown: wait it out rather than apply without a summary
    if "summary_failed" in result.warning_codes() and wait_for_cooldown(
        run, cooldown_left(summarizer), attempt=run.attempts
    ):
        return Status.QUEUED
    _set(run, stage="write_back", heartbeat_at=timezone.now())
    output_keys = Message.store(result.messages)
    archive = archive_row[0] if archive_row else None
    status, summary = _write_back(run, keys, output_keys, result, archive, config, thrash)
    if summary is not None:
        queue.send(queue.CHECK_DRIFT, summary.pk)  # a broker failure leaves it to the sweep
    return status


#: the warnings that speak of the session's anti-thrash memory, not of the run alone
SESSION_THRASH_CODES = frozenset({"repeated_compression", "auto_compression_stopped"})


def _judge_for_session(result: CompressionResult, thrash: ThrashState, own: CompressionConfig) -> None:
    """Update the session's anti-thrash memory for a run with config overrides, by the session's own config.

    Automatic compression uses the session's config, so whether compressing helps is judged by its
    trigger: runs with a 2,000-token window that stay over that window's trigger say nothing about a
    session far under its own. The rule is the library's (``Compressor._track_thrash``): a compression
    under the trigger forgets earlier misses, one over it (or an unchanged history over it) counts one,
    and ``max_ineffective_compressions`` in a row turn automatic compression off. The library's own
    ``repeated_compression`` / ``auto_compression_stopped`` warnings, judged by the override, are replaced.
    """
    result.warnings = [w for w in result.warnings if w.code not in SESSION_THRASH_CODES]
    trigger = own.trigger_tokens
    if result.tokens_after < trigger:
        if result.was_compressed:
            thrash.reset()
        return
    thrash.ineffective += 1
    if thrash.ineffective >= own.max_ineffective_compressions and not thrash.stopped:
        thrash.stopped = True
        result.warnings.append(
            CompressionWarning(
                "auto_compression_stopped",
                f"automatic compression is off for this history: compressing does not get it under the "
                f"session's trigger ({trigger} tokens)",
                {"trigger": trigger, "times": thrash.ineffective},
            )
        )


def _snapshot(run: CompressionRun) -> list[str]:
    """The message keys this run compresses: the session's now, or (a retry) those its first attempt took."""
    if run.input_keys:
        # a retry after a lost worker compresses the same snapshot, so the archive it stored still fits;
        # what was appended since is kept by the write-back like any append during a run
        return list(run.input_keys)
    session = run.session
    keys = session.keys()
    _set(run, base_version=session.version, base_length=len(keys), input_keys=keys, tokens_before=session.token_count)
    return keys


def _compress(
    run: CompressionRun,
    compressor: Compressor,
    messages: list[dict[str, Any]],
    token_counts: list[int],
    archive_row: list[Archive],
) -> CompressionResult:
    """Run the pipeline, recording each stage on the run and storing the archive as soon as it exists."""

    def on_stage(name: str) -> None:
        _set(run, stage=name, heartbeat_at=timezone.now())

    def on_archive(archive: PipelineArchive) -> None:
        # stored and committed before any model sees the segment
        archive_row.append(_store_archive(run, archive))

    return compressor.compress(
        messages,
        focus_topic=run.focus_topic or None,
        keep_prefix=run.session.last_consolidated,
        on_stage=on_stage,
        on_archive=on_archive,
        token_counts=token_counts,  # counted once when stored: not tokenized again
    )


def _result_fields(run: CompressionRun, result: CompressionResult, output_keys: list[str]) -> dict[str, Any]:
    return {
        "output_keys": output_keys,
        "was_compressed": result.was_compressed,
        "tokens_before": result.tokens_before,
        "tokens_after": result.tokens_after,
        "stages": [s.to_dict() for s in result.stages],
        "boundaries": result.boundaries.to_dict() if result.boundaries else {},
        "pruned": [p.to_dict() for p in result.pruned],
        "repair": result.repair.to_dict() if result.repair else {},
        # keep what earlier attempts recorded (a lost worker) before this attempt's own warnings
        "warnings": run.warnings + [w.to_dict() for w in result.warnings],
    }


def _write_back(
    run: CompressionRun,
    keys: list[str],
    output_keys: list[str],
    result: CompressionResult,
    archive: Archive | None,
    config: CompressionConfig,
    thrash: ThrashState,
) -> tuple[str | None, Summary | None]:
    """Apply the result under the session's row lock, only if the compressed prefix is unchanged.

    Returns the run's final status (None: the attempt is no longer this worker's) and the summary stored.
    """
    status = run_outcome(result)
    fields = _result_fields(run, result, output_keys)
    summary = None
    with transaction.atomic():
        locked = Session.objects.select_for_update().get(pk=run.session_id)
        mine = CompressionRun.objects.select_for_update().filter(
            pk=run.pk, status=Status.RUNNING, attempts=run.attempts
        )
        if not mine.exists():
            log.warning(
                "run %s: attempt %s was given to another worker meanwhile; its result is dropped", run.pk, run.attempts
            )
            return None, None
        if archive is not None and result.was_compressed:
            _set_archive_id(archive, result)
            if result.summary_text is not None:
                summary = _store_summary(run, archive, result, config)
        if result.was_compressed:
            current = locked.keys()
            if current[: len(keys)] != keys:
                conflict = (
                    f"the session changed while the run worked (version {run.base_version} -> {locked.version}, "
                    "and not by appends only); it was left untouched. Compress again."
                )
                _finish(run, Status.CONFLICT, error=conflict, **fields)
                return Status.CONFLICT, None  # its drift check is left to the sweep, as before
            _apply(run, locked, keys, current, output_keys)
            fields["applied"] = True
            if summary is not None:
                Summary.objects.filter(pk=summary.pk).update(status=Summary.Status.ACTIVE)
        # the anti-thrash memory follows runs that count (a conflict leaves the winner's)
        if thrash.stopped and not locked.auto_compression_stopped:
            notifications.auto_compression_stopped(locked, run, ineffective=thrash.ineffective)
        locked.ineffective_compressions = thrash.ineffective
        locked.auto_compression_stopped = thrash.stopped
        locked.save(update_fields=["ineffective_compressions", "auto_compression_stopped"])
        _finish(run, status, **fields)
    return status, summary


#: what makes an unchanged history a problem rather than "nothing to compress"
_UNCHANGED_PROBLEMS = DEGRADED_CODES - {"no_token_savings"}


def run_outcome(result: CompressionResult) -> str:
    """The status a finished pipeline result gives its run.

    ``nothing``: the history was left as it was and that is fine (nothing to compress, or compressing
    would not have made it smaller, and it is under the trigger): not a compression. ``degraded``: a
    failed summary, an output still over the trigger (changed or not), or nothing saved by a change.
    ``succeeded`` otherwise.
    """
    if not result.was_compressed and not _UNCHANGED_PROBLEMS & set(result.warning_codes()):
        return Status.NOTHING
    return Status.DEGRADED if result.degraded else Status.SUCCEEDED


def _apply(run: CompressionRun, locked: Session, keys: list[str], current: list[str], output_keys: list[str]) -> None:
    """Replace the compressed prefix of the live history, keeping what was appended meanwhile; audited."""
    if output_keys[: locked.last_consolidated] != current[: locked.last_consolidated]:
        raise RuntimeError("the compressed history rewrote consolidated messages; refusing to write it")
    before = {"version": locked.version, "messages": locked.message_count, "tokens": locked.token_count}
    locked.replace_from(current, output_keys + current[len(keys) :])
    after = {"version": locked.version, "messages": locked.message_count, "tokens": locked.token_count}
    audit(run.created_by, "session.compress", locked, before=before, after=after | {"run": run.pk})


# --------------------------------------------------------------------------- summarizer cooldown

#: the warning (and the stage) of a queued run that waits for the summarizer's cooldown
WAITING_FOR_SUMMARIZER = "waiting_for_summarizer"
COOLDOWN_STAGE = "cooldown"


def cooldown_left(summarizer: Any) -> float:
    """Seconds before ``summarizer`` may call its endpoint again (0: now). Only model summarizers cool down."""
    state, key = getattr(summarizer, "cooldown", None), getattr(summarizer, "cooldown_key", None)
    until = state.get(key) if state is not None and key is not None else None
    return max(0.0, until - summarizer.clock()) if until is not None else 0.0


def must_shrink_now(run: CompressionRun) -> bool:
    """The session no longer fits its context window: it is compressed now, with or without a summary."""
    tokens = Session.objects.filter(pk=run.session_id).values_list("token_count", flat=True).first() or 0
    try:
        window = session_config(run.session, run.config).context_window_tokens
    except ServiceError:  # a bad override fails the run in the worker, not here
        return True
    return tokens >= window


def wait_for_cooldown(run: CompressionRun, left: float, *, attempt: int | None = None) -> bool:
    """Put a run that would only lose its summary back in the queue until the cooldown ends; True if it was.

    Not when the session is over its window (it must shrink now), nor once the run has waited
    COOLDOWN_WAIT_MAX_SECONDS. ``attempt``: the run is running as that attempt (its own call failed);
    the attempt is handed back, so waiting does not count as a try. The sweep sends it again after ``not_before``.
    """
    now = timezone.now()
    if left <= 0 or now - run.created_at > timedelta(seconds=settings.COOLDOWN_WAIT_MAX_SECONDS):
        return False
    if must_shrink_now(run):
        return False
    until = now + timedelta(seconds=left)
    warning = {
        "code": WAITING_FOR_SUMMARIZER,
        "message": f"the summarizer was cooling down after a failure; the run waited (until "
        f"{until.isoformat(timespec='seconds')}) instead of compressing without a summary",
    }
    warnings = [w for w in run.warnings if w.get("code") != WAITING_FOR_SUMMARIZER] + [warning]
    rows = CompressionRun.objects.filter(pk=run.pk)
    back: dict[str, Any] = {}
    if attempt is None:
        rows = rows.filter(status=Status.QUEUED)
    else:
        rows = rows.filter(status=Status.RUNNING, attempts=attempt)
        back = {"status": Status.QUEUED, "attempts": F("attempts") - 1, "heartbeat_at": None}
    waiting = rows.update(stage=COOLDOWN_STAGE, not_before=until, sent_at=None, sends=0, warnings=warnings, **back)
    if waiting:
        log.info("run %s waits %.0fs for the summarizer's cooldown", run.pk, left)
    return bool(waiting)


def _deferred(run_id: int) -> bool:
    """Before claiming: is this queued run to wait (a delivery before ``not_before``, or a cooldown now)?"""
    run = CompressionRun.objects.select_related("session").filter(pk=run_id, status=Status.QUEUED).first()
    if run is None:
        return False
    if run.not_before is not None and run.not_before > timezone.now():
        return True  # an early duplicate; the sweep sends it when its time comes
    try:
        left = cooldown_left(build_summarizer())
    except Exception:  # the run fails on it in the worker, with the reason
        return False
    return wait_for_cooldown(run, left)


def _store_archive(run: CompressionRun, archive: PipelineArchive) -> Archive:
    existing = Archive.objects.filter(run=run).first()
    if existing is not None:  # stored by an earlier attempt of this run, whose worker died
        if (existing.start, existing.end, existing.sha256) != (archive.start, archive.end, archive.sha256):
            raise RuntimeError(
                f"attempt {run.attempts} archived messages {archive.start}-{archive.end}, but an earlier attempt "
                f"archived {existing.start}-{existing.end}; refusing to replace an archive"
            )
        return existing
    keys = Message.store(archive.messages)
    return Archive.objects.create(
        session_id=run.session_id,
        run=run,
        start=archive.start,
        end=archive.end,
        message_keys=keys,
        sha256=archive.sha256,
    )


def _set_archive_id(archive: Archive, result: CompressionResult) -> None:
    Archive.objects.filter(pk=archive.pk).update(inserted_id=result.summary_id or "")
    archive.inserted_id = result.summary_id or ""


def _store_summary(
    run: CompressionRun, archive: Archive, result: CompressionResult, config: CompressionConfig
) -> Summary:
    outcome = result.summary
    assert outcome is not None and result.summary_id is not None
    summarize = next((s for s in result.stages if s.name == "summarize"), None)
    budget = summarize.counts.get("budget_tokens") if summarize is not None else None
    provenance = outcome.provenance() | {
        "focus_topic": run.focus_topic or None,
        # the budget the summarizer was given (it follows the room under the trigger), else the ceiling
        "budget_tokens": budget if isinstance(budget, int) else config.effective_summary_max_tokens,
        "trigger": run.trigger,
        "created_by": run.created_by.get_username() if run.created_by else None,
        "config": config_snapshot(config, run.config),
    }
    return Summary.objects.create(
        archive=archive,
        run=run,
        summary_id=result.summary_id,
        status=Summary.Status.DRAFT,
        text=result.summary_text or "",
        provenance=provenance,
        facts=[f.to_dict() for f in result.facts],
        created_by=run.created_by,
    )


def config_snapshot(config: CompressionConfig, overrides: dict[str, Any] | None = None) -> dict[str, Any]:
    """The budgets a run compressed with, as its summary's provenance records them (derived ones resolved)."""
    return {
        "context_window_tokens": config.context_window_tokens,
        "trigger_tokens": config.trigger_tokens,
        "head_tokens": config.effective_head_tokens,
        "tail_tokens": config.effective_tail_tokens,
        "summary_max_tokens": config.effective_summary_max_tokens,
        "summary_input_tokens": config.effective_summary_input_tokens,
        "overrides": dict(overrides or {}),
    }


def _finish(run: CompressionRun, status: str, **fields: Any) -> None:
    _set(run, status=status, finished_at=timezone.now(), **fields)
    notifications.run_ended(run)  # degraded or failed: inbox and webhooks


# --------------------------------------------------------------------------- recovery


def recover_stale_runs(stale_after: float | None = None, queued_after: float | None = None) -> dict[str, int]:
    """Runs whose worker died: re-queue (up to RUN_MAX_ATTEMPTS tries) or fail. Nothing stays running forever.

    ``running`` with a heartbeat older than ``stale_after`` seconds lost its worker; ``queued`` whose
    task never reached the broker, or was sent and not picked up for a while (``queued_after`` seconds,
    default: doubling from RUN_QUEUED_RESEND_SECONDS), lost its task message: it is sent again (a
    duplicate is harmless because claiming is conditional). A run waiting for the summarizer's
    cooldown is sent once its ``not_before`` has passed.
    """
    stale_after = settings.RUN_STALE_SECONDS if stale_after is None else stale_after
    now = timezone.now()
    report = {"requeued": 0, "failed": 0, "resent": 0}
    requeued: list[int] = []
    stale = CompressionRun.objects.filter(status=Status.RUNNING, heartbeat_at__lt=now - timedelta(seconds=stale_after))
    for run in stale:
        if run.attempts < settings.RUN_MAX_ATTEMPTS:
            moved = CompressionRun.objects.filter(pk=run.pk, status=Status.RUNNING, heartbeat_at=run.heartbeat_at)
            lost = {"stage": "", "warnings": run.warnings + [_lost_worker(run)], "sent_at": None, "sends": 0}
            if moved.update(status=Status.QUEUED, not_before=None, **lost):
                queue.send_on_commit(queue.EXECUTE_RUN, run.pk)
                requeued.append(run.pk)
                report["requeued"] += 1
        else:
            error = f"the worker stopped responding {run.attempts} times (last at stage {run.stage or 'start'})"
            moved = CompressionRun.objects.filter(pk=run.pk, status=Status.RUNNING, heartbeat_at=run.heartbeat_at)
            if moved.update(status=Status.FAILED, error=error, finished_at=now):
                report["failed"] += 1
                notifications.run_ended(run)
    waiting = CompressionRun.objects.filter(status=Status.QUEUED, not_before__gt=now).select_related("session")
    for run in waiting[:SWEEP_BATCH]:
        if must_shrink_now(run):  # appends pushed it over its window meanwhile: it cannot wait any longer
            CompressionRun.objects.filter(pk=run.pk, status=Status.QUEUED).update(not_before=None, sent_at=None)
    queued = (
        CompressionRun.objects.filter(status=Status.QUEUED)
        .filter(Q(not_before__isnull=True) | Q(not_before__lte=now))
        .exclude(pk__in=requeued)
        .only("pk", "created_at", "sent_at", "sends")
        .order_by("created_at")[:SWEEP_BATCH]
    )
    report["resent"] = queue.send_all(queue.EXECUTE_RUN, queue.due(queued, now, "created_at", queued_after))
    return report


#: rows one sweep looks at per kind (a backlog is worked off over a few sweeps)
SWEEP_BATCH = 200


def _lost_worker(run: CompressionRun) -> dict[str, str]:
    return {
        "code": "worker_lost",
        "message": f"attempt {run.attempts} stopped at stage {run.stage or 'start'} (worker died); queued again",
    }


# --------------------------------------------------------------------------- waiting


_waiters = 0
_waiters_lock = threading.Lock()


@contextmanager
def waiter_slot() -> Iterator[None]:
    """One of MAX_COMPRESS_WAITERS slots for a request that blocks until its run ends (per web process).

    A waiting request holds a web thread; without a cap, a hanging model could hold all of them and
    stall every page (and /healthz). Taken before anything is written, so a refused request wrote nothing.
    """
    global _waiters
    with _waiters_lock:
        if _waiters >= settings.MAX_COMPRESS_WAITERS:
            raise TooManyWaiters(
                f"{_waiters} compress requests are already waiting for their runs (MAX_COMPRESS_WAITERS); "
                "retry shortly, or compress without wait and poll GET /runs/{id}"
            )
        _waiters += 1
    try:
        yield
    finally:
        with _waiters_lock:
            _waiters -= 1


def wait_for_run(run_id: int, seconds: float, poll: float = 0.2) -> CompressionRun:
    """Block until the run ends or ``seconds`` pass; returns the latest row."""
    deadline = time.monotonic() + seconds
    while True:
        run = CompressionRun.objects.select_related("session").get(pk=run_id)
        if run.finished or time.monotonic() >= deadline:
            return run
        time.sleep(min(poll, max(0.0, deadline - time.monotonic())))


__all__ = [
    "beating",
    "cooldown_left",
    "execute_run",
    "queue_run",
    "recover_stale_runs",
    "request_compression",
    "wait_for_cooldown",
    "wait_for_run",
    "waiter_slot",
]
