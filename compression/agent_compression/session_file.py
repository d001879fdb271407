"""Reading session files: a JSON array of chat messages, a session object, or echo-agent JSONL.

echo-agent writes one JSON object per line: a ``{"_type": "metadata", ...}``
line (key, metadata, last_consolidated, status, timestamps), then one
chat-format message per line. Errors name the line or message at fault.
"""

from __future__ import annotations

import json
from typing import Any


class InputError(ValueError):
    """The text cannot be read as a message list; the message says where and why."""


def load_session(text: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Parse a session file's text; return ``(messages, header)``.

    ``header`` is the echo-agent metadata line, or for a JSON object
    ``{"key", "messages", "metadata", ...}`` everything but its messages;
    ``{}`` for a plain array.
    """
    stripped = text.lstrip()
    if not stripped:
        raise InputError("input is empty")
    if stripped.startswith("["):
        return _check_messages(_parse_json(text)), {}
    try:
        # JSONL stops parsing at the end of its first line ("Extra data"), so this is cheap
        whole = json.loads(text)
    except json.JSONDecodeError:
        whole = None
    if isinstance(whole, dict) and "messages" in whole:
        return _check_messages(whole["messages"]), {k: v for k, v in whole.items() if k != "messages"}
    header: dict[str, Any] = {}
    messages: list[Any] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InputError(f"line {number} is not valid JSON: {exc.msg}") from None
        if isinstance(item, dict) and item.get("_type") == "metadata":
            header = item
            continue
        if not isinstance(item, dict):
            raise InputError(f"line {number} is not a JSON object")
        messages.append(item)
    return _check_messages(messages), header


def _parse_json(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"invalid JSON: {exc}") from None


def _check_messages(data: Any) -> list[dict[str, Any]]:
    if not isinstance(data, list):
        raise InputError(f"expected a JSON array of messages, got {type(data).__name__}")
    for i, item in enumerate(data):
        if not isinstance(item, dict):
            raise InputError(f"message {i} is not a JSON object")
        if not isinstance(item.get("role"), str):
            raise InputError(f"message {i} has no string 'role'")
    return data
