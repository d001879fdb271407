"""What the page benchmarks share: a throwaway database, Django started on it, and timing a page in-process."""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlparse, urlunparse


def throwaway_database(url: str | None, name: str) -> tuple[str, Any]:
    """The DATABASE_URL to use and a cleanup function.

    No ``url``: a SQLite file ``bench-<name>-<pid>`` in the temporary folder. A PostgreSQL server's URL: a new
    database ``bench_<name>_<pid>`` on it, dropped by the cleanup. A SQLite URL is used as it is.
    """
    if not url:
        path = Path(tempfile.gettempdir()) / f"bench-{name.replace('_', '-')}-{os.getpid()}.sqlite3"
        path.unlink(missing_ok=True)
        return f"sqlite:///{path}", lambda: path.unlink(missing_ok=True)
    parts = urlparse(url)
    if parts.scheme.startswith("sqlite"):
        return url, lambda: None
    import psycopg

    database = f"bench_{name}_{os.getpid()}"
    admin = psycopg.connect(url, autocommit=True)
    admin.execute(f'CREATE DATABASE "{database}"')

    def drop() -> None:
        from django.db import connections

        connections.close_all()
        admin.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')
        admin.close()

    return urlunparse(parts._replace(path=f"/{database}")), drop


def start_django(url: str) -> None:
    """Set the console up on ``url`` (automatic compression off: the benchmarks build their own runs)."""
    os.environ["DATABASE_URL"] = url
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")
    os.environ["AUTO_COMPRESS"] = "false"
    import django

    django.setup()


@dataclass
class Timing:
    """Medians over the repeats, and what the last request did."""

    ms: float
    sql_ms: float
    queries: int
    response: Any


def time_page(client: Any, path: str, params: dict[str, Any] | None, repeat: int, **headers: str) -> Timing:
    """Request ``path`` once to warm up (it must answer 200), then ``repeat`` times, timed with its queries."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    response = client.get(path, params or {}, headers=headers)
    if response.status_code != 200:
        raise SystemExit(f"{path} answered {response.status_code}")
    times, sql = [], []
    for _ in range(repeat):
        with CaptureQueriesContext(connection) as queries:
            t0 = time.perf_counter()
            response = client.get(path, params or {}, headers=headers)
            times.append((time.perf_counter() - t0) * 1000)
        sql.append(sum(float(q["time"]) for q in queries.captured_queries) * 1000)
    return Timing(statistics.median(times), statistics.median(sql), len(queries.captured_queries), response)
