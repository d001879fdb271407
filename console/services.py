"""Workflows on sessions. Views, the API, commands and tasks call these; each is one transaction.

Errors a caller can act on are ``ServiceError`` subclasses whose message says what to fix;
the API turns them into 4xx answers, commands into their report.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, replace
from typing import Any

from django.conf import settings
from django.db import transaction

from compression import CompressionConfig, validate_messages

from .audit import audit
from .errors import Conflict, InvalidInput, NotFound
from .masking import placeholder_key
from .models import CompressionRun, Session

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
    return replace(config, secret_mask_key=placeholder_key())


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
