"""The shared cache, with no single point of failure: Redis, and this process's memory while Redis is down.

The cache holds counters only (the API rate limits, the failed-authentication and failed-login throttles, the
django-axes lockout). Losing Redis must not turn them into errors on every request, so each operation that
fails to reach Redis is answered by a local in-memory cache instead, and for ``FALLBACK_SECONDS`` afterwards
every operation goes there directly (no request waits on a dead server). Then Redis is tried again.

Meanwhile each web process counts on its own: limits hold per process (with 3 processes an address may make up
to 3x the attempts), counts made during the outage are not carried back into Redis, and Redis's own counts
resume when it returns. One warning is logged when an outage begins and one line when it ends, with the number
of operations answered locally; :func:`status` reports it (``/healthz`` shows it, without failing).
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.core.cache.backends.base import DEFAULT_TIMEOUT
from django.core.cache.backends.locmem import LocMemCache
from django.core.cache.backends.redis import RedisCache
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

log = logging.getLogger(__name__)

#: what "Redis is unreachable" looks like (BusyLoadingError, a Redis still loading its data, is a ConnectionError)
UNREACHABLE = (RedisConnectionError, RedisTimeoutError, OSError)


@dataclass
class Outage:
    """One Redis location's state, shared by every thread of the process (Django makes a cache per thread)."""

    down_since: float | None = None
    retry_at: float = 0.0
    local_operations: int = 0
    outages: int = 0


_outages: dict[str, Outage] = {}
_lock = threading.Lock()


def status() -> dict[str, Any]:
    """Per Redis location: whether this process is on its local fallback, since when, and how often it was."""
    with _lock:
        return {
            location: {
                "fallback": state.down_since is not None,
                "down_for_seconds": round(time.monotonic() - state.down_since, 1) if state.down_since else 0.0,
                "outages": state.outages,
                "local_operations": state.local_operations,
            }
            for location, state in _outages.items()
        }


class FallbackRedisCache(RedisCache):
    """Django's ``RedisCache``; an operation Redis cannot answer goes to a ``LocMemCache`` (see the module)."""

    def __init__(self, server: str, params: dict[str, Any]) -> None:
        super().__init__(server, params)
        self._location = server if isinstance(server, str) else ",".join(server)
        self._shown = re.sub(r"//[^/@]*@", "//***@", self._location)  # for logs: never a password in the URL
        self._fallback_seconds = float(params.get("FALLBACK_SECONDS", 10.0))
        local_params = {k: params[k] for k in ("TIMEOUT", "KEY_PREFIX", "VERSION", "KEY_FUNCTION") if k in params}
        self._local = LocMemCache(f"fallback:{self._location}", local_params | {"OPTIONS": {"MAX_ENTRIES": 50_000}})
        with _lock:
            self._state = _outages.setdefault(self._location, Outage())

    def _call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        state = self._state
        if state.down_since is not None and time.monotonic() < state.retry_at:
            return self._locally(name, *args, **kwargs)
        remote: Callable[..., Any] = getattr(super(), name)
        try:
            result = remote(*args, **kwargs)
        except UNREACHABLE as exc:
            self._went_down(exc)
            return self._locally(name, *args, **kwargs)
        if state.down_since is not None:
            self._came_back()
        return result

    def _locally(self, name: str, *args: Any, **kwargs: Any) -> Any:
        with _lock:
            self._state.local_operations += 1
        return getattr(self._local, name)(*args, **kwargs)

    def _went_down(self, exc: BaseException) -> None:
        now = time.monotonic()
        with _lock:
            state = self._state
            state.retry_at = now + self._fallback_seconds
            if state.down_since is not None:
                return
            state.down_since, state.local_operations = now, 0
            state.outages += 1
        log.warning(
            "the cache at %s is unreachable (%s: %s): rate limits and login lockouts count in this process's "
            "memory until it answers again (tried every %.0f s)",
            self._shown,
            type(exc).__name__,
            exc,
            self._fallback_seconds,
        )

    def _came_back(self) -> None:
        with _lock:
            state = self._state
            if state.down_since is None:
                return
            down_for, answered = time.monotonic() - state.down_since, state.local_operations
            state.down_since = None
        log.warning(
            "the cache at %s answers again after %.1f s; %d operations were answered from local memory meanwhile",
            self._shown,
            down_for,
            answered,
        )

    # every operation Django's RedisCache implements; the others (get_or_set, decr, ...) are built on these
    def add(self, key: Any, value: Any, timeout: Any = DEFAULT_TIMEOUT, version: int | None = None) -> bool:
        return bool(self._call("add", key, value, timeout, version))

    def get(self, key: Any, default: Any = None, version: int | None = None) -> Any:
        return self._call("get", key, default, version)

    def set(self, key: Any, value: Any, timeout: Any = DEFAULT_TIMEOUT, version: int | None = None) -> None:
        self._call("set", key, value, timeout, version)

    def touch(self, key: Any, timeout: Any = DEFAULT_TIMEOUT, version: int | None = None) -> bool:
        return bool(self._call("touch", key, timeout, version))

    def delete(self, key: Any, version: int | None = None) -> bool:
        return bool(self._call("delete", key, version))

    def get_many(self, keys: Any, version: int | None = None) -> dict[Any, Any]:
        return dict(self._call("get_many", keys, version))

    def has_key(self, key: Any, version: int | None = None) -> bool:
        return bool(self._call("has_key", key, version))

    def incr(self, key: Any, delta: int = 1, version: int | None = None) -> int:
        return int(self._call("incr", key, delta, version))

    def set_many(self, data: dict[Any, Any], timeout: Any = DEFAULT_TIMEOUT, version: int | None = None) -> list[Any]:
        return list(self._call("set_many", data, timeout, version))

    def delete_many(self, keys: Any, version: int | None = None) -> None:
        self._call("delete_many", keys, version)

    def clear(self) -> None:
        self._call("clear")
