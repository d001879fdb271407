"""Celery tasks: thin wrappers that take ids and call one service (``console.services``); no service imports this."""

from __future__ import annotations

import socket

from celery import shared_task
from django.db import connection

from .services import drift, notifications, runs, summaries


@shared_task(name="console.health_check")
def health_check() -> dict:
    """Proves a worker is alive and can reach the database."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
        db_ok = cursor.fetchone() == (1,)
    return {"ok": True, "worker": socket.gethostname(), "db": db_ok}


@shared_task(name="console.execute_run", ignore_result=True)
def execute_run_task(run_id: int) -> str | None:
    return runs.execute_run(run_id)


@shared_task(name="console.resummarize", ignore_result=True)
def resummarize_task(summary_id: int) -> str | None:
    return summaries.execute_resummarize(summary_id)


@shared_task(name="console.check_drift", ignore_result=True)
def check_drift_task(summary_id: int) -> int:
    return len(drift.check_summary_drift(summary_id, once=True))


@shared_task(name="console.recover", ignore_result=True)
def recover_task() -> dict[str, dict[str, int]]:
    """The recovery sweep (beat, every RECOVERY_SWEEP_SECONDS): runs, re-summarizes and drift checks."""
    return {
        "runs": runs.recover_stale_runs(),
        "summaries": summaries.recover_stale_summaries(),
        "webhooks": notifications.recover_deliveries(),
    }


@shared_task(name="console.recover_stale_runs", ignore_result=True)
def recover_stale_runs_task() -> dict[str, dict[str, int]]:
    # the name older beat schedules send; the sweep now covers summaries and drift checks too
    return recover_task()


@shared_task(name="console.deliver_webhook", ignore_result=True)
def deliver_webhook_task(delivery_id: int) -> str | None:
    """One attempt of a webhook delivery; a failure schedules the next one (bounded backoff, queue.send_delivery)."""
    return notifications.deliver(delivery_id)
