"""Suite-wide setup: in CI the real PostgreSQL and Redis are required, not optional; shared fixtures.

Under pytest-xdist (``make test`` runs ``-n auto --dist worksteal``) each worker process has its own test
database (pytest-django suffixes the name with the worker id) and its own cache key prefix on a shared
Redis; Celery worker processes, queues, private Redis servers, live servers and fake models are per
test or per module with names and ports of their own. ``worksteal`` (or ``load``), not
loadfile/loadgroup: with pytest 9 those schedule by node id, and schemathesis gives its 19 fuzz items
one node id (18 were silently dropped), while xdist_group marks are not applied (xdist sets
``_nodeid``, which pytest 9 no longer reads).
"""

from __future__ import annotations

import os
import time
import weakref
from collections.abc import Iterator
from typing import Any

import pytest
from django.db.backends.signals import connection_created

from tests.fakes.openai_server import FakeOpenAIServer


def pytest_configure(config: pytest.Config) -> None:
    from django.conf import settings

    # Django's real hasher costs most of a second per password; tests make hundreds of users
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    # the webhook tests post to a receiver on loopback, which the egress policy refuses unless allowed by name;
    # in the environment too, for the worker processes some tests start
    os.environ.setdefault("WEBHOOK_ALLOWED_HOSTS", "127.0.0.1")
    settings.WEBHOOK_ALLOWED_HOSTS = [h.strip() for h in os.environ["WEBHOOK_ALLOWED_HOSTS"].split(",") if h.strip()]
    xdist_worker = os.environ.get("PYTEST_XDIST_WORKER")
    if xdist_worker:
        # _fresh_cache below deletes this prefix's keys after every test: on a Redis shared by the
        # workers, one worker's clean-up must not drop another's throttle and lockout counters mid-test
        for cache in settings.CACHES.values():
            cache["KEY_PREFIX"] = f"{cache.get('KEY_PREFIX') or 'console'}-{xdist_worker}"
    if os.environ.get("CI") != "true":
        return

    engine = settings.DATABASES["default"]["ENGINE"]
    if engine != "django.db.backends.postgresql":
        pytest.exit(f"CI=true needs PostgreSQL (DATABASE_URL), but the database engine is {engine}", returncode=3)
    if not settings.REDIS_URL:
        pytest.exit("CI=true needs Redis: set REDIS_URL", returncode=3)
    import psycopg
    import redis

    db = settings.DATABASES["default"]
    try:
        psycopg.connect(
            host=db["HOST"], port=db["PORT"] or 5432, user=db["USER"], dbname=db["NAME"], connect_timeout=5
        ).close()
    except Exception as exc:
        pytest.exit(f"CI=true but PostgreSQL at {db['HOST']}:{db['PORT']} is not reachable: {exc}", returncode=3)
    try:
        redis.Redis.from_url(settings.REDIS_URL, socket_connect_timeout=5).ping()
    except Exception as exc:
        pytest.exit(f"CI=true but Redis at {settings.REDIS_URL} is not reachable: {exc}", returncode=3)


#: markers of the slow tests (real processes, a browser); they are spread over the xdist workers below
SLOW_MARKERS = ("faults", "worker", "browser")


