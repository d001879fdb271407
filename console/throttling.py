"""Throttling: API requests per key, failed API authentications and failed logins per client address, and the
login lockout per user and address (django-axes).

All counters live in the default cache (Redis in production, local memory in the embedded mode), so every
web process shares them; while Redis is down each process counts alone (``console.cache``). Rates are settings
(``API_RATE_LIMIT``, ``API_AUTH_FAILURE_LIMIT``, ``LOGIN_ADDRESS_FAILURE_LIMIT``), read per request.
"""

from __future__ import annotations

import math
import threading
import time
from typing import Any

from axes.backends import AxesStandaloneBackend
from axes.exceptions import AxesBackendPermissionDenied
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


class FailureThrottle(SimpleRateThrottle, _PerThread):
    """Failures per client address in a sliding window, at the rate in setting ``setting`` (e.g. ``20/min``).

    Only failures count (``record_failure``); ``blocked`` says whether the address is over the limit, until the
    oldest failure leaves the window. The address is ninja's ``get_ident`` (``NUM_PROXIES`` decides whether
    ``X-Forwarded-For`` is believed), the same for the API and the login page.
    """

    def __init__(self, scope: str, setting: str) -> None:
        self.scope, self.setting = scope, setting
        self.rate = None

    def get_cache_key(self, request: HttpRequest) -> str:
        return self.cache_format % {"scope": self.scope, "ident": self.get_ident(request)}

    def _load(self, request: HttpRequest) -> bool:
        self.rate = getattr(settings, self.setting)
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

    def retry_after(self) -> int:
        """Whole seconds until the address may try again (after ``blocked`` said it may not)."""
        wait = self.wait()
        return max(1, math.ceil(wait)) if wait else 1


#: failed API authentications (unknown or revoked keys) per address; a valid key is never refused by it (api)
API_AUTH_FAILURES = FailureThrottle("api_auth_failures", "API_AUTH_FAILURE_LIMIT")
#: failed logins per address whatever the username (password spraying), beside django-axes' per user and address
LOGIN_FAILURES = FailureThrottle("login_failures", "LOGIN_ADDRESS_FAILURE_LIMIT")


class LoginLockoutBackend(AxesStandaloneBackend):
    """django-axes' lockout for web logins; an ``authenticate()`` without a request (a command) is not one.

    Before axes looks at the user, an address over ``LOGIN_ADDRESS_FAILURE_LIMIT`` failed logins (any usernames)
    is refused: the login page answers 429 as for a locked user, saying it is the address and for how long.
    """

    def authenticate(
        self, request: HttpRequest | None, username: str | None = None, password: str | None = None, **kwargs: Any
    ) -> Any:
        if request is None:
            return None
        if LOGIN_FAILURES.blocked(request):
            request.login_address_wait = LOGIN_FAILURES.retry_after()  # type: ignore[attr-defined]
            request.axes_locked_out = True  # type: ignore[attr-defined]  # AxesMiddleware answers with the lockout page
            raise AxesBackendPermissionDenied("too many failed logins from this address")
        return super().authenticate(request, username, password, **kwargs)


def count_failed_login(sender: Any, credentials: Any, request: HttpRequest | None = None, **kwargs: Any) -> None:
    """``user_login_failed``: one more failure for the address (not while it is refused: the window runs out)."""
    if request is not None and not hasattr(request, "login_address_wait"):
        LOGIN_FAILURES.record_failure(request)
