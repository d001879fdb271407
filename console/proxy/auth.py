"""Who calls the proxy: a console API key whose role may ingest (create and append to sessions).

A verified key is remembered in the process for ``PROXY_AUTH_CACHE_SECONDS`` (no query per call; a
revocation takes that long to apply). While the database is unreachable a remembered key is still
accepted for ``STALE_GRACE_SECONDS``, so an outage of the console does not stop a runtime it already knew.
"""

from __future__ import annotations

import hashlib
import threading
import time
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import DatabaseError
from django.http import HttpRequest

from ..apikeys import authenticate_key
from ..roles import ADD, CHANGE
from ..throttling import API_AUTH_FAILURES

#: how long a remembered key stays usable while the database cannot be asked
STALE_GRACE_SECONDS = 900.0


@dataclass(frozen=True)
class Caller:
    user: Any
    verified_at: float


class Refused(Exception):
    def __init__(self, status: int, message: str, retry_after: int | None = None) -> None:
        super().__init__(message)
        self.status, self.retry_after = status, retry_after


_known: dict[str, Caller] = {}
_lock = threading.Lock()


def caller(request: HttpRequest) -> Any:
    """The user the call's key acts as; ``Refused`` (401, 403, 429, 503) otherwise."""
    header = request.headers.get("Authorization", "")
    scheme, _, token = header.partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token:
        raise Refused(401, "send the console API key as 'Authorization: Bearer <key>' (manage.py create_api_key)")
    digest = hashlib.sha256(token.encode()).hexdigest()
    now = time.monotonic()
    known = _known.get(digest)
    if known is not None and now - known.verified_at < settings.PROXY_AUTH_CACHE_SECONDS:
        return known.user
    try:
        user = authenticate_key(token)
        allowed = user is not None and user.has_perm(ADD) and user.has_perm(CHANGE)
    except DatabaseError:
        if known is not None and now - known.verified_at < STALE_GRACE_SECONDS:
            return known.user
        raise Refused(503, "the console cannot check the key now (its database is unavailable)", 5) from None
    if user is None:
        # a valid key is never refused for another client's bad ones: the throttle applies to failures only
        if API_AUTH_FAILURES.blocked(request):
            raise Refused(429, "too many failed authentications from this address; try again later", 60)
        API_AUTH_FAILURES.record_failure(request)
        with _lock:
            _known.pop(digest, None)
        raise Refused(401, "the API key is unknown or revoked")
    if not allowed:
        raise Refused(403, "this API key's role may not store sessions; use a key with the operator or admin role")
    with _lock:
        if len(_known) > 10_000:
            _known.clear()
        _known[digest] = Caller(user, now)
    return user


def forget_all() -> None:
    """Drop every remembered key (tests; a revocation that must apply at once)."""
    with _lock:
        _known.clear()
