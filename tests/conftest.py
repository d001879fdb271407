"""Suite-wide setup: in CI the real PostgreSQL and Redis are required, not optional; shared fixtures.

Under pytest-xdist (``make test`` runs ``-n 3 --dist load``) each worker process has its own test
database (pytest-django suffixes the name with the worker id) and its own cache key prefix on a shared
Redis; Celery worker processes, queues, private Redis servers, live servers and fake models are per
test or per module with names and ports of their own. ``--dist load``, not loadfile/loadgroup: with
pytest 9 those schedule by node id, and schemathesis gives its 19 fuzz items one node id (18 were
silently dropped), while xdist_group marks are not applied (xdist sets ``_nodeid``, which pytest 9
no longer reads).
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from tests.fakes.openai_server import FakeOpenAIServer


def pytest_configure(config: pytest.Config) -> None:
    from django.conf import settings

    # Django's real hasher costs most of a second per password; tests make hundreds of users
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
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


#: markers of the slow tests (real processes, a browser): under xdist they are handed out first, so the
#: short tests fill in around them instead of one long test finishing alone at the end
SLOW_MARKERS = ("faults", "worker", "browser")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return  # a plain run keeps the files' order
    # every worker sorts alike (the scheduler checks that all collected the same list in the same order)
    items.sort(key=lambda item: not any(item.get_closest_marker(m) for m in SLOW_MARKERS))


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


@pytest.fixture
def fake_openai() -> Iterator[FakeOpenAIServer]:
    """An OpenAI-compatible fake server on loopback, fresh per test (answers ``ok`` unless scripted otherwise)."""
    with FakeOpenAIServer() as server:
        yield server
