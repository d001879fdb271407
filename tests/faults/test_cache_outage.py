"""The cache's Redis goes away: every operation is answered from local memory, and Redis is used again on return.

``console.cache.FallbackRedisCache`` against a private Redis the test stops and starts; then the API and the login
page with the default cache pointed at an address where nothing listens: rate limits and failure throttles keep
counting (locally) and nothing answers 500.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.cache import cache as default_cache
from django.test import Client

from console import cache as fallback_cache
from console.cache import FallbackRedisCache
from tests.console.test_api import Api, issue_key
from tests.faults.conftest import PrivateRedis, free_port

pytestmark = [pytest.mark.faults]


def test_a_cache_outage_is_answered_locally_logged_once_and_redis_is_used_again(
    private_redis: PrivateRedis, caplog: pytest.LogCaptureFixture
):
    cache = FallbackRedisCache(
        private_redis.url,
        {"KEY_PREFIX": f"t{time.monotonic_ns()}", "FALLBACK_SECONDS": 0.3, "OPTIONS": {"socket_connect_timeout": 0.5}},
    )
    cache.set("kept", [1, 2])
    assert cache.get("kept") == [1, 2] and cache.add("counter", 1)
    caplog.set_level(logging.WARNING, logger="console.cache")

    private_redis.stop()
    started = time.monotonic()
    assert cache.get("kept") is None, "Redis's values are not there: local memory starts empty"
    cache.set("during", "x")
    assert cache.get("during") == "x"
    assert cache.add("n", 1) and cache.incr("n", 5) == 6
    assert cache.get_many(["during", "n"]) == {"during": "x", "n": 6}
    cache.delete("during")
    assert not cache.has_key("during")
    for _ in range(200):  # within FALLBACK_SECONDS nothing even tries Redis
        cache.get("n")
    assert time.monotonic() - started < 2, "an outage must not slow every operation down"
    time.sleep(0.35)
    assert cache.get("n") == 6, "past FALLBACK_SECONDS Redis is tried again, and the fallback answers again"
    state = fallback_cache.status()[private_redis.url]
    assert state["fallback"] and state["outages"] >= 1 and state["local_operations"] > 200
    warnings = [r.getMessage() for r in caplog.records if "unreachable" in r.getMessage()]
    assert len(warnings) == 1, warnings

    private_redis.start()
    time.sleep(0.35)
    assert cache.get("n") is None, "Redis answers again (it restarted empty)"
    cache.set("after", "y")
    assert cache.get("after") == "y" and not fallback_cache.status()[private_redis.url]["fallback"]
    assert any("answers again" in r.getMessage() for r in caplog.records)


@pytest.mark.django_db
def test_with_the_cache_unreachable_the_api_and_login_answer_and_still_throttle(settings: Any):
    dead = f"redis://127.0.0.1:{free_port()}/0"  # nothing listens there
    settings.CACHES = {
        "default": {
            "BACKEND": "console.cache.FallbackRedisCache",
            "LOCATION": dead,
            "KEY_PREFIX": "dead",
            "FALLBACK_SECONDS": 5,
            "OPTIONS": {"socket_connect_timeout": 0.5, "socket_timeout": 1.0},
        }
    }
    settings.API_RATE_LIMIT = "30/min"
    settings.API_AUTH_FAILURE_LIMIT = "5/min"
    settings.LOGIN_ADDRESS_FAILURE_LIMIT = "5/h"
    try:
        reader = Api(issue_key("cacheless", "operator"))
        assert reader.post("/sessions", {"key": "cacheless:1", "messages": []}).status_code == 201
        statuses = [reader.get("/sessions").status_code for _ in range(35)]
        assert 500 not in statuses and statuses[:29] == [200] * 29 and statuses[-1] == 429, statuses
        bad = [Api(f"ccs_{n:012d}_x").get("/sessions").status_code for n in range(7)]
        assert bad == [401] * 5 + [429] * 2

        User.objects.create_user("carol", password="carols-password")
        client = Client(REMOTE_ADDR="203.0.113.50")
        logins = [client.post("/login/", {"username": f"u{n}", "password": "x"}).status_code for n in range(7)]
        assert logins == [200] * 5 + [429] * 2
        assert Client().post("/login/", {"username": "carol", "password": "carols-password"}).status_code == 302
        assert fallback_cache.status()[dead]["fallback"]
        health = Client().get("/healthz").json()
        assert health["cache"]["ok"] is False and "local" in health["cache"]["detail"]
    finally:
        default_cache.clear()  # the fallback's memory: the next test starts with no counts
