"""Session files to ImportedSession: the library's reader plus the console's defaults."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agent_compression.session_file import InputError, load_session

from .errors import InvalidInput
from .services.sessions import ImportedSession
from .services.validation import check_key

#: the largest value an integer column holds on every database we run on
MAX_INT = 2**31 - 1


def read_session_file(path: Path) -> ImportedSession:
    """Parse one file (echo-agent JSONL, a session object or a message array)."""
    try:
        messages, header = load_session(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, InputError) as exc:
        raise InvalidInput(str(exc)) from None
    metadata = header.get("metadata") or {}
    if not isinstance(metadata, dict):
        raise InvalidInput("metadata must be a JSON object")
    metadata = dict(metadata)
    for field in ("created_at", "updated_at"):
        if header.get(field):
            metadata.setdefault(field, header[field])
    if not header:
        metadata["source_file"] = path.name
    return ImportedSession(
        key=check_key(str(header.get("key") or f"import:{path.stem}")),
        messages=messages,
        metadata=metadata,
        last_consolidated=_whole_number(header, "last_consolidated") or 0,
        status=str(header.get("status") or "active"),
        context_window_tokens=_whole_number(header, "context_window_tokens"),
    )


def _whole_number(header: dict[str, Any], field: str) -> int | None:
    """``header[field]`` as an int (None when absent); a fraction, a boolean or text is refused by name."""
    value = header.get(field)
    if value is None:
        return None
    whole_text = isinstance(value, str) and value.strip().isdigit()
    if whole_text or (isinstance(value, float) and value.is_integer()):
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidInput(f"{field} is not a whole number: {value!r}")
    if not 0 <= value <= MAX_INT:
        raise InvalidInput(f"{field} must be between 0 and {MAX_INT}, not {value}")
    return value
