"""Workflows on sessions. Views, the API, commands and tasks call these; each is one transaction.

Errors a caller can act on are ``ServiceError`` subclasses whose message says what to fix;
the API turns them into 4xx answers, commands into their report.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import transaction

from compression import CompressionConfig, validate_messages

from .models import AuditEvent, CompressionRun, Session

#: validator codes that make a message unusable. Orphan or missing tool results are accepted:
#: results arrive in later appends, and compression repairs what stays broken.
_REJECTED = {
    "not_a_list",
    "not_an_object",
    "unknown_role",
    "bad_content",
    "unexpected_tool_calls",
    "missing_tool_call_id",
    "bad_tool_calls",
}


class ServiceError(Exception):
    """A request that cannot be carried out; the message says why and what to do."""

    status = 400


class InvalidSession(ServiceError):
    """Input that cannot become (part of) a session."""

    status = 422


class NotFound(ServiceError):
    status = 404


class Conflict(ServiceError):
    status = 409


def _has_nul(value: Any) -> bool:
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        return any(_has_nul(k) or _has_nul(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_has_nul(v) for v in value)
    return False


def check_messages(messages: Any, first_index: int = 0) -> list[dict[str, Any]]:
    """Reject messages a chat API would refuse: unknown roles, malformed content or tool calls."""
    if not isinstance(messages, list):
        raise InvalidSession("messages must be a JSON array of chat messages")
    for index, message in enumerate(messages):
        if _has_nul(message):
            raise InvalidSession(
                f"message {first_index + index}: contains a NUL character (\\u0000), which cannot be stored; remove it"
            )
    for violation in validate_messages(messages):
        if violation.code in _REJECTED:
            where = f"message {first_index + violation.index}" if violation.index >= 0 else "messages"
            problem = violation.message
            if violation.code == "missing_tool_call_id":
                problem = "a tool result without tool_call_id"
            raise InvalidSession(f"{where}: {problem}")
    return messages


def session_config(session: Session, overrides: dict[str, Any] | None = None) -> CompressionConfig:
    """The session's compression config: its context window plus per-run overrides (ValueError if invalid)."""
    data: dict[str, Any] = {"context_window_tokens": session.context_window_tokens}
    data.update(overrides or {})
    try:
        return CompressionConfig.from_dict(data)
    except (TypeError, ValueError) as exc:
        raise InvalidSession(f"config: {exc}") from None


def person(user: Any) -> Any:
    """The logged-in user, or None for the system (a worker, the trigger) and anonymous callers."""
    return user if getattr(user, "is_authenticated", False) else None


def actor_label(user: Any) -> str:
    return user.get_username() if person(user) else "system"


def audit(user: Any, action: str, obj: Any, before: Any = None, after: Any = None, label: str = "") -> AuditEvent:
    """Record a state change. ``user`` None means the system (a worker, the trigger)."""
    return AuditEvent.objects.create(
        actor=person(user),
        actor_label=label or actor_label(user),
        action=action,
        object_type=type(obj)._meta.model_name,
        object_id=str(obj.pk),
        before=before,
        after=after,
    )


@dataclass
class ImportedSession:
    key: str
    messages: list[dict[str, Any]]
    metadata: dict[str, Any]
    last_consolidated: int = 0
    status: str = "active"
    context_window_tokens: int | None = None


@transaction.atomic
def create_session(data: ImportedSession, user: Any = None) -> Session:
    """Create a session with its history in one transaction; an existing key is a conflict."""
    messages = check_messages(data.messages)
    if not data.key or len(data.key) > 255 or "\x00" in data.key:
        raise InvalidSession("key must be 1 to 255 characters, without NUL")
    if data.context_window_tokens is not None and not 256 <= data.context_window_tokens <= 10_000_000:
        raise InvalidSession("context_window_tokens must be between 256 and 10000000")
    if not isinstance(data.metadata, dict):
        raise InvalidSession("metadata must be a JSON object")
    if Session.objects.filter(key=data.key).exists():
        raise Conflict(f"session {data.key!r} already exists")
    if not 0 <= data.last_consolidated <= len(messages):
        raise InvalidSession("last_consolidated must be between 0 and the number of messages")
    session = Session(
        key=data.key,
        metadata=data.metadata,
        status=data.status,
        last_consolidated=data.last_consolidated,
        channel=str(data.metadata.get("channel", ""))[:64],
    )
    if data.context_window_tokens is not None:
        session.context_window_tokens = data.context_window_tokens
    session_config(session)  # a context window the pipeline refuses is refused here
    session.save()
    session.append(messages)
    if user is not None:
        audit(user, "session.create", session, after={"messages": len(messages)})
    return session


def locked_session(key: str) -> Session:
    """The session called ``key``, its row locked until the transaction ends (call inside one)."""
    session = Session.objects.select_for_update().filter(key=key).first()
    if session is None:
        raise NotFound(f"no session {key!r}")
    return session


def append_messages(
    key: str, messages: Any, expected_version: int | None = None, user: Any = None
) -> tuple[Session, CompressionRun | None]:
    """Append to a session's history; may queue an automatic compression (once, not per append).

    Returns the session and the run the trigger queued, if any.
    """
    from .runs import queue_run

    with transaction.atomic():
        session = locked_session(key)
        check_messages(messages, first_index=session.message_count)
        if expected_version is not None and expected_version != session.version:
            raise Conflict(
                f"session {key!r} is at version {session.version}, not {expected_version}: "
                "read it again and resend what it is missing"
            )
        session.append(messages)
        run = None
        if (
            settings.AUTO_COMPRESS
            and not session.auto_compression_stopped
            and session.token_count >= session_config(session).trigger_tokens
            and not session.runs.filter(status__in=CompressionRun.ACTIVE).exists()
        ):
            run = queue_run(session, CompressionRun.Trigger.AUTO)
    return session, run
