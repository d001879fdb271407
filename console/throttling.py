"""Throttling: API requests per key, failed API authentication per client IP, and login lockout (django-axes).

All counters live in the default cache (Redis in production, local memory in the embedded mode), so every
web process shares them. Rates are settings (``API_RATE_LIMIT``, ``API_AUTH_FAILURE_LIMIT``), read per request.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from axes.backends import AxesStandaloneBackend
from django.conf import settings
from django.http import HttpRequest
from ninja.throttling import AuthRateThrottle, SimpleRateThrottle


class _PerThread(threading.local):
    """ninja keeps one throttle object per API and sets ``key``/``history`` on it per request: one per thread."""


class KeyRateThrottle(AuthRateThrottle, _PerThread):
    """Requests per API key (or per logged-in user) at ``API_RATE_LIMIT``; past it a 429 with ``Retry-After``."""

    scope = "api"

    def __init__(self) -> None:  # the rate is read per request, not once at import
        self.rate = None

    def allow_request(self, request: HttpRequest) -> bool:
        self.rate = settings.API_RATE_LIMIT
        if not self.rate:
            return True
        self.num_requests, self.duration = self.parse_rate(self.rate)
        return super().allow_request(request)


class FailedAuthThrottle(SimpleRateThrottle, _PerThread):
    """Failed API authentications (unknown or revoked keys) per client IP at ``API_AUTH_FAILURE_LIMIT``.

    Only failures count; once over the limit, every bearer request from that IP is refused before its key
    is looked at, until the oldest failure leaves the window.
    """

    scope = "api_auth_failures"

    def __init__(self) -> None:
        self.rate = None

    def get_cache_key(self, request: HttpRequest) -> str:
        return self.cache_format % {"scope": self.scope, "ident": self.get_ident(request)}

    def _load(self, request: HttpRequest) -> bool:
        self.rate = settings.API_AUTH_FAILURE_LIMIT
        if not self.rate:
            return False
        self.num_requests, self.duration = self.parse_rate(self.rate)
        self.key = self.get_cache_key(request)
        self.now = time.time()
        since = self.now - (self.duration or 0)
        self.history = [t for t in self.cache.get(self.key, []) if t > since]
        return True

    def blocked(self, request: HttpRequest) -> bool:
        return self._load(request) and len(self.history) >= self.num_requests  # type: ignore[operator]

    def record_failure(self, request: HttpRequest) -> None:
        if self._load(request):
            self.throttle_success()  # stores this failure's time in the history


class LoginLockoutBackend(AxesStandaloneBackend):
    """django-axes' lockout for web logins; an ``authenticate()`` without a request (a command) is not one."""

    def authenticate(
        self, request: HttpRequest | None, username: str | None = None, password: str | None = None, **kwargs: Any
    ) -> Any:
        if request is None:
            return None
        return super().authenticate(request, username, password, **kwargs)
