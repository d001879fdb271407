"""The one place that sends tasks to workers.

Work is written to the database first (a queued run, a pending re-summarize, a summary awaiting its
drift check) and its task is sent, by name, once that transaction commits. A broker that is down
must not turn a committed write into an error: the failure is logged, the row stays queued, and the
recovery sweep (beat, ``console.recover``) sends it again. A send that the broker took is recorded on
the row (``sent_at``, ``sends``), so the sweep re-sends only what is stale, and waits longer after each
re-send: a queue that is merely busy does not fill up with duplicates (duplicates are harmless anyway,
every task claims its row with a conditional update).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Iterable, Iterator
from datetime import datetime, timedelta
from typing import Any, TypeVar

from django.conf import settings
from django.db import models, transaction
from django.db.models import F
from django.utils import timezone

from ..celery import app
from ..models import CompressionRun, Summary, WebhookDelivery

log = logging.getLogger(__name__)

EXECUTE_RUN = "console.execute_run"
RESUMMARIZE = "console.resummarize"
CHECK_DRIFT = "console.check_drift"
DELIVER_WEBHOOK = "console.deliver_webhook"

#: the row each task works on (its ``sent_at`` and ``sends`` are recorded there)
ROWS: dict[str, type[models.Model]] = {
    EXECUTE_RUN: CompressionRun,
    RESUMMARIZE: Summary,
    CHECK_DRIFT: Summary,
    DELIVER_WEBHOOK: WebhookDelivery,
}

#: an unsent row younger than this may still have its on-commit send under way
SEND_GRACE = timedelta(seconds=5)

M = TypeVar("M", CompressionRun, Summary)


def send(name: str, pk: int, countdown: float | None = None) -> bool:
    """Send task ``name`` for row ``pk`` now (to run in ``countdown`` seconds). False (logged, not raised) when the
    broker did not take it."""
    options = {"countdown": countdown, "retry": True, "retry_policy": settings.CELERY_TASK_PUBLISH_RETRY_POLICY}
    try:
        # by name: the task registered under it (console.apps registers them; eager in tests and setup
        # commands), else a plain message for the workers. Either way no service imports console.tasks.
        task = app.tasks.get(name)
        if task is None:
            app.send_task(name, (pk,), **options)
        else:
            task.apply_async((pk,), **options)
    except Exception as exc:
        log.warning("could not send %s(%s): %s; it stays queued for the recovery sweep", name, pk, exc)
        return False
    try:
        ROWS[name]._default_manager.filter(pk=pk).update(sent_at=timezone.now(), sends=F("sends") + 1)
    except Exception:  # the task is on its way; without the record the sweep may only send it once more
        log.warning("could not record that %s(%s) was sent", name, pk, exc_info=True)
    return True


def send_on_commit(name: str, pk: int) -> None:
    """Send once the current transaction commits (at once outside one); never raises into the request."""
    transaction.on_commit(functools.partial(send, name, pk))


def resend_after(sends: int) -> timedelta:
    """How long a sent, unclaimed row waits before it is sent again: doubling, up to RESEND_MAX_SECONDS."""
    seconds = settings.RUN_QUEUED_RESEND_SECONDS * 2 ** max(0, min(sends - 1, 16))
    return timedelta(seconds=min(seconds, max(settings.RESEND_MAX_SECONDS, settings.RUN_QUEUED_RESEND_SECONDS)))


def due(rows: Iterable[M], now: datetime, since: str, resend: float | None = None) -> Iterator[M]:
    """The rows whose task should be sent (again) now.

    Never sent (or the send failed): at once. Sent: when the last send is older than :func:`resend_after`
    (or ``resend`` seconds). Either way not before the row is ``SEND_GRACE`` old (its ``since`` field):
    the send that follows its commit may still be under way.
    """
    for row in rows:
        if getattr(row, since) > now - SEND_GRACE:
            continue
        sent_at = row.sent_at
        wait = timedelta(seconds=resend) if resend is not None else resend_after(row.sends)
        if sent_at is None or now - sent_at >= wait:
            yield row


def send_all(name: str, rows: Iterable[Any]) -> int:
    """Send ``name`` for each row; stops at the first failure (the broker is down: the next sweep retries)."""
    sent = 0
    for row in rows:
        if not send(name, row.pk):
            break
        sent += 1
    return sent


def send_delivery(pk: int, countdown: float | None = None) -> bool:
    """Send a webhook delivery's next attempt (a retry: in ``countdown`` seconds); the sweep covers a failed send."""
    return send(DELIVER_WEBHOOK, pk, countdown=countdown)


def send_delivery_on_commit(pk: int) -> None:
    """Send a webhook delivery's first attempt once the transaction that wrote it commits."""
    send_on_commit(DELIVER_WEBHOOK, pk)
