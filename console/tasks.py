"""Celery tasks: thin wrappers that take ids, call one function and record."""

from __future__ import annotations

import socket

from celery import shared_task
from django.db import connection


@shared_task(name="console.health_check")
def health_check() -> dict:
    """Proves a worker is alive and can reach the database."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
        db_ok = cursor.fetchone() == (1,)
    return {"ok": True, "worker": socket.gethostname(), "db": db_ok}
