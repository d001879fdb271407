"""Small helpers over OpenAI chat-format messages: canonical JSON, hashes, lookups."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any

Message = dict[str, Any]

#: roles the OpenAI chat format knows
ROLES = frozenset({"system", "developer", "user", "assistant", "tool"})


def canonical_json(value: Any) -> str:
    """JSON with sorted keys, no ASCII escaping and no spaces: the form hashes are taken of."""
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def message_sha256(message: Message) -> str:
    """sha256 (hex) of one message's canonical JSON."""
    return hashlib.sha256(canonical_json(message).encode("utf-8")).hexdigest()


def messages_sha256(messages: Sequence[Message]) -> str:
    """sha256 (hex) of a message list's canonical JSON (the list itself, not a concatenation)."""
    return hashlib.sha256(canonical_json(list(messages)).encode("utf-8")).hexdigest()


def copy_json(value: Any) -> Any:
    """Deep copy of JSON-like data (dicts, lists, scalars); much faster than ``copy.deepcopy``."""
    if isinstance(value, dict):
        return {k: copy_json(v) if isinstance(v, (dict, list)) else v for k, v in value.items()}
    if isinstance(value, list):
        return [copy_json(v) if isinstance(v, (dict, list)) else v for v in value]
    return value


def role_of(message: Any) -> str | None:
    """The message's role, or ``None`` when it is not a dict or has no string role."""
    if isinstance(message, dict):
        role = message.get("role")
        if isinstance(role, str):
            return role
    return None


def tool_calls_of(message: Any) -> list[dict[str, Any]]:
    """The well-formed-looking tool calls of an assistant message (dicts only), else ``[]``."""
    if not isinstance(message, dict) or message.get("role") != "assistant":
        return []
    calls = message.get("tool_calls")
    if not isinstance(calls, list):
        return []
    return [c for c in calls if isinstance(c, dict)]


def tool_call_ids(message: Any) -> list[str]:
    """Ids of the tool calls of an assistant message, in order."""
    return [c["id"] for c in tool_calls_of(message) if isinstance(c.get("id"), str)]


def call_name(call: dict[str, Any]) -> str:
    fn = call.get("function")
    name = fn.get("name") if isinstance(fn, dict) else None
    return name if isinstance(name, str) else ""


def call_arguments(call: dict[str, Any]) -> str:
    fn = call.get("function")
    args = fn.get("arguments") if isinstance(fn, dict) else None
    return args if isinstance(args, str) else ""


def latest_user_index(messages: Sequence[Any]) -> int | None:
    """Index of the last message with role ``user``, or ``None``."""
    for i in range(len(messages) - 1, -1, -1):
        if role_of(messages[i]) == "user":
            return i
    return None


def content_text(message: Any) -> str:
    """The message's text: a string content, or its text parts joined; ``""`` otherwise."""
    if not isinstance(message, dict):
        return ""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
    return ""


def one_line(text: str, limit: int) -> str:
    """``text`` on one line (white space folded), cut to ``limit`` characters with an ellipsis.

    Only the first ``2 * limit`` characters are looked at, so a huge text costs no more than a short one.
    """
    text = " ".join(text[: limit * 2].split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def call_index(messages: Sequence[Any]) -> dict[str, tuple[int, dict[str, Any]]]:
    """Map tool_call id -> (index of the assistant message, the call). Later calls win on duplicate ids."""
    index: dict[str, tuple[int, dict[str, Any]]] = {}
    for i, m in enumerate(messages):
        if isinstance(m, dict) and m.get("tool_calls"):
            for call in tool_calls_of(m):
                cid = call.get("id")
                if isinstance(cid, str):
                    index[cid] = (i, call)
    return index
