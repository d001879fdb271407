"""What the console refuses before it writes: unstorable JSON, bad session keys, malformed messages, bad configs.

Every way in (pages, API, commands, imports, reported runs) goes through these; each raises
``InvalidInput`` (or ``NotFound`` for ``locked_session``) with a message saying what to fix.
"""

from __future__ import annotations

import json
import re
import unicodedata
from dataclasses import replace
from typing import Any

from django.conf import settings

from agent_compression import CompressionConfig, validate_messages

from ..errors import InvalidInput, NotFound
from ..masking import placeholder_key
from ..models import Session

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


#: JSON nested deeper than this is refused (chat messages need about 5 levels; walking stays iterative anyway)
MAX_JSON_DEPTH = 64
#: what PostgreSQL cannot store in text or jsonb (NUL) and what is not text at all (lone UTF-16 surrogates)
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def unstorable(value: Any, where: str = "", max_depth: int = MAX_JSON_DEPTH, strings: bool = True) -> str | None:
    """Why ``value`` (decoded JSON) cannot be stored, naming the path to the fault; None when it can.

    Refused anywhere, keys included: NUL characters, lone surrogates, nesting deeper than ``max_depth``.
    Iterative, so no input can exhaust the stack. ``strings=False`` checks the depth only (for JSON text
    known to hold no ``\\u0000`` or surrogate escape, see ``may_hold_unstorable``).
    """
    stack: list[tuple[Any, tuple[Any, ...]]] = [(value, ())]
    while stack:
        item, path = stack.pop()
        if isinstance(item, str):
            if not strings:
                continue
            bad = _UNSTORABLE.search(item)
            if bad:
                return f"{_path(where, path)}: {_character(bad.group())}"
        elif isinstance(item, (dict, list)):
            if len(path) >= max_depth:
                return f"{_path(where, path)}: nested deeper than {max_depth} levels"
            if isinstance(item, dict):
                for key, child in item.items():
                    bad = _UNSTORABLE.search(key) if isinstance(key, str) else None
                    if bad:
                        return f"{_path(where, (*path, key))}: the key {_character(bad.group())}"
                    stack.append((child, (*path, key)))
            else:
                stack.extend((child, (*path, index)) for index, child in enumerate(item))
    return None


#: how NUL and surrogates can appear in JSON text (raw control characters are not JSON; raw surrogates not UTF-8)
_ESCAPES = re.compile(r"\\u(?:0000|[dD][89a-fA-F])")


def may_hold_unstorable(json_text: str) -> bool:
    """False when decoding ``json_text`` cannot give a NUL or a surrogate (a quick scan of the text)."""
    return _ESCAPES.search(json_text) is not None


def _character(char: str) -> str:
    if char == "\x00":
        return "contains a NUL character (\\u0000), which cannot be stored; remove it"
    return f"contains a lone surrogate (\\u{ord(char):04x}), which is not text; send valid UTF-8"


def _path(where: str, path: tuple[Any, ...]) -> str:
    text = where
    for number, part in enumerate(path):
        if len(path) > 8 and 4 <= number < len(path) - 2:  # deep: the start and the end say where
            text += "…" if number == 4 else ""
            continue
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text.replace("\x00", "\\u0000") or "body"


#: Unicode categories refused in session keys: controls (tab, newline), format characters (bidi overrides,
#: zero-width spaces), surrogates, private use, unassigned, line and paragraph separators
_KEY_CATEGORIES = {"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"}
KEY_MAX = 255


def key_problem(key: Any) -> str | None:
    """Why ``key`` cannot name a session, or None. Every way a session is created goes through this.

    A key must be reachable as one URL path segment (``/api/v1/sessions/{key}``): no ``/``, not ``.`` or ``..``;
    and it must read as what it is in a list: no invisible, control or direction-changing characters.
    """
    if not isinstance(key, str) or not key:
        return "a session key must be a non-empty string"
    if len(key) > KEY_MAX:
        return f"a session key has at most {KEY_MAX} characters, not {len(key)}"
    if "/" in key or key in (".", ".."):
        return "a session key must not contain '/' nor be '.' or '..' (it is one segment of the session's URL)"
    if key != key.strip():
        return "a session key must not begin or end with whitespace"
    for char in key:
        if unicodedata.category(char) in _KEY_CATEGORIES:
            return (
                f"a session key must not contain U+{ord(char):04X} ({unicodedata.name(char, 'control character')}):"
                " control, invisible and direction-changing characters would disguise it"
            )
    return None


def check_key(key: Any) -> str:
    """``key`` when it can name a session, else InvalidInput saying why."""
    problem = key_problem(key)
    if problem:
        raise InvalidInput(f"key: {problem}")
    return key


def check_messages(messages: Any, first_index: int = 0) -> list[dict[str, Any]]:
    """Reject messages a chat API would refuse: unknown roles, malformed content or tool calls."""
    if not isinstance(messages, list):
        raise InvalidInput("messages must be a JSON array of chat messages")
    for index, message in enumerate(messages):
        problem = unstorable(message, f"message {first_index + index}")
        if problem:
            raise InvalidInput(problem)
    for violation in validate_messages(messages):
        if violation.code in _REJECTED:
            where = f"message {first_index + violation.index}" if violation.index >= 0 else "messages"
            problem = violation.message
            if violation.code == "missing_tool_call_id":
                problem = "a tool result without tool_call_id"
            raise InvalidInput(f"{where}: {problem}")
    return messages


def session_config(session: Session, overrides: dict[str, Any] | None = None) -> CompressionConfig:
    """The session's compression config: its context window plus per-run overrides (ValueError if invalid)."""
    data: dict[str, Any] = {"context_window_tokens": session.context_window_tokens}
    data.update(overrides or {})
    try:
        config = CompressionConfig.from_dict(data)
    except (TypeError, ValueError) as exc:
        raise InvalidInput(f"config: {exc}") from None
    # the summaries' placeholders are the pages' (never from a request: from_dict refuses the key)
    return replace(config, secret_mask_key=placeholder_key(), recall_hint=recall_hint(session))


#: the MCP tools that read a session's archive back (console/mcp_server.py), named in every summary when served
RECALL_TOOLS = ("search_archive", "read_archived_message", "list_summaries")


def recall_hint(session: Session) -> str | None:
    """The summary message's line telling the agent it can read the originals back over MCP (MCP_ENABLED)."""
    if not settings.MCP_ENABLED:
        return None
    key = json.dumps(session.key, ensure_ascii=False)
    return (
        f"The archived originals can be read back with the MCP tools {', '.join(RECALL_TOOLS)} "
        f"(session {key}; #N is the history_index)."
    )


def locked_session(key: str) -> Session:
    """The session called ``key``, its row locked until the transaction ends (call inside one)."""
    session = Session.objects.select_for_update().filter(key=key).first()
    if session is None:
        raise NotFound(f"no session {key!r}")
    return session
