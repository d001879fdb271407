"""Workflows across models. Views, commands and tasks call these."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db import transaction

from compression.messages import ROLES

from .models import Session


class InvalidSession(ValueError):
    """Input that cannot become a session; the message says what to fix."""


def check_messages(messages: Any) -> list[dict[str, Any]]:
    if not isinstance(messages, list):
        raise InvalidSession("messages must be a JSON array of chat messages")
    for index, message in enumerate(messages):
        if not isinstance(message, dict):
            raise InvalidSession(f"message {index} is not a JSON object")
        role = message.get("role")
        if role not in ROLES:
            raise InvalidSession(f"message {index} has unknown role {role!r}")
        if role == "tool" and not message.get("tool_call_id"):
            raise InvalidSession(f"message {index} is a tool result without tool_call_id")
    return messages


@dataclass
class ImportedSession:
    key: str
    messages: list[dict[str, Any]]
    metadata: dict[str, Any]
    last_consolidated: int = 0
    status: str = "active"


@transaction.atomic
def create_session(data: ImportedSession) -> Session:
    """Create a session with its history in one transaction; an existing key is an error."""
    messages = check_messages(data.messages)
    if Session.objects.filter(key=data.key).exists():
        raise InvalidSession(f"session {data.key!r} already exists")
    if data.last_consolidated > len(messages):
        raise InvalidSession("last_consolidated is larger than the number of messages")
    session = Session.objects.create(
        key=data.key,
        metadata=data.metadata,
        status=data.status,
        last_consolidated=data.last_consolidated,
        channel=str(data.metadata.get("channel", ""))[:64],
    )
    session.append(messages)
    return session