def _is_slow(item: pytest.Item) -> bool:
    return any(item.get_closest_marker(m) for m in SLOW_MARKERS)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under xdist, give each worker its share of the slow tests first, then its share of the rest.

    ``--dist worksteal`` hands worker k the k-th contiguous share of this list and lets an idle worker
    take the tail of a busy one's queue. Slow tests gathered at the front all landed in the first third,
    so one worker ran every browser and real-worker test in a row (266 s) while the others idled. A module's
    slow tests stay together: they share a module-scoped Celery worker, model or browser page.
    """
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT") or 0)
    if workers < 2:
        return  # a plain run keeps the files' order
    modules: dict[str, list[pytest.Item]] = {}
    fast: list[pytest.Item] = []
    for item in items:
        if _is_slow(item):
            modules.setdefault(item.nodeid.split("::")[0], []).append(item)
        else:
            fast.append(item)
    shares: list[list[pytest.Item]] = [[] for _ in range(workers)]
    # every worker computes the same order (the scheduler checks that all collected the same list)
    for group in sorted(modules.values(), key=len, reverse=True):
        min(shares, key=len).extend(group)
    items[:] = [
        item
        for k, share in enumerate(shares)
        for item in share + fast[k * len(fast) // workers : (k + 1) * len(fast) // workers]
    ]


def _transactional(item: pytest.Item) -> bool:
    marker = item.get_closest_marker("django_db")
    names = getattr(item, "fixturenames", ())
    return "transactional_db" in names or "live_server" in names or bool(marker and marker.kwargs.get("transaction"))


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_teardown(item: pytest.Item) -> None:
    """Before a transactional test's tables are truncated, let other processes on its database finish.

    A Celery worker or live server may still be in a transaction the test caused (a drift check sent when
    its run finished); TRUNCATE against it deadlocks, and PostgreSQL may abort the truncate rather than the
    task, failing the next test's setup. Runs before any fixture's teardown.
    """
    if not _transactional(item):
        return
    from django.db import connection

    if connection.vendor != "postgresql" or connection.connection is None or connection.in_atomic_block:
        return
    quiet, deadline = 0, time.monotonic() + 30
    while quiet < 3 and time.monotonic() < deadline:
        try:
            with connection.cursor() as cursor:
                cursor.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
                    " AND pid <> pg_backend_pid() AND backend_type = 'client backend'"
                    " AND state IN ('active', 'idle in transaction')"
                )
                busy = cursor.fetchone()[0]
        except Exception:
            return  # the database went away (a fault test): nothing to wait for
        quiet = 0 if busy else quiet + 1
        time.sleep(0.05)


@pytest.fixture(autouse=True)
def _fresh_cache() -> Iterator[None]:
    """Throttle and login-lockout counters do not carry from one test to the next.

    On Redis only the cache's own keys go: the broker shares the database, and FLUSHDB would drop its queues.
    """
    yield
    from django.core.cache import cache

    client = getattr(cache, "_cache", None)
    if hasattr(client, "get_client"):  # django's RedisCache
        redis = client.get_client(write=True)
        keys = list(redis.scan_iter(match=f"{cache.key_prefix}:*", count=1000))
        if keys:
            redis.delete(*keys)
    else:
        cache.clear()
    local = getattr(cache, "_local", None)  # console.cache's fallback while Redis is down
    if local is not None:
        local.clear()


#: every database connection the test process opened (weakly: a closed wrapper's garbage goes)
_OPENED: weakref.WeakSet[Any] = weakref.WeakSet()


def _remember(sender: Any, connection: Any, **kwargs: Any) -> None:
    _OPENED.add(connection)


connection_created.connect(_remember)


@pytest.fixture(scope="session")
def django_db_setup(django_db_setup: None) -> Iterator[None]:
    """pytest-django's, and before the test database is dropped, every connection to it is closed.

    Django closes the connections it can see from where the teardown runs; Playwright's sync API runs an
    event loop in the main thread, and there Django keeps its connections in a context variable apart
    (asgiref's thread-critical local), which the teardown does not see: PostgreSQL then refused to drop a
    database "being accessed by other users" (a warning at the end of every CI run).
    """
    yield
    from django.db import connections

    seen = set(connections.all(initialized_only=True))  # Django closes these itself
    for wrapper in list(_OPENED):
        if wrapper not in seen and wrapper.connection is not None:
            wrapper.connection.close()  # the driver's: the wrapper may belong to another thread


@pytest.fixture
def fake_openai() -> Iterator[FakeOpenAIServer]:
    """An OpenAI-compatible fake server on loopback, fresh per test (answers ``ok`` unless scripted otherwise)."""
    with FakeOpenAIServer() as server:
        yield server
