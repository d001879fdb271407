"""Sessions: create one with its history, append to it (which may queue an automatic compression)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import transaction

from ..audit import audit
from ..errors import Conflict, InvalidInput
from ..models import CompressionRun, Session
from .runs import queue_run
from .validation import check_key, check_messages, locked_session, session_config, unstorable


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
    check_key(data.key)
    messages = check_messages(data.messages)
    if data.context_window_tokens is not None and not 256 <= data.context_window_tokens <= 10_000_000:
        raise InvalidInput("context_window_tokens must be between 256 and 10000000")
    if not isinstance(data.metadata, dict):
        raise InvalidInput("metadata must be a JSON object")
    problem = unstorable(data.metadata, "metadata")
    if problem:
        raise InvalidInput(problem)
    if Session.objects.filter(key=data.key).exists():
        raise Conflict(f"session {data.key!r} already exists")
    if not 0 <= data.last_consolidated <= len(messages):
        raise InvalidInput("last_consolidated must be between 0 and the number of messages")
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


def append_messages(
    key: str, messages: Any, expected_version: int | None = None, user: Any = None
) -> tuple[Session, CompressionRun | None]:
    """Append to a session's history; may queue an automatic compression (once, not per append).

    Returns the session and the run the trigger queued, if any.
    """
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
