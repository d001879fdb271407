"""Reachability of the database and the Celery broker, for /healthz."""

from __future__ import annotations

from django.db import connection

from .celery import app


def database_ok() -> tuple[bool, str]:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    except Exception as exc:  # any failure means "not reachable", reported, not raised
        return False, type(exc).__name__
    return True, connection.vendor


def broker_ok() -> tuple[bool, str]:
    try:
        with app.connection_for_write() as conn:
            conn.ensure_connection(max_retries=1, interval_start=0, timeout=2)
            transport = conn.transport_cls
    except Exception as exc:
        return False, type(exc).__name__
    return True, str(transport)


def cache_ok() -> tuple[bool, str]:
    """Whether the cache answers from Redis (never a reason to fail /healthz: a local fallback answers meanwhile)."""
    from django.conf import settings

    from .cache import status

    if not str(settings.CACHES["default"]["BACKEND"]).endswith("FallbackRedisCache"):
        return True, "local memory"
    down = [location for location, state in status().items() if state["fallback"]]
    return (False, "unreachable: counting in local memory") if down else (True, "redis")
