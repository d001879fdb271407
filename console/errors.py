"""The errors a caller can act on: each message says what to fix; ``status`` is the HTTP answer.

The API turns them into 4xx/5xx answers, pages into a message, commands into their report.
Nothing here imports the rest of the console: every layer may raise these.
"""

from __future__ import annotations


class ServiceError(Exception):
    """A request that cannot be carried out; the message says why and what to do."""

    status = 400


class InvalidInput(ServiceError):
    """Input the console refuses: a session's messages or key, an API key's name, a drift kind, a summarizer, ..."""

    status = 422


class NotFound(ServiceError):
    status = 404


class Conflict(ServiceError):
    status = 409


class ArchiveCorrupted(ServiceError):
    """Stored originals no longer match their checksum: never used silently."""

    status = 500


class TooManyWaiters(ServiceError):
    """Every waiter slot of this web process is taken; the client should retry or poll instead."""

    status = 429
    retry_after = 5
